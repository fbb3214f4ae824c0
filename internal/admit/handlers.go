package admit

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// MaxPods refuses a pod when max pods already run.
func MaxPods(max int) Handler {
	return HandlerFunc{N: "MaxPods", F: func(a *Attributes) Result {
		if max > 0 && len(a.OtherPods) >= max {
			return Result{Reason: "OutOfpods", Message: fmt.Sprintf(
				"Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", len(a.OtherPods), max)}
		}
		return Result{Admit: true}
	}}
}

// AllocatedPods gives a pod as the node allocated it: its containers'
// resources those the allocation manager recorded (in-place resize
// changes them), the pod itself when it has no record
// (allocation.Manager). Safe from the loop's goroutine.
type AllocatedPods interface {
	AllocatedPod(p *v1.Pod) *v1.Pod
}

// Resources refuses a pod whose requests do not fit in what the node can
// allocate beside the other pods, for each resource the node reports.
// A pod's request is the API's (k8s.io/component-helpers/resource
// PodRequests): the containers' sum, restartable (sidecar) init
// containers included, or the largest init container if more, the pod
// overhead added, and pod-level requests where the pod sets them. With
// alloc, every pod counts by its allocated resources, not its spec's (a
// resize the node has not allocated takes nothing), the judged pod too
// (re-admitted at an agent restart, as the kubelet's AddPod). The
// message is the kubelet's InsufficientResourceError: cpu in millicores,
// the others in units.
func Resources(allocatable v1.ResourceList, alloc AllocatedPods) Handler {
	return ResourcesOf(func() v1.ResourceList { return allocatable }, alloc)
}

// ResourcesOf is Resources over an allocatable that changes (device
// plugins come and go): read at each admission.
func ResourcesOf(allocatableOf func() v1.ResourceList, alloc AllocatedPods) Handler {
	view := func(p *v1.Pod) *v1.Pod {
		if alloc == nil {
			return p
		}
		return alloc.AllocatedPod(p)
	}
	return HandlerFunc{N: "Resources", F: func(a *Attributes) Result {
		allocatable := allocatableOf()
		names := resourceOrder(allocatable)
		want := resourcehelper.PodRequests(view(a.Pod), resourcehelper.PodResourcesOptions{})
		var used v1.ResourceList
		for _, name := range names {
			req, ok := want[name]
			if !ok || req.IsZero() {
				continue
			}
			if used == nil {
				used = v1.ResourceList{}
				for _, o := range a.OtherPods {
					for n, q := range resourcehelper.PodRequests(view(o), resourcehelper.PodResourcesOptions{}) {
						sum := used[n]
						sum.Add(q)
						used[n] = sum
					}
				}
			}
			u := used[name]
			total := u.DeepCopy()
			total.Add(req)
			if capacity := allocatable[name]; total.Cmp(capacity) > 0 {
				return Result{Reason: "OutOf" + string(name), Message: fmt.Sprintf(
					"Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
					name, amount(name, req), amount(name, u), amount(name, capacity))}
			}
		}
		return Result{Admit: true}
	}}
}

// amount is q as the kubelet's messages give it: cpu in millicores, any
// other resource in its unit.
func amount(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// Allocator records the resources allocated to an admitted pod
// (allocation.Manager). It keeps an allocation that exists (an agent
// restart re-admits its pods).
type Allocator interface {
	Admitted(p *v1.Pod) error
}

// Allocate records the pod's allocation (the kubelet's AddPod, which
// checkpoints it once the pod is admitted). It never refuses: a record
// that cannot be written is the allocator's to log, and the pod's first
// sync records it again. It allocates as it admits, so it comes last in
// the chain, after CPUs.
func Allocate(a Allocator) Handler {
	return HandlerFunc{N: "Allocation", F: func(at *Attributes) Result {
		_ = a.Admitted(at.Pod)
		return Result{Admit: true}
	}}
}

// resourceOrder is cpu, memory, then the node's other resources sorted,
// so a refusal names the same resource every time.
func resourceOrder(l v1.ResourceList) []v1.ResourceName {
	var names []v1.ResourceName
	for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if _, ok := l[n]; ok {
			names = append(names, n)
		}
	}
	var rest []v1.ResourceName
	for n := range l {
		if n != v1.ResourceCPU && n != v1.ResourceMemory && n != v1.ResourcePods {
			rest = append(rest, n)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i] < rest[j] })
	return append(names, rest...)
}

// NodeSelector refuses a pod whose nodeSelector or required node affinity
// the node does not satisfy, judged as the scheduler and the kubelet do
// (k8s.io/component-helpers/scheduling/corev1/nodeaffinity): every
// nodeSelector label, and one of the required terms (an empty term
// matches nothing); matchFields see the node's name, its
// kubernetes.io/hostname label.
func NodeSelector(nodeLabels map[string]string) Handler {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeLabels[v1.LabelHostname], Labels: nodeLabels}}
	return HandlerFunc{N: "NodeSelector", F: func(a *Attributes) Result {
		ok, err := nodeaffinity.GetRequiredNodeAffinity(a.Pod).Match(node)
		switch {
		case err != nil && !ok:
			return Result{Reason: "NodeAffinity", Message: fmt.Sprintf("invalid node affinity: %v", err)}
		case !ok:
			return Result{Reason: "NodeAffinity", Message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}
		}
		return Result{Admit: true}
	}}
}

// HostPorts refuses a pod asking for a host port (protocol, IP, port)
// another pod already has.
func HostPorts() Handler {
	return HandlerFunc{N: "HostPorts", F: func(a *Attributes) Result {
		used := map[string]bool{}
		for _, o := range a.OtherPods {
			for _, k := range hostPorts(o) {
				used[k] = true
			}
		}
		for _, k := range hostPorts(a.Pod) {
			proto, rest, _ := strings.Cut(k, "/")
			ip, port, _ := strings.Cut(rest, "/")
			conflict := used[k] || used[proto+"/0.0.0.0/"+port]
			if ip == "0.0.0.0" {
				for u := range used {
					if strings.HasPrefix(u, proto+"/") && strings.HasSuffix(u, "/"+port) {
						conflict = true
					}
				}
			}
			if conflict {
				return Result{Reason: "NodePorts", Message: fmt.Sprintf(
					"Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (%s %s:%s)", proto, ip, port)}
			}
		}
		return Result{Admit: true}
	}}
}

func hostPorts(p *v1.Pod) []string {
	var out []string
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			ip := port.HostIP
			if ip == "" {
				ip = "0.0.0.0"
			}
			proto := port.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			out = append(out, fmt.Sprintf("%s/%s/%d", proto, ip, port.HostPort))
		}
	}
	return out
}
