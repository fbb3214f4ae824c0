package admit

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
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

// Resources refuses a pod whose CPU or memory requests do not fit in what
// the node can allocate beside the other pods.
func Resources(allocatable v1.ResourceList) Handler {
	return HandlerFunc{N: "Resources", F: func(a *Attributes) Result {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			capacity, ok := allocatable[name]
			if !ok {
				continue
			}
			want := podRequest(a.Pod, name)
			if want.IsZero() {
				continue
			}
			used := resource.Quantity{}
			for _, o := range a.OtherPods {
				q := podRequest(o, name)
				used.Add(q)
			}
			total := used.DeepCopy()
			total.Add(want)
			if total.Cmp(capacity) > 0 {
				return Result{Reason: "OutOf" + string(name), Message: fmt.Sprintf(
					"Node didn't have enough resource: %s, requested: %s, used: %s, capacity: %s",
					name, want.String(), used.String(), capacity.String())}
			}
		}
		return Result{Admit: true}
	}}
}

// podRequest is the pod's effective request: the larger of the sum of its
// containers' and the largest init container's.
func podRequest(p *v1.Pod, name v1.ResourceName) resource.Quantity {
	sum := resource.Quantity{}
	for _, c := range p.Spec.Containers {
		if q, ok := c.Resources.Requests[name]; ok {
			sum.Add(q)
		}
	}
	for _, c := range p.Spec.InitContainers {
		if q, ok := c.Resources.Requests[name]; ok && q.Cmp(sum) > 0 {
			sum = q.DeepCopy()
		}
	}
	return sum
}

// NodeSelector refuses a pod whose nodeSelector or required node affinity
// the node's labels do not satisfy.
func NodeSelector(nodeLabels map[string]string) Handler {
	set := labels.Set(nodeLabels)
	return HandlerFunc{N: "NodeSelector", F: func(a *Attributes) Result {
		refuse := Result{Reason: "NodeAffinity", Message: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"}
		if len(a.Pod.Spec.NodeSelector) > 0 && !labels.SelectorFromSet(a.Pod.Spec.NodeSelector).Matches(set) {
			return refuse
		}
		aff := a.Pod.Spec.Affinity
		if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			return Result{Admit: true}
		}
		for _, term := range aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			// An empty term matches no node (API semantics).
			if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
				continue
			}
			sel, err := termSelector(term)
			if err != nil {
				return Result{Reason: "NodeAffinity", Message: fmt.Sprintf("invalid node affinity: %v", err)}
			}
			if sel.Matches(set) && fieldsMatch(term.MatchFields, nodeLabels[v1.LabelHostname]) {
				return Result{Admit: true}
			}
		}
		return refuse
	}}
}

// fieldsMatch judges matchFields; metadata.name is the only field the API
// allows there.
func fieldsMatch(reqs []v1.NodeSelectorRequirement, nodeName string) bool {
	for _, r := range reqs {
		if r.Key != "metadata.name" {
			return false
		}
		in := false
		for _, v := range r.Values {
			in = in || v == nodeName
		}
		switch r.Operator {
		case v1.NodeSelectorOpIn:
			if !in {
				return false
			}
		case v1.NodeSelectorOpNotIn:
			if in {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func termSelector(term v1.NodeSelectorTerm) (labels.Selector, error) {
	sel := labels.NewSelector()
	for _, e := range term.MatchExpressions {
		var op selection.Operator
		switch e.Operator {
		case v1.NodeSelectorOpIn:
			op = selection.In
		case v1.NodeSelectorOpNotIn:
			op = selection.NotIn
		case v1.NodeSelectorOpExists:
			op = selection.Exists
		case v1.NodeSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		case v1.NodeSelectorOpGt:
			op = selection.GreaterThan
		case v1.NodeSelectorOpLt:
			op = selection.LessThan
		default:
			return nil, fmt.Errorf("operator %q", e.Operator)
		}
		r, err := labels.NewRequirement(e.Key, op, e.Values)
		if err != nil {
			return nil, err
		}
		sel = sel.Add(*r)
	}
	return sel, nil
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
