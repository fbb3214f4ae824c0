package pod

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// QOSClass is the pod's QoS class (the kubelet's ComputePodQOS): from
// the pod-level requests and limits when the pod sets them, else from
// its containers' (init containers included). Guaranteed: cpu and memory
// limits everywhere and requests equal to them; BestEffort: no cpu or
// memory request or limit at all; else Burstable. Requests are expected
// defaulted from limits (the API's defaulting, podsource's). It is the
// one QoS function: the status, the pod cgroups, the OOM score and the
// CPU manager all judge by it.
func QOSClass(p *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	add := func(dst v1.ResourceList, l v1.ResourceList) (found []v1.ResourceName) {
		for name, q := range l {
			if (name != v1.ResourceCPU && name != v1.ResourceMemory) || q.Sign() <= 0 {
				continue
			}
			found = append(found, name)
			sum := q.DeepCopy()
			if cur, ok := dst[name]; ok {
				sum.Add(cur)
			}
			dst[name] = sum
		}
		return found
	}
	bothLimited := func(found []v1.ResourceName) bool {
		return slices.Contains(found, v1.ResourceCPU) && slices.Contains(found, v1.ResourceMemory)
	}
	if resourcehelper.IsPodLevelResourcesSet(p) {
		add(requests, p.Spec.Resources.Requests)
		if len(p.Spec.Resources.Limits) > 0 && !bothLimited(add(limits, p.Spec.Resources.Limits)) {
			guaranteed = false
		}
	} else {
		for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
			for i := range cs {
				add(requests, cs[i].Resources.Requests)
				if !bothLimited(add(limits, cs[i].Resources.Limits)) {
					guaranteed = false
				}
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// WithCPUMemory is r with its cpu and memory requests and limits those of
// cm (absent there: absent), its other resources as they are: a
// container's requirements as a resize applied them.
func WithCPUMemory(r, cm v1.ResourceRequirements) v1.ResourceRequirements {
	out := *r.DeepCopy()
	set := func(dst *v1.ResourceList, src v1.ResourceList) {
		for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			q, ok := src[n]
			switch {
			case ok && *dst == nil:
				*dst = v1.ResourceList{n: q.DeepCopy()}
			case ok:
				(*dst)[n] = q.DeepCopy()
			default:
				delete(*dst, n)
			}
		}
	}
	set(&out.Requests, cm.Requests)
	set(&out.Limits, cm.Limits)
	return out
}
