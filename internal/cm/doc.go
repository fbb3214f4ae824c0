// Package cm owns the node's cgroup hierarchy for pods (the kubelet's
// pkg/kubelet/cm QoS and pod container managers), with the cgroupfs
// driver:
//
//	<root>/kubepods                      limited to node allocatable (cpu shares, memory)
//	<root>/kubepods/pod<uid>             Guaranteed pods
//	<root>/kubepods/burstable            cpu shares = the sum of its pods' cpu requests
//	<root>/kubepods/burstable/pod<uid>
//	<root>/kubepods/besteffort           cpu shares 2
//	<root>/kubepods/besteffort/pod<uid>
//
// A pod cgroup carries the pod's summed limits as the kubelet's
// ResourceConfigForPod computes them (pod-level resources win over the
// sums): cpu shares (v2: weight) from requests, CFS quota from limits when
// every container has a CPU limit, a memory limit when every container has
// one; BestEffort pods get shares 2. Its cgroupfs path is the sandbox's
// CgroupParent: the runtime puts the sandbox and the containers beneath.
// EnsurePod writes the limits of the pod it is given: package cri gives
// the pod as its containers run, and for an in-place resize first one
// holding both the old and the new resources, then the new ones (the
// kubelet's order: the pod cgroup grows before its containers, shrinks
// after them).
// The QoS tiers get no memory limit (the kubelet's default without
// --qos-reserved).
//
// It also owns the QoS policy the runtime needs: QOSClass and the
// containers' OOMScoreAdj.
//
// The systemd driver makes the same hierarchy as slices — kubepods.slice,
// kubepods-burstable.slice, kubepods-burstable-pod<uid>.slice (a UID's
// '-' written '_') — through systemd's D-Bus API with
// opencontainers/cgroups, the library and calls of the kubelet's cgroup
// manager; the runtime's cgroup parent is the slice's path. The two
// drivers sit behind a small backend interface (backend.go, systemd.go).
//
// cgroup v1 (one hierarchy per controller under the mount root; every
// hierarchy gets the directories, as runc creates its own in all of them)
// and v2 (unified: controllers enabled in each parent's
// cgroup.subtree_control). The cgroupfs driver writes plain files, no
// library: the files are few and the semantics those of the kernel. A
// pod cgroup is written when it is made and when its limits change (a
// resize), as the kubelet's; one made since the last Cleanup is kept by
// it once (the pod may have been admitted while housekeeping gathered
// the active pods).
//
// It does not own: the containers' own cgroups (the runtime's), CPU
// pinning (cpumanager), eviction. A pod cgroup is removed by Cleanup once
// its pod is neither known to the agent nor present in the runtime; one
// that still holds processes (rmdir fails) is tried again at the next
// Cleanup — nothing is killed here.
//
// Concurrency: EnsurePod is called by pod workers concurrently, Cleanup by
// housekeeping; a mutex serialises them. Start runs once before either.
package cm
