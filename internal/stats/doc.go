// Package stats builds the node's resource figures: the kubelet's
// summary API (/stats/summary, k8s.io/kubelet's stats/v1alpha1 types)
// and, from the same figures, the resource metrics (/metrics/resource)
// that metrics-server scrapes for `kubectl top`.
//
// Pods and containers come from the runtime over CRI: the agent's ready
// sandboxes and running containers (ListPodSandbox, ListContainers, by
// the agent's labels), their usage (ListContainerStats) and, where the
// runtime implements it, the pod-level usage with the pod's network
// (ListPodSandboxStats; containerd 1.6 and 2.x have it). When that call
// fails (a runtime without it; containerd fails the whole list when one
// sandbox has no cgroup parent, as pods run with --cgroups-per-qos=false
// may not) the pod's CPU and memory are the sum of its containers' and
// it has no network figures. The node's
// figures come from the host: the root cgroup (CPU, memory; /proc/stat
// and /proc/meminfo where the root cgroup has no such files), /proc/net/dev,
// statfs of the agent's root dir (nodefs) and of the runtime's image file
// system (CRI ImageFsInfo), and the process table for rlimit.
//
// The simpler choice over cAdvisor, which the kubelet embeds: the CRI
// calls are the runtime's own figures (containerd computes them from the
// cgroups it made), one read per request, nothing sampled in the
// background; the one figure that needs two samples, the node's
// usageNanoCores, is the rate since an earlier request at least a second
// before (absent until there is one; every caller shares the baseline). Not here: volume usage (the kubelet's per-volume du) and the
// kubelet's system containers (kubelet, runtime, pods).
//
// Concurrency: a Provider is safe for concurrent use.
package stats
