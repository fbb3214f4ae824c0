// Package shutdown is graceful node shutdown, as the kubelet's
// pkg/kubelet/nodeshutdown: at start it takes a systemd-logind "delay"
// inhibitor lock on shutdown (logind's D-Bus API); when logind announces
// the shutdown (PrepareForShutdown true) the node is shutting down — the
// Node's Ready condition says so and admission refuses new pods
// (NodeShutdown) — and the active pods are stopped group by group, lowest
// priority first, each group within its grace period
// (shutdownGracePeriodByPodPriority, or shutdownGracePeriod and
// shutdownGracePeriodCriticalPods: regular pods, then critical ones),
// their preStop hooks run, each pod Failed with reason Terminated and
// "Pod was terminated in response to imminent node shutdown.". Then the
// lock is released and the shutdown goes on. A cancelled shutdown
// (PrepareForShutdown false) takes the lock again.
//
// It owns the lock, the schedule and the shutting-down state; logind is
// behind Inhibitor (logind.go over godbus, as the kubelet's own systemd
// helper), the pods are the pod manager's and stopped through the loop.
//
// When logind's InhibitDelayMaxSec is shorter than the periods asked
// for, it is raised as the kubelet raises it: a logind.conf.d drop-in
// (the kubelet's 99-kubelet.conf) and a reload of logind; if it is still
// shorter, nodeagent warns and goes on. Simpler than the kubelet: the
// shutdown state is not written to a file.
package shutdown
