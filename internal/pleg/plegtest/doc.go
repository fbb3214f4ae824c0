// Package plegtest provides Fake, a hand-written PLEG for tests of the code
// above the PLEG (the sync loop).
//
// It owns: an event channel the test feeds (Send), the list-level snapshot
// and health the test sets, and a status cache the test publishes to
// (Publish), with the time the cache is current as of. GetNewerThan keeps
// the real contract — it blocks until the cache is current as of a time
// after min — and reports every call that has to wait on Waiting, which is
// where a test sees a worker ask for a newer view and decides when (and
// whether) the "relist" happens. Every GetNewerThan call is recorded.
//
// It does not own any relisting, diffing or timing: nothing happens unless
// the test publishes, and it reads no clock.
//
// Concurrency: every method is safe for concurrent use.
package plegtest
