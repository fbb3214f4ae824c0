// Package pod holds the plain types shared by every other package: the
// update a pod source emits, the runtime's view of a pod, and the status the
// agent reports. It imports nothing internal and has no behaviour beyond
// small helpers on these types.
package pod
