// Package admit decides whether a pod may run on this node: a Chain of
// Handlers, each one method returning a Result (the kubelet's
// lifecycle.PodAdmitHandler). The first refusal wins; its one-word Reason
// and its Message go to the pod's status, the log and events.
//
// Built-in handlers: MaxPods (OutOfpods), Resources (OutOfcpu,
// OutOfmemory), NodeSelector (NodeAffinity: nodeSelector and required node
// affinity), HostPorts (NodePorts), AppArmor (a profile the host cannot
// enforce), UserNamespaces (hostUsers: false, UserNamespacesNotSupported)
// and CPUs (the CPU manager's exclusive CPUs, over a CPUAllocator).
//
// Handlers are pure over their Attributes (but CPUs, which allocates as
// it admits) and safe for concurrent use; the
// sync loop calls the chain from its one goroutine.
package admit
