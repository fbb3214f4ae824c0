// Package podmanager is the one owner of the node's desired pods: every
// pod a source handed over and the loop decided about, by UID and by full
// name (namespace/name), with the state the loop gave it — admitted, held
// (waiting for the previous pod of its full name to be killed), finished,
// refused (by admission), evicted, terminating — and the static ↔ mirror
// correspondence (the kubelet's pkg/kubelet/pod/pod_manager.go, small).
//
//	source ──Update──> syncloop ──writes──> Manager ──Reader──> eviction, allocation,
//	                                                             the loop's own reads
//
// What it does not own:
//   - the pod workers and their state machine (syncing → finished,
//     terminating → terminated): those are syncloop's. Whether an admitted
//     pod is finished, or still synced, is the worker's phase; the loop
//     hands the Manager a read-only view of it (SetWorkers), and the Reader
//     reports it (State: Finished; ActivePods) without a copy that could
//     fall behind.
//   - statuses: internal/status computes and publishes them, and keeps with
//     each the spec it was published for (a status outlives the desired
//     entry: a removed pod shows Terminating until its kill ended).
//   - mirror pods: they live in the API server and come from its informer
//     (internal/kubeapi), which never hands them to the loop; the Manager
//     answers which static pod a mirror pod stands for (GetPodByMirrorPod;
//     IsMirrorOf and StaticHash, the one definition of the tie, which
//     kubeapi's mirror pods use too), not which mirror pods exist.
//     kubeapi's status writer keeps its own per-source names of static
//     pods: it needs them before the loop has seen them, to tell an
//     orphaned mirror pod from one whose pod is on its way.
//   - when each killed pod's kill completed: that stays the loop's private
//     bookkeeping (it guards housekeeping against runtime snapshots taken
//     before the kill, about pods nobody desires any more; it is about the
//     runtime's view, not about a desired pod).
//
// States, as State reports them (one at a time; the first that holds):
//
//	Admitted     wanted; its worker syncs it
//	Held         admitted; waits for the previous pod of its full name to be killed
//	Finished     admitted; over (its worker's phase): stopped, kept until removed
//	Refused      the admit chain turned it down; kept until its source drops it
//	Evicted      evicted for the node's sake; kept (Failed) until its source drops it
//	Terminating  removed from its source, deleted, evicted or orphaned: being killed
//
// An evicted pod is terminating too until its kill ends (IsTerminating);
// a terminating pod re-added before its kill ended is admitted again.
//
// Concurrency: the Manager's writer methods (Set, Delete, Refuse, Evict,
// Forget, Hold, StartTermination, EndTermination, SetWorkers) are called
// by the sync loop only — its goroutine, and a worker's kill completion,
// which the loop serialises under its own lock — so the desired set has
// one writer. Every Reader method is safe from any goroutine at any time:
// an RWMutex guards the maps, and what is returned is a fresh slice, never
// a map or slice the Manager keeps (the pods themselves are shared and
// must not be modified). The worker view is called without the Manager's
// lock held, so the loop may write while holding its own lock.
package podmanager
