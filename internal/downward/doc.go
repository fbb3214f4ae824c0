// Package downward computes the values of the downward API as the kubelet
// renders them: pod fields (fieldRef: metadata, spec.nodeName, the pod's
// and the node's IPs, labels and annotations) and container resources
// (resourceFieldRef: requests and limits in units of a divisor, an unset
// limit read as the pod's limit or the node's allocatable amount).
//
// Two consumers read the same values: the container environment
// (package cri, env vars with valueFrom) and the downwardAPI and
// projected volumes (package podvolumes). Keeping the values here lets
// both say the same thing without one importing the other.
//
// It does not resolve ConfigMap or Secret references, expand $(VAR)
// references or write files. Functions are pure but for the node's
// figures (CPUs, memory, the size of the root directory's filesystem),
// read from the host on each call; safe for concurrent use.
package downward
