package cm

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// CPU constants of the kubelet's helpers_linux.go.
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliPerCPU   = 1000
	quotaPeriod   = 100000 // 100ms, in µs
	minQuotaValue = 1000
)

// Resources are the limits of one cgroup. Zero CPUQuota and Memory mean
// unlimited; CPUShares is always set; zero PIDs leaves pids.max as it is
// (the kubelet sets it only with --pod-max-pids).
type Resources struct {
	CPUShares uint64
	// CPUQuota is the CFS quota in µs per CPUPeriod.
	CPUQuota  int64
	CPUPeriod uint64
	// Memory is the memory limit in bytes.
	Memory int64
	// PIDs is the most processes the cgroup may hold.
	PIDs int64
}

// PodResources are the limits of p's pod cgroup (the kubelet's
// ResourceConfigForPod, CFS quota enforced): the pod's requests and limits
// summed as the scheduler sums them (init containers and sidecars
// included, overhead added, pod-level resources winning);
//
//   - Guaranteed: shares from the cpu request, quota from the cpu limit,
//     the memory limit;
//   - Burstable: shares from the cpu request; the quota only when every
//     container (or the pod) has a cpu limit, the memory limit only when
//     every container (or the pod) has one;
//   - BestEffort: shares 2, nothing else.
func PodResources(p *v1.Pod) Resources {
	reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
	cpuLimited, memLimited := true, true
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if cs[i].Resources.Limits.Cpu().IsZero() {
				cpuLimited = false
			}
			if cs[i].Resources.Limits.Memory().IsZero() {
				memLimited = false
			}
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(p) {
		if !p.Spec.Resources.Limits.Cpu().IsZero() {
			cpuLimited = true
		}
		if !p.Spec.Resources.Limits.Memory().IsZero() {
			memLimited = true
		}
	}
	shares := milliCPUToShares(reqs.Cpu().MilliValue())
	quota := milliCPUToQuota(limits.Cpu().MilliValue(), quotaPeriod)
	mem := limits.Memory().Value()
	switch pod.QOSClass(p) {
	case v1.PodQOSGuaranteed:
		return Resources{CPUShares: shares, CPUQuota: quota, CPUPeriod: quotaPeriod, Memory: mem}
	case v1.PodQOSBurstable:
		r := Resources{CPUShares: shares}
		if cpuLimited && quota > 0 {
			r.CPUQuota, r.CPUPeriod = quota, quotaPeriod
		}
		if memLimited {
			r.Memory = mem
		}
		return r
	}
	return Resources{CPUShares: minShares}
}

// NodeResources are the limits of kubepods for allocatable (or capacity
// when node allocatable is not enforced): cpu shares for its millicores,
// its memory as the limit.
func NodeResources(allocatable v1.ResourceList) Resources {
	return Resources{
		CPUShares: milliCPUToShares(allocatable.Cpu().MilliValue()),
		Memory:    allocatable.Memory().Value(),
	}
}

// milliCPUToShares converts millicores to CFS shares in [2, 262144] (the
// kernel's bounds, as the kubelet clamps them).
func milliCPUToShares(milli int64) uint64 {
	shares := milli * sharesPerCPU / milliPerCPU
	return uint64(min(max(shares, minShares), maxShares))
}

// milliCPUToQuota converts a millicore limit to a CFS quota over period
// (µs), at least 1ms; 0 for no limit.
func milliCPUToQuota(milli, period int64) int64 {
	if milli == 0 {
		return 0
	}
	return max(milli*period/milliPerCPU, minQuotaValue)
}

// sharesToWeight converts cgroup v1 cpu shares [2, 262144] to a cgroup v2
// cpu.weight [1, 10000] (runc's and the kubelet's conversion).
func sharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	shares = min(max(shares, minShares), maxShares)
	return 1 + ((shares-2)*9999)/262142
}
