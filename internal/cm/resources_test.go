package cm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// res builds requirements from "cpu", "memory" pairs: requests then
// limits, "" for none.
func res(cpuReq, memReq, cpuLim, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{}
	set := func(l *v1.ResourceList, name v1.ResourceName, v string) {
		if v == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[name] = resource.MustParse(v)
	}
	set(&r.Requests, v1.ResourceCPU, cpuReq)
	set(&r.Requests, v1.ResourceMemory, memReq)
	set(&r.Limits, v1.ResourceCPU, cpuLim)
	set(&r.Limits, v1.ResourceMemory, memLim)
	return r
}

func podOf(containers ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{}
	p.UID = "u1"
	for i, r := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return p
}

func withInit(p *v1.Pod, r v1.ResourceRequirements, sidecar bool) *v1.Pod {
	c := v1.Container{Name: "init", Resources: r}
	if sidecar {
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	return p
}

func withPodLevel(p *v1.Pod, r v1.ResourceRequirements) *v1.Pod {
	p.Spec.Resources = &r
	return p
}

const mi = 1 << 20

// Fixtures: the same pods serve the QoS, limits and oom_score_adj tables.
var (
	guaranteed        = podOf(res("500m", "64Mi", "500m", "64Mi"), res("500m", "64Mi", "500m", "64Mi"))
	burstableAll      = podOf(res("100m", "32Mi", "200m", "64Mi"))
	burstableNoCPULim = podOf(res("100m", "32Mi", "200m", "64Mi"), res("100m", "32Mi", "", "64Mi"))
	burstableReqOnly  = podOf(res("250m", "100Mi", "", ""))
	burstableMemOnly  = podOf(res("", "64Mi", "", ""))
	bestEffort        = podOf(res("", "", "", ""), res("", "", "", ""))
	tinyGuaranteed    = podOf(res("1m", "4Mi", "1m", "4Mi"))
	// An init container bigger than the app: the pod needs its request.
	initBigger = withInit(podOf(res("100m", "", "200m", "")), res("1", "", "1", ""), false)
	// A sidecar runs beside the app: their requests add up.
	sidecar = withInit(podOf(res("100m", "16Mi", "", "")), res("200m", "64Mi", "", ""), true)
	// Pod-level resources alone: Guaranteed from them.
	podLevelOnly = withPodLevel(podOf(res("", "", "", "")), res("1", "256Mi", "1", "256Mi"))
	// Pod-level cpu limit wins over containers without one; no memory
	// limit anywhere: none.
	podLevelCPU = withPodLevel(podOf(res("100m", "32Mi", "", ""), res("", "", "", "")), res("500m", "128Mi", "2", ""))
)

func TestQOSClass(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{"guaranteed", guaranteed, v1.PodQOSGuaranteed},
		{"burstable with limits", burstableAll, v1.PodQOSBurstable},
		{"burstable without a cpu limit", burstableNoCPULim, v1.PodQOSBurstable},
		{"requests only", burstableReqOnly, v1.PodQOSBurstable},
		{"best effort", bestEffort, v1.PodQOSBestEffort},
		{"init container counts", withInit(podOf(res("", "", "", "")), res("10m", "", "", ""), false), v1.PodQOSBurstable},
		{"init container breaks guaranteed", withInit(podOf(res("1", "1Gi", "1", "1Gi")), res("1", "", "1", ""), false), v1.PodQOSBurstable},
		{"pod level guaranteed", podLevelOnly, v1.PodQOSGuaranteed},
		{"pod level burstable", podLevelCPU, v1.PodQOSBurstable},
		{"pod level wins over guaranteed containers", withPodLevel(podOf(res("1", "1Gi", "1", "1Gi")), res("1", "1Gi", "", "")), v1.PodQOSBurstable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pod.QOSClass(tc.pod); got != tc.want {
				t.Fatalf("QOSClass = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPodResources(t *testing.T) {
	withOverhead := podOf(res("200m", "64Mi", "200m", "64Mi"))
	withOverhead.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("16Mi")}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want Resources
	}{
		{"guaranteed: sums", guaranteed, Resources{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, Memory: 128 * mi}},
		{"burstable with every limit", burstableAll, Resources{CPUShares: 102, CPUQuota: 20000, CPUPeriod: 100000, Memory: 64 * mi}},
		{"burstable, a container without cpu limit: no quota", burstableNoCPULim, Resources{CPUShares: 204, Memory: 128 * mi}},
		{"requests only: shares", burstableReqOnly, Resources{CPUShares: 256}},
		{"memory request only: minimum shares", burstableMemOnly, Resources{CPUShares: 2}},
		{"best effort", bestEffort, Resources{CPUShares: 2}},
		{"tiny: minimum shares and quota", tinyGuaranteed, Resources{CPUShares: 2, CPUQuota: 1000, CPUPeriod: 100000, Memory: 4 * mi}},
		{"init container bigger than the app", initBigger, Resources{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000}},
		{"sidecar adds up", sidecar, Resources{CPUShares: 307}},
		{"pod level only", podLevelOnly, Resources{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, Memory: 256 * mi}},
		{"pod level cpu limit", podLevelCPU, Resources{CPUShares: 512, CPUQuota: 200000, CPUPeriod: 100000}},
		{"overhead added", withOverhead, Resources{CPUShares: 256, CPUQuota: 25000, CPUPeriod: 100000, Memory: 80 * mi}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodResources(tc.pod); got != tc.want {
				t.Fatalf("PodResources = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestOOMScoreAdj(t *testing.T) {
	const capacity = 1000 * mi
	critical := podOf(res("100m", "", "", ""))
	critical.Spec.PriorityClassName = "system-node-critical"
	bigSidecar := withInit(podOf(res("", "500Mi", "", ""), res("", "100Mi", "", "")), res("", "50Mi", "", ""), true)
	podLevelMem := withPodLevel(podOf(res("", "100Mi", "", ""), res("", "", "", "")), res("", "500Mi", "", ""))
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		container *v1.Container
		want      int64
	}{
		{"guaranteed", guaranteed, &guaranteed.Spec.Containers[0], -997},
		{"best effort", bestEffort, &bestEffort.Spec.Containers[0], 1000},
		{"node critical", critical, &critical.Spec.Containers[0], -997},
		{"burstable: 100Mi of 1000Mi", burstableReqOnly, &burstableReqOnly.Spec.Containers[0], 900},
		{"burstable without memory request: below best effort", burstableNoCPULim, &burstableNoCPULim.Spec.Containers[0], 968},
		{"burstable asking for everything: above guaranteed", podOf(res("", "2000Mi", "", "")), nil, 3},
		{"burstable without any memory request: 999", podOf(res("10m", "", "", "")), nil, 999},
		// A sidecar's score is no higher than the regular container with
		// the smallest request (100Mi: 900), though its own is 950.
		{"sidecar follows the smallest regular container", bigSidecar, &bigSidecar.Spec.InitContainers[0], 900},
		// 400Mi requested by no container, shared by two: 200Mi each.
		{"pod level request shared", podLevelMem, &podLevelMem.Spec.Containers[0], 700},
		{"pod level request shared, container without request", podLevelMem, &podLevelMem.Spec.Containers[1], 800},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.container
			if c == nil {
				c = &tc.pod.Spec.Containers[0]
			}
			if got := OOMScoreAdj(tc.pod, c, capacity); got != tc.want {
				t.Fatalf("OOMScoreAdj = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSharesToWeight(t *testing.T) {
	for _, tc := range []struct{ shares, weight uint64 }{{2, 1}, {1024, 39}, {262144, 10000}, {0, 0}, {300000, 10000}} {
		if got := sharesToWeight(tc.shares); got != tc.weight {
			t.Errorf("sharesToWeight(%d) = %d, want %d", tc.shares, got, tc.weight)
		}
	}
	// A node (or a tier's pods) past 256 CPUs: the kernel's largest
	// shares, not a value it refuses.
	if got := milliCPUToShares(300_000); got != 262144 {
		t.Errorf("milliCPUToShares(300 CPUs) = %d, want 262144", got)
	}
}
