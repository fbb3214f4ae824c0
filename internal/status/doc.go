// Package status turns a pod's spec, its runtime status and the outcome of
// its last sync into a v1.PodStatus with the kubelet's phases, conditions
// and reasons (Compute), and publishes it: to its Publisher at once (API
// mode: the API server's writer), as the published view (Manager.Pods, the
// node server's /pods), and as one JSON file per pod under a status
// directory, written atomically by a paced queue (queue.go, Manager.Run),
// read back by `nodeagent pods` and `nodeagent describe` (List, Read).
// Events are recorded by Events, built before the parts that record them,
// into <ns>_<name>.events.json by the same kind of queue.
//
// In-place resize (Config.Resizes, the allocation manager): each app
// container's and sidecar's allocatedResources (its allocated requests)
// and resources (in effect: what a running instance was created with or
// last resized to in place; as allocated otherwise), and the pod's
// PodResizePending and PodResizeInProgress conditions with their own
// observed generation and transition times, after the others.
//
// It does not own the desired pods (internal/podmanager does): what it
// keeps per pod belongs to the status it published — the spec it was
// published with, until Removed, and whether it is a refusal or eviction
// (final, never Unknown in a runtime outage) — which outlives the pod's
// desired entry (a removed pod shows Terminating until its kill ended).
//
// Concurrency: Manager's methods are safe for concurrent use by the pod
// workers and the loop.
package status
