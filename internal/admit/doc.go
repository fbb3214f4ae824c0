// Package admit decides whether a pod may run on this node: a Chain of
// Handlers, each one method returning a Result (the kubelet's
// lifecycle.PodAdmitHandler). The first refusal wins; its one-word Reason
// and its Message go to the pod's status, the log and events.
//
// Built-in handlers: MaxPods (OutOfpods), Resources (OutOfcpu,
// OutOfmemory), NodeSelector (NodeAffinity: nodeSelector and required node
// affinity), HostPorts (NodePorts), AppArmor (a profile the host cannot
// enforce), UserNamespaces (hostUsers: false, UserNamespacesNotSupported),
// CPUs (the CPU manager's exclusive CPUs, over a CPUAllocator) and
// Allocate (the allocation manager's record of the admitted pod's
// resources, over an Allocator; it never refuses). Resources counts the
// pods by their allocated resources when given the allocation manager
// (AllocatedPods): a resize the node has not allocated takes nothing.
//
// Handlers are pure over their Attributes (but CPUs and Allocate, which
// allocate as they admit, and come last) and safe for concurrent use; the
// sync loop calls the chain from its one goroutine.
package admit
