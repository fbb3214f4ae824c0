// Package cri runs pods on a container runtime over the CRI gRPC API.
//
// It owns: the connection to the runtime and image services (with a
// timeout on every call and errors translated to ErrNotFound /
// ErrUnavailable), the kubelet-compatible labels and annotations, the pure
// decision of what a pod needs next (computeActions, from spec and runtime
// status), image pulls with pull policy, backoff and credentials (the pod's
// pull secrets — API Secrets, or PullSecretsDir files in standalone mode —
// then the node-wide docker config; the pulls themselves go through
// internal/images' Puller), sandbox and container
// configs, init containers in order, CrashLoopBackOff, killing pods, and
// listing what the agent owns for PLEG and housekeeping.
//
// Container configs carry what the kubelet adds to the spec: the pod's
// managed /etc/hosts (<pod>/etc-hosts, written by package podvolumes),
// seccomp and AppArmor profiles and the masked and read-only /proc paths
// (security.go). The
// termination message of an exited container is read once, when
// InspectPod first sees the exit (termination.go: its message file, or
// the tail of its CRI log with FallbackToLogsOnError).
//
// Ephemeral containers (kubectl debug, added through the pod's
// ephemeralcontainers subresource) are started as the kubelet starts
// them: once, in the pod's ready sandbox, before any other container of
// the sync and even while the pod initialises; never again whatever their
// exit, nor in a later sandbox; not in a pod whose app containers are
// over; stopped only with the pod. Their config is a regular container's
// (image pulled with the pod's pull secrets, env, mounts, security
// context, stdin/tty) in the process namespace of their
// targetContainerName's running instance (pid TARGET) when the pod's
// containers have their own, and they are marked with
// AnnotationEphemeral so the runtime's listing alone tells them apart.
// Adding one changes no hash: each container's hash covers that container
// only, and static pods, whose content hash is recorded on the sandbox,
// have none.
//
// In-place resize (the pod's resize subresource): a container's hash
// covers its spec but its resources and resize policy, so a resize is no
// spec change. SyncPod works on the pod as the allocation manager
// allocated it (Config.Allocations: Resize decides a resize of the spec
// first); a running app container or sidecar whose allocated cpu or
// memory differ from what it runs with — recorded at its creation in
// AnnotationContainerResources, after an in-place resize in the
// allocation manager's Actuated record — is resized in place (resize.go,
// the kubelet's doPodResizeAction: memory limits below the current usage
// refused, the pod cgroup raised through the SandboxMutators before the
// UpdateContainerResources calls and lowered after them), or restarted
// when its resizePolicy says RestartContainer for a changed resource.
// Containers of an agent before in-place resize carry a hash of their
// whole spec: one that matches the spec is adopted (its new-style hash
// and resources recorded), so an upgrade restarts nothing; the
// PodResizeInProgress condition follows from each sync's outcome
// (Allocations.ResizeProgress).
//
// Pod directories and the volumes in them belong to package podvolumes
// (Config.Volumes): cri asks it for a container's volume mounts and
// /etc/hosts before each start, for a refresh of the rendered volumes on
// every sync of a pod with running containers (so ConfigMap, Secret,
// label and token updates reach them), and for the removal of
// directories of gone pods (CleanupDirs); cri still removes a killed
// pod's directory and keeps the termination message files in it.
//
// A pod's runtimeClassName chooses the CRI runtime handler of its sandbox
// and of its image pulls (runtimeclass.go): RuntimeClasses, which API
// mode supplies, gives the RuntimeClass's handler; a missing RuntimeClass
// fails the sandbox's creation (FailedCreatePodSandBox), retried on the
// next sync. Standalone mode has no RuntimeClasses and refuses such a pod
// the sandbox rather than run it on the default handler — stricter than
// the kubelet, which without an API client ignores the name.
//
// What pods read from the API server comes through Objects (ConfigMaps,
// Secrets, service account tokens, service env vars), which API mode
// supplies and standalone mode leaves nil: the container environment
// (envFrom, configMapKeyRef/secretKeyRef, service variables; downward
// API values through package downward, as volumes), the volumes (through
// podvolumes, which embeds the same Objects) and the credentials of
// imagePullSecrets (the kubelet's keyring matching). A missing required
// object is a CreateContainerConfigError that the next sync retries.
//
// It does not own when to do any of this (syncloop), which pods are wanted
// (podsource) or the pod's reported status (status).
//
// Concurrency: a Runtime is safe for concurrent use by one worker per pod;
// two calls for the same pod must not overlap (the pod worker serialises
// them).
package cri
