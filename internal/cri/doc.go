// Package cri runs pods on a container runtime over the CRI gRPC API.
//
// It owns: the connection to the runtime and image services (with a
// timeout on every call and errors translated to ErrNotFound /
// ErrUnavailable), the kubelet-compatible labels and annotations, the pure
// decision of what a pod needs next (computeActions, from spec and runtime
// status), image pulls with pull policy and backoff, sandbox and container
// configs, init containers in order, CrashLoopBackOff, killing pods, and
// listing what the agent owns for PLEG and housekeeping.
//
// It does not own when to do any of this (syncloop), which pods are wanted
// (podsource) or the pod's reported status (status).
//
// Concurrency: a Runtime is safe for concurrent use by one worker per pod;
// two calls for the same pod must not overlap (the pod worker serialises
// them).
package cri
