// Package pleg is the pod lifecycle event generator: it turns what the
// runtime has into events (container started, died, removed, sandbox
// changed) for the sync loop.
//
// Generic relists the runtime every period (two CRI list calls), diffs the
// new snapshot against the previous one per pod and emits one event per
// change. It keeps the last snapshot with its time (Snapshot) and reports
// itself unhealthy when no relist succeeded for three minutes.
//
// It does not decide anything about pods; it does not inspect containers
// (pod workers read full status when they sync).
//
// Concurrency: Relist must not be called concurrently with itself (Run
// calls it from one goroutine); Watch, Snapshot and Healthy are safe from
// any goroutine. Events are sent without blocking: when the channel is
// full an event is dropped and counted (Dropped), and the sync loop's
// periodic resync recovers.
package pleg
