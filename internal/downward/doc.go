// Package downward computes the values of the downward API as the kubelet
// renders them: pod fields (fieldRef: metadata, spec.nodeName, the pod's
// IPs — ordered the node's IP family first, a hostNetwork pod having the
// node's — and the node's IP, labels and annotations) and container
// resources (resourceFieldRef: requests and limits in units of a divisor,
// an unset limit read as the pod's limit or the node's allocatable
// amount, Node.Allocatable).
//
// Two consumers read the same values: the container environment
// (package cri, env vars with valueFrom) and the downwardAPI and
// projected volumes (package podvolumes). Keeping the values here lets
// both say the same thing without one importing the other; both should
// give the same Node (IP and Allocatable).
//
// It does not resolve ConfigMap or Secret references, expand $(VAR)
// references or write files. Functions are pure, but for a Node without
// Allocatable: its figures (CPUs, memory, the size of the root
// directory's filesystem) are read from the host on each call. Safe for
// concurrent use.
package downward
