// Package cluster runs a real Kubernetes control plane for nodeagent's
// end-to-end tests: etcd, kube-apiserver and kube-controller-manager, from
// the binaries hack/install-controlplane.sh caches in
// $NODEAGENT_RIG_CACHE/bin, listening on 127.0.0.1 only, on free ports.
// It is used by the end-to-end tests (-tags integration) and by the
// benchmark (test/bench).
//
// It owns the processes, the credentials (a cluster CA made in Go that
// serves the apiserver, authenticates clients and signs CSRs through the
// controller-manager; an admin client in system:masters; a bootstrap token
// whose group system:bootstrappers may create CSRs) and the readiness waits.
// It does not run a scheduler, kube-proxy or any node: the agent under test
// is the node, and tests place pods by spec.nodeName. CSRs are never
// approved automatically (no auto-approval RBAC is granted); a test approves
// them with ApproveCSRs, as an operator would.
//
// Choices, each the simpler of two:
//   - etcd speaks plain HTTP on loopback rather than mutual TLS: it is a
//     throwaway store only the apiserver reaches, and it skips fsync.
//   - kube-controller-manager serves nothing (--secure-port=0) and does not
//     elect a leader: nothing probes it and it is alone.
//   - --endpoint-reconciler-type=none: the kubernetes Service has no
//     endpoints, since 127.0.0.1 is unreachable from a pod's network
//     namespace anyway.
//   - kube-apiserver runs with --shutdown-send-retry-after, so SIGTERM
//     ends it in about 2 s instead of waiting --request-timeout (60 s) for
//     the controller-manager's open watches.
//   - The apiserver does not verify agents' serving certificates
//     (no --kubelet-certificate-authority): agents serve self-signed ones.
//
// Concurrency: a Cluster's methods may be called from several goroutines;
// Stop, StopAPIServer and StartAPIServer serialise on one mutex. Processes
// run in their own process group with Pdeathsig SIGKILL, so they die with
// a crashed test binary (Pdeathsig follows the thread that started them;
// the Go runtime keeps threads unless a goroutine exits while locked to
// one, which nothing here does); Stop ends them by PID (SIGTERM, then SIGKILL) and
// waits. Everything, logs included (etcd.log, kube-apiserver.log,
// kube-controller-manager.log), stays under Options.Dir.
package cluster
