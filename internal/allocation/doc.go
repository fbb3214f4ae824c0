// Package allocation is the allocation manager (the kubelet's
// pkg/kubelet/allocation): the resources the node allocated to each
// pod's containers, which in-place resize (the pod's resize subresource)
// changes.
//
// It owns:
//
//   - the allocations, by pod UID: each app container's and sidecar's
//     resources (plain init and ephemeral containers are not resizable)
//     and the pod-level resources, set at admission to the spec's
//     (Admitted, the admit chain's last handler; an allocation that
//     exists already stands: an agent restart keeps what was allocated)
//     and released when housekeeping no longer lists the pod
//     (RemoveOrphans);
//   - the Actuated records of running containers: what the runtime
//     applied to an instance by an in-place resize, and the spec hash a
//     container of an older agent was adopted with (package cri writes
//     them; see pod.Actuated);
//   - both checkpointed in <StateDir>/nodeagent_allocation_state (JSON
//     with a checksum, written atomically and durably), and the
//     allocations and what the running containers were given also in the
//     kubelet's allocated_pods_state and actuated_pods_state, in its
//     format (a kubelet started on the node reads them; it panics on
//     anything else). Started where a kubelet ran, its allocated_pods_state
//     is read; a kubelet file newer than nodeagent's own is the kubelet's
//     word. A corrupt file is moved aside to <file>.corrupt and reported
//     with what it means and what to check; the agent starts afresh
//     rather than refusing to run (the kubelet panics);
//   - the resize decision (Resize, called by the runtime at the start of
//     every sync of a pod): when the spec asks for other resources than
//     allocated, Infeasible (a static pod; pod-level resources; a
//     Guaranteed pod's cpu under the static CPU manager policy; more cpu
//     or memory than the node's allocatable, "Node didn't have enough
//     capacity: …"), Deferred (not fitting beside the other active pods'
//     allocated resources, with admission's message; decided again at
//     each later sync), else allocated;
//   - the pod conditions PodResizePending (reason Deferred or Infeasible)
//     and PodResizeInProgress (set when a resize is allocated, with
//     reason Error while applying it fails, cleared once the runtime has
//     applied it: ResizeProgress), in memory as the kubelet's status
//     manager keeps them, with their observed generation; and the
//     kubelet's events ResizeStarted, ResizeDeferred, ResizeInfeasible,
//     ResizeError and ResizeCompleted with its messages.
//
// It does not own applying a resize (package cri: UpdateContainerResources
// and the pod cgroup, in order), the status (package status reads
// Allocated, Actuated and Conditions), or admission's fit check (Config.Admit,
// admit.Resources wired in main, which also counts the other pods by
// their allocation through AllocatedPod).
//
// Simpler than the kubelet: Deferred resizes are retried at the pod's
// syncs (every resync period) rather than from a queue sorted by
// priority with triggers on pod removals; a resize of pod-level resources
// is Infeasible (InPlacePodLevelResourcesVerticalScaling off).
//
// Concurrency: every method is safe for concurrent use (one mutex); pod
// workers call Resize, Actuated, SetActuated and ResizeProgress, never at
// once for one pod; the loop calls AllocatedPod and Admitted during
// admission and RemoveOrphans from housekeeping. Config.ActivePods is
// called without the lock held.
package allocation
