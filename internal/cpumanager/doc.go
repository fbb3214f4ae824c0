// Package cpumanager is the CPU manager (the kubelet's
// pkg/kubelet/cm/cpumanager): which CPUs each container may use.
//
// It owns the node's CPU topology (Discover, from <SysfsRoot>/devices/
// system/{cpu,node}: sockets, NUMA nodes, cores and their threads), the
// policy (none: nothing is pinned; static: a Guaranteed pod's containers
// with a whole-number CPU request get CPUs of their own), the state (the
// shared pool and the exclusive assignments, checkpointed atomically
// with a checksum in <StateDir>/cpu_manager_state, the kubelet's
// format), and the reconcile that keeps running containers on their CPUs.
//
// Static policy, as the kubelet's:
//
//   - Reserved CPUs (--reserved-cpus, else ceil(kube + system reserved
//     cpu) taken from the lowest CPUs topology-aware) are never given out
//     exclusively; they stay in the shared pool, which is every CPU not
//     held exclusively.
//   - Allocation is topology-aware and packed: whole NUMA nodes/sockets
//     (the larger first), whole cores with their sibling threads, then
//     single threads, from the units with the fewest free CPUs first.
//     Option full-pcpus-only refuses requests that are not whole cores
//     (SMTAlignmentError).
//   - CPUs are allocated at admission (Allocate, all of a pod's containers
//     or none; the admit handler refuses the pod on error, naming CPUs
//     requested and available) and set in the container's CRI config at
//     CreateContainer (ContainerCPUs), so a container never runs a moment
//     unpinned. Init containers' CPUs are offered again to the containers
//     after them.
//   - CPUs are released when a container ends for good (restartPolicy
//     Never, OnFailure with exit 0, a succeeded init container), leaving an
//     empty entry so a restarted agent does not allocate again, and when
//     its pod is gone (RemoveStale, from housekeeping).
//   - Reconcile (Run's goroutine, every ReconcilePeriod and on every
//     change) sets each running container of the agent on its CPUs with
//     UpdateContainerResources (cpuset only, as the kubelet), skipping
//     containers already set to that cpuset.
//
// At start the checkpoint is restored as is: containers keep their CPUs
// and nothing is re-pinned. A corrupt checkpoint, one that does not
// cover this node's CPUs, or one of another policy with exclusive
// assignments stops the start with what to do. Beyond the kubelet, a
// policy change with no exclusive assignment in the checkpoint (none →
// static on a node without pinned pods) starts afresh without a manual
// deletion.
//
// How the cpuset reaches CreateContainer: the run chain's ConfigMutator
// is an interface of internal/cri, which this package may not import (it
// imports only pod, and the leaf atomicfile for the checkpoint write).
// cmd/nodeagent holds the three-line adapter (a cri.ConfigMutator calling
// ContainerCPUs). A generic "func phase" in cri would have served too, but
// would be an API in cri for one caller; the adapter keeps both packages
// unaware of each other and is wired where both are built.
//
// Not built: the topology manager (NUMA hint merging across resource
// managers), the static policy's other options (distribute-cpus-across-
// numa, align-by-uncore-cache, …), and pod-level resources (such pods
// stay in the shared pool).
//
// Concurrency: Allocate (admission) and RemoveStale (housekeeping, beside
// the loop; the loop never admits while a round runs), ContainerCPUs (pod
// workers) and the readers are safe for concurrent use under one mutex;
// Reconcile runs on Run's goroutine only, which is the only one making
// CRI calls.
package cpumanager
