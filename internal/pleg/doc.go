// Package pleg is the pod lifecycle event generator and the pod status
// cache: it turns what the runtime has into events (container started,
// died, removed, sandbox changed) for the sync loop, and into the cached
// status pod workers act on.
//
// Generic relists the runtime (two CRI list calls), diffs the new snapshot
// against the previous one per pod, inspects only the pods that changed
// into the status cache, marks the cache current as of the relist, and
// then emits one event per change. It relists every period, on Trigger,
// and — with RunEvented — on every event of the runtime's container event
// stream, the timed relist then slowing to a safety net. It keeps the last
// list-level snapshot with its time (Snapshot) and is unhealthy when no
// relist succeeded for three minutes.
//
//	runtime event ─┐
//	timer ─────────┼─> Relist ─> cache (GetNewerThan) ─> events (Watch)
//	GetNewerThan ──┘   (a worker that needs a newer view triggers one)
//
// It does not decide anything about pods.
//
// Concurrency: Relist must not be called concurrently with itself (Run
// calls it from one goroutine); Watch, Snapshot, Healthy, Trigger and
// GetNewerThan are safe from any goroutine. Events are sent without
// blocking: when the channel is full an event is dropped and counted
// (Dropped), and the sync loop's periodic resync recovers.
package pleg
