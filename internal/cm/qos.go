package cm

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// oom_score_adj values of the kubelet's pkg/kubelet/qos/policy.go.
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// isNodeCritical reports a system-node-critical pod, which the kubelet
// protects as a Guaranteed one.
func isNodeCritical(p *v1.Pod) bool {
	return p.Spec.PriorityClassName == "system-node-critical"
}

// OOMScoreAdj is the oom_score_adj of a container of p on a node with
// memoryCapacity bytes (the kubelet's GetContainerOOMScoreAdjust, without
// the KubeletOOMScoreAdjTieBreak refinement): Guaranteed and node-critical
// -997, BestEffort 1000, Burstable 1000 - 1000*request/capacity within
// [3, 999] — a sidecar no higher than the pod's regular containers, and
// with pod-level requests the part no container requests shared among
// all containers. A runtime set to restrict oom_score_adj (containerd's
// restrict_oom_score_adj) raises negative values to its own.
func OOMScoreAdj(p *v1.Pod, c *v1.Container, memoryCapacity int64) int64 {
	if isNodeCritical(p) {
		return guaranteedOOMScoreAdj
	}
	switch pod.QOSClass(p) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return besteffortOOMScoreAdj - 1
	}
	var extra int64
	if resourcehelper.IsPodLevelRequestsSet(p) {
		extra = unrequestedPodMemoryPerContainer(p)
	}
	adj := 1000 - 1000*(c.Resources.Requests.Memory().Value()+extra)/memoryCapacity
	if isSidecar(p, c) && len(p.Spec.Containers) > 0 {
		minReq := p.Spec.Containers[0].Resources.Requests.Memory().Value()
		for _, rc := range p.Spec.Containers[1:] {
			minReq = min(minReq, rc.Resources.Requests.Memory().Value())
		}
		adj = min(adj, 1000-1000*(minReq+extra)/memoryCapacity)
	}
	// Above any Guaranteed container using all the memory, below any
	// BestEffort one.
	return min(max(adj, 1000+guaranteedOOMScoreAdj), besteffortOOMScoreAdj-1)
}

// unrequestedPodMemoryPerContainer is the pod-level memory request no
// container requests, shared among all the pod's containers.
func unrequestedPodMemoryPerContainer(p *v1.Pod) int64 {
	podReq := p.Spec.Resources.Requests.Memory()
	if podReq.IsZero() {
		return 0
	}
	n := int64(len(p.Spec.Containers) + len(p.Spec.InitContainers))
	if n == 0 {
		return 0
	}
	sum := resourcehelper.AggregateContainerRequests(p, resourcehelper.PodResourcesOptions{})
	left := podReq.DeepCopy()
	left.Sub(sum[v1.ResourceMemory])
	return max(left.Value(), 0) / n
}

// isSidecar reports whether c is one of p's restartable init containers.
func isSidecar(p *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	return slices.ContainsFunc(p.Spec.InitContainers, func(ic v1.Container) bool { return ic.Name == c.Name })
}
