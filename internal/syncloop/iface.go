package syncloop

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pleg"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// Runtime is what the loop's workers need from the container runtime.
// Calls for one pod never overlap; calls for different pods do.
type Runtime interface {
	// SyncPod makes one step toward the spec; it never waits on a backoff.
	SyncPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus) pod.SyncResult
	// KillPod stops and removes everything of the pod; p may be nil for an
	// orphan; gracePeriod < 0 means the pod's own. Idempotent.
	KillPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, gracePeriod int64) error
	// StopPod stops the pod's containers (gracePeriod as KillPod) and
	// sandboxes, removing nothing: their exit codes stay readable.
	StopPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, gracePeriod int64) error
	// ReleasePod tears down what a finished (and stopped) pod no longer
	// needs but for its containers and logs: its volumes. Idempotent.
	ReleasePod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus) error
}

// PLEG is the event source, the status cache workers read (the single
// source of runtime truth) and the list-level snapshot housekeeping reads.
type PLEG interface {
	Watch() <-chan pleg.Event
	// GetNewerThan blocks until the cache holds uid's status as of a time
	// after min.
	GetNewerThan(ctx context.Context, uid pod.UID, min time.Time) (*pod.RuntimeStatus, error)
	Snapshot() (map[pod.UID]*pod.RuntimeStatus, time.Time)
	Healthy() error
}

// StatusSink receives every pod's outcome. Called from worker goroutines
// and the loop concurrently.
type StatusSink interface {
	// Synced reports a sync: spec, the runtime status it started from,
	// and what it achieved. It returns the phase it published: a terminal
	// one (Succeeded, Failed) ends the pod's life on the node (finished).
	Synced(p *v1.Pod, st *pod.RuntimeStatus, res pod.SyncResult) v1.PodPhase
	// Finished publishes the status of a pod that is over: terminal,
	// its containers and sandboxes stopped but kept (logs, exit codes).
	// reason and message, when set, are why the agent ended it
	// (DeadlineExceeded); else what the pod's source already shows
	// terminal (an API pod's phase, reason, message) or what its
	// containers show stands.
	Finished(p *v1.Pod, st *pod.RuntimeStatus, reason, message string)
	// Admitted reports a pod the moment it is admitted, before any runtime
	// work; st is the runtime's list-level view of it (nil when new).
	Admitted(p *v1.Pod, st *pod.RuntimeStatus)
	// Refused reports a pod the admit chain refused.
	Refused(p *v1.Pod, reason, message string)
	// Evicted reports a pod ended for the node's sake, once its
	// containers stopped (st, the view after the stop): Failed, with the
	// reason (Evicted, or a node shutdown's Terminated) and message; it
	// stays published after its kill.
	Evicted(p *v1.Pod, reason, message string, st *pod.RuntimeStatus)
	// Blocked reports a pod the run chain keeps from running: Pending,
	// with the reason, its containers waiting as Blocked.
	Blocked(p *v1.Pod, st *pod.RuntimeStatus, reason, message string)
	// Terminating reports that a pod's removal began.
	Terminating(p *v1.Pod, gracePeriod int64)
	// RuntimeHealth reports a change of the runtime's (or the PLEG's)
	// health as the loop sees it; nil: healthy again.
	RuntimeHealth(err error)
	// Terminated reports the final status of a pod whose deletion the API
	// server asked for: st is the runtime's view after its containers
	// were stopped.
	Terminated(p *v1.Pod, st *pod.RuntimeStatus)
	// Removed forgets a pod.
	Removed(p *v1.Pod)
}

// Prober runs the containers' probes; its changed verdicts are one more
// input of the loop.
type Prober interface {
	Updates() <-chan pod.ProbeUpdate
	// Sync points p's probes at the containers' current instances in st.
	Sync(p *v1.Pod, st *pod.RuntimeStatus)
	// RemovePod stops the pod's probes (it is being killed).
	RemovePod(uid pod.UID)
}
