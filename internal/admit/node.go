package admit

import (
	"fmt"
	"runtime"
	"strings"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
)

// Taints refuses a pod that does not tolerate one of the node's NoExecute
// taints, as the kubelet's admission (which leaves NoSchedule to the
// scheduler: a pod bound to the node despite one still runs). Static pods
// carry a NoExecute toleration of everything (podsource).
func Taints(taints []v1.Taint) Handler {
	return HandlerFunc{N: "TaintToleration", F: func(a *Attributes) Result {
		taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, a.Pod.Spec.Tolerations,
			func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }, false)
		if untolerated {
			return Result{Reason: "TaintToleration", Message: fmt.Sprintf(
				"Predicate TaintToleration failed: node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value)}
		}
		return Result{Admit: true}
	}}
}

// safeSysctls are the namespaced sysctls every pod may set (the
// kubelet's pkg/kubelet/sysctl safe set).
var safeSysctls = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
}

// Sysctls refuses a pod setting a sysctl outside the safe set and
// --allowed-unsafe-sysctls (names or prefixes ending in "*"), or a
// namespaced sysctl of a namespace it shares with the host
// (SysctlForbidden, as the kubelet).
func Sysctls(allowedUnsafe []string) Handler {
	allowed := append(append([]string{}, safeSysctls...), allowedUnsafe...)
	return HandlerFunc{N: "Sysctls", F: func(a *Attributes) Result {
		sc := a.Pod.Spec.SecurityContext
		if sc == nil {
			return Result{Admit: true}
		}
		for _, s := range sc.Sysctls {
			name := strings.ReplaceAll(s.Name, "/", ".")
			if !matchesAny(name, allowed) {
				return Result{Reason: "SysctlForbidden", Message: fmt.Sprintf("forbidden sysctl: %q not allowlisted", s.Name)}
			}
			switch {
			case a.Pod.Spec.HostNetwork && strings.HasPrefix(name, "net."):
				return Result{Reason: "SysctlForbidden", Message: fmt.Sprintf("forbidden sysctl: %q not allowed with host net enabled", s.Name)}
			case a.Pod.Spec.HostIPC && (strings.HasPrefix(name, "kernel.shm") || strings.HasPrefix(name, "kernel.msg") ||
				strings.HasPrefix(name, "kernel.sem") || strings.HasPrefix(name, "fs.mqueue.")):
				return Result{Reason: "SysctlForbidden", Message: fmt.Sprintf("forbidden sysctl: %q not allowed with host ipc enabled", s.Name)}
			}
		}
		return Result{Admit: true}
	}}
}

func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if p == name || (strings.HasSuffix(p, "*") && strings.HasPrefix(name, strings.TrimSuffix(p, "*"))) {
			return true
		}
	}
	return false
}

// PodOS refuses a pod whose spec.os names another OS than the node's, or
// whose kubernetes.io/os / kubernetes.io/arch node selector does not
// match it (the kubelet's PodOSNotSupported and
// PodOSSelectorNodeLabelDoesNotMatch).
func PodOS() Handler {
	return HandlerFunc{N: "PodOS", F: func(a *Attributes) Result {
		if os := a.Pod.Spec.OS; os != nil && string(os.Name) != runtime.GOOS {
			return Result{Reason: "PodOSNotSupported", Message: "Failed to admit pod as the OS field doesn't match node OS"}
		}
		if v, ok := a.Pod.Spec.NodeSelector[v1.LabelOSStable]; ok && v != runtime.GOOS {
			return Result{Reason: "PodOSSelectorNodeLabelDoesNotMatch", Message: fmt.Sprintf(
				"Failed to admit pod as the `kubernetes.io/os` label doesn't match node label (%s != %s)", v, runtime.GOOS)}
		}
		return Result{Admit: true}
	}}
}

// Pressure refuses pods the node cannot take under its eviction
// manager's pressure, as the kubelet's eviction admission: under
// MemoryPressure, BestEffort pods; under DiskPressure, every pod but
// critical ones (static or system-critical priority).
func Pressure(under func(v1.NodeConditionType) bool) Handler {
	return HandlerFunc{N: "EvictionPressure", F: func(a *Attributes) Result {
		p := a.Pod
		critical := p.Annotations[sourceAnnotation] == "file" || p.Annotations[sourceAnnotation] == "http" ||
			(p.Spec.Priority != nil && *p.Spec.Priority >= 2000000000)
		if critical {
			return Result{Admit: true}
		}
		if under(v1.NodeDiskPressure) {
			return Result{Reason: "Evicted", Message: "The node had condition: [DiskPressure]. "}
		}
		if under(v1.NodeMemoryPressure) && bestEffort(p) {
			return Result{Reason: "Evicted", Message: "The node had condition: [MemoryPressure]. "}
		}
		return Result{Admit: true}
	}}
}

// bestEffort reports a pod with no CPU or memory request or limit.
func bestEffort(p *v1.Pod) bool {
	for _, c := range allContainers(p) {
		for _, rl := range []v1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				if q, ok := rl[n]; ok && !q.IsZero() {
					return false
				}
			}
		}
	}
	return true
}
