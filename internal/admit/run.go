package admit

import "fmt"

// The run chain (the kubelet's canRunPod, its soft admission): a pod it
// refuses is not failed but kept Pending with the reason, its containers
// stopped, and judged again at each sync. Its handlers use the same
// Handler interface.

// sourceAnnotation names where a pod came from (file, http, api).
const sourceAnnotation = "kubernetes.io/config.source"

// Privileged keeps a pod with a privileged container from running unless
// --allow-privileged (the kubelet's message).
func Privileged(allow bool) Handler {
	return HandlerFunc{N: "Privileged", F: func(a *Attributes) Result {
		if allow {
			return Result{Admit: true}
		}
		for _, c := range allContainers(a.Pod) {
			if sc := c.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
				return Result{Reason: "Forbidden", Message: fmt.Sprintf(
					"pod with UID %q specified privileged container, but is disallowed", a.Pod.UID)}
			}
		}
		return Result{Admit: true}
	}}
}

// HostNamespaceSources say which pod sources may use the host's network,
// PID and IPC namespaces (--host-network-sources, --host-pid-sources,
// --host-ipc-sources; "*" is every source).
type HostNamespaceSources struct {
	Network, PID, IPC []string
}

// HostNamespaces keeps a pod using a host namespace from running unless
// its source is allowed to (the kubelet's messages).
func HostNamespaces(s HostNamespaceSources) Handler {
	return HandlerFunc{N: "HostNamespaces", F: func(a *Attributes) Result {
		src := a.Pod.Annotations[sourceAnnotation]
		if src == "" {
			src = "api"
		}
		for _, ns := range []struct {
			used    bool
			sources []string
			what    string
		}{
			{a.Pod.Spec.HostNetwork, s.Network, "host networking"},
			{a.Pod.Spec.HostPID, s.PID, "host PID"},
			{a.Pod.Spec.HostIPC, s.IPC, "host ipc"},
		} {
			if ns.used && !allowedSource(src, ns.sources) {
				return Result{Reason: "Forbidden", Message: fmt.Sprintf(
					"pod with UID %q specified %s, but is disallowed (source %q)", a.Pod.UID, ns.what, src)}
			}
		}
		return Result{Admit: true}
	}}
}

func allowedSource(src string, sources []string) bool {
	for _, s := range sources {
		if s == "*" || s == src {
			return true
		}
	}
	return false
}
