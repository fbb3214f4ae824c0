// Package eviction keeps the node from running out of memory, disk or
// PIDs, as the kubelet's pkg/kubelet/eviction: every period it observes
// the node's signals (memory.available, nodefs.available,
// imagefs.available, pid.available), compares them with the hard
// thresholds (--eviction-hard, acted on at once) and the soft ones
// (--eviction-soft, once held for their grace period), reports the
// pressure conditions (MemoryPressure, DiskPressure, PIDPressure; kept
// for --eviction-pressure-transition-period after the last crossing),
// and when a threshold is met first reclaims what the node can (image
// garbage collection for disk), then evicts one pod per period:
//
//	memory: pods using more than they request first, then lower priority,
//	        then the largest use above the request
//	disk:   the same with ephemeral storage (writable layers and logs)
//	pids:   lower priority first
//
// Only pods that run something are candidates; static and critical pods
// (priority ≥ 2000000000) come last. The kubelet never evicts them; here
// every pod of a standalone node is static, so they stay evictable, last
// (the order). An evicted
// pod ends Failed with reason Evicted and a message naming the resource,
// the threshold and what its containers used; a hard threshold kills it
// with no grace, a soft one with min(its grace, --eviction-max-pod-grace-period).
//
// Simpler than the kubelet, and why: memory.available is MemAvailable
// from /proc/meminfo (the kubelet subtracts the root cgroup's working set
// from capacity: close, and the same on cgroup v1 and v2 here); PIDs in
// use are the kernel's thread count (/proc/loadavg); no minimum-reclaim,
// no inode signals, no memcg threshold notifications (the period bounds
// the reaction time).
//
// It imports internal/pod only; the loop, the runtime's stats and image
// GC are reached through Config funcs and small interfaces.
package eviction
