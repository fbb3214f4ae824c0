// Package syncloop is the agent's heart: one loop that selects over config
// updates, PLEG events, a sync tick and a housekeeping tick, and one worker
// goroutine per pod that talks to the runtime.
//
//	podsource ──Update──> Loop ──admit.Chain──> worker[uid] ──> Runtime (CRI)
//	                        ^                        │
//	                        └── pleg.Event <── relist┘
//	sync tick: wake workers whose retry/resync is due
//	housekeeping tick: kill orphans (after all sources were seen); the
//	  cleanups (Config.Housekeeping: dead containers, directories, cgroups,
//	  CPUs, allocations) run beside the loop, one round at a time, and a
//	  new pod is admitted before a round's view of the pods or after it
//
// The loop is the only writer of the desired set — internal/podmanager's
// Manager (Config.Pods), which others read through Loop.Pods — and never
// calls the runtime itself, so a slow image pull only ever blocks its own
// pod. The workers and their states are the loop's, not the pod
// manager's; it reads whether a pod is finished through workerView. When
// each recent kill completed (finished) stays loop-private: it is about
// pods nobody desires any more.
// Workers coalesce: a worker woken many times while busy syncs once more
// with the newest spec. A removed pod's worker kills the pod (grace period,
// then sandbox stop and removal) and then exits.
//
// Each worker acts on its pod's state (state.go: podState), which changes
// only through one transition function, podState.next. Its phases change
// so (TestStateDiagramMatchesTransitions checks this drawing against
// next; every other event leaves the phase as it is):
//
//	syncing      --finish-->  finished
//	syncing      --update-->  finished
//	syncing      --kill-->    terminating
//	syncing      --evict-->   terminating
//	finished     --kill-->    terminating
//	finished     --evict-->   terminating
//	terminating  --update-->  syncing
//	terminating  --update-->  finished
//	terminating  --killed-->  terminated
//
// syncing: SyncPod at each step. finished (a terminal phase — its sync
// saw one, or its source shows one — or activeDeadlineSeconds passed): what still runs is stopped, the final
// status published, nothing removed (logs stay) and nothing run again.
// terminating: a deleted API pod is stopped and its final status written
// first; then KillPod removes everything. terminated: the worker exits.
// A re-add before the kill ended returns the pod to where it was (a
// finished pod stays finished). The loop only applies events; it never
// reads or writes a worker's fields.
//
// PLEG events are never waited for: the PLEG drops events on a full
// channel and counts them; the periodic resync of every pod (ResyncPeriod)
// recovers anything lost.
//
// When the runtime or the PLEG is unhealthy the loop backs off
// exponentially (100ms doubling to 2s) and does nothing else until health
// returns; the status sink hears of both transitions (pods show Unknown
// meanwhile), and every worker is woken when health returns.
//
// Status is reported from the first moment: on admission (Pending, start
// time), after every sync, on removal (Terminating) and when refused.
//
// Concurrency: Run is called once. Workers run concurrently with the loop;
// the workers map is guarded by a mutex (mu). The loop writes the pod
// manager from its goroutine, and from workerDone (a kill's end starts the
// held pod) under mu; mu is taken before the pod manager's lock, never
// after (its Reader calls workerView without its own lock held).
package syncloop
