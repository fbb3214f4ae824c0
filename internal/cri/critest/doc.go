// Package critest provides Fake, a hand-written in-memory cri.Client for
// tests of the runtime and of code above it, Objects, an in-memory
// cri.Objects (ConfigMaps, Secrets, service env vars, tokens that expire
// by the fake clock), and RuntimeClasses, an in-memory cri.RuntimeClasses.
//
// It owns: sandboxes, containers and images kept in maps, with the state
// transitions a CRI runtime makes (RunPodSandbox → READY, CreateContainer →
// CREATED, StartContainer → RUNNING, StopContainer → EXITED, removals),
// containerd's check of a pid TARGET namespace (the target runs in the
// same sandbox), label-selector filtering for the list calls, a record of
// every call in order, and errors injected per method. Tests move containers on with
// ExitContainer and SetSandboxState.
//
// In-place resize: UpdateContainerResources merges the request's
// non-zero Linux resources into the container's (containerd's merge:
// zero fields leave the current value), ContainerStatus reports them, and
// ListContainerStats and PodSandboxStats report the memory usage set with
// SetMemoryUsage and SetSandboxMemoryUsage (zero by default).
//
// Runtime handlers: RunPodSandbox accepts the default one and those added
// with AddRuntimeHandler, and fails any other as containerd does ("no
// runtime for … is configured").
//
// It does not own any kubelet logic: no restart decisions, no networking
// (each sandbox gets a made-up IP, and an IPv6 one too after DualStack),
// no image registry (PullImage succeeds unless an error is injected).
//
// Concurrency: every method is safe for concurrent use; the runtime stops
// a pod's containers in parallel.
package critest
