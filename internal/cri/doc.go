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
// managed /etc/hosts (hosts.go, <pod>/etc-hosts), seccomp and AppArmor
// profiles and the masked and read-only /proc paths (security.go). The
// termination message of an exited container is read once, when
// InspectPod first sees the exit (termination.go: its message file, or
// the tail of its CRI log with FallbackToLogsOnError).
//
// What pods read from the API server comes through Objects (ConfigMaps,
// Secrets, service account tokens, service env vars), which API mode
// supplies and standalone mode leaves nil: the container environment
// (envFrom, configMapKeyRef/secretKeyRef, service variables), the
// content of configMap, secret, downwardAPI and projected volumes
// (written with volume.WriteAtomic under <pod>/volumes/kubernetes.io~*,
// re-rendered on every sync of a pod with running containers, tokens
// cached and renewed after 80% of their life) and the credentials of
// imagePullSecrets (the kubelet's keyring matching). A missing required
// object is a CreateContainerConfigError that the next sync retries;
// without Objects only downward API volumes render. Not done: fsGroup /
// per-file owners on these volumes, tmpfs for secrets, clusterTrustBundle
// and podCertificate projections.
//
// It does not own when to do any of this (syncloop), which pods are wanted
// (podsource) or the pod's reported status (status).
//
// Concurrency: a Runtime is safe for concurrent use by one worker per pod;
// two calls for the same pod must not overlap (the pod worker serialises
// them).
package cri
