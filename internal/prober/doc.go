// Package prober runs containers' startup, liveness and readiness probes,
// as the kubelet's pkg/kubelet/prober: one worker per container and probe
// kind, started when the pod is first synced and stopped with it; each
// probes the container's current instance every periodSeconds (the first
// run jittered while the agent has just started), counts consecutive
// successes and failures against the thresholds, and keeps a verdict per
// container instance (a restart starts without one).
//
//	startup  ──success──> liveness and readiness run (until then they wait)
//	liveness/startup ──failure──> the runtime kills the container
//	readiness ──> the container's ready, ContainersReady and Ready
//
// A changed verdict is sent on Updates, which the sync loop selects on,
// so it reaches the pod's status at once (no wait for a resync); the
// runtime and the status read the verdicts through pod.ProbeResults.
//
// Exec probes go through CRI ExecSync; httpGet, tcpSocket and grpc
// through internal/probe, against the pod IP (the node's for host-network
// pods). A probe that cannot be run (a CRI error other than a timeout) is
// reported and not counted, as the kubelet throws such results away.
package prober
