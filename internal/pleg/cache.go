package pleg

import (
	"context"
	"time"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// cacheEntry is one pod's inspected status (or why inspection failed).
type cacheEntry struct {
	status *pod.RuntimeStatus
	err    error
}

// The status cache (the kubelet's kubecontainer.Cache): the single source
// of runtime truth for pod workers. Relist fills it, inspecting (Lister.
// InspectPod) only pods whose list-level state changed, and then marks
// every entry current as of the relist's start. A worker asks for a status
// newer than the end of its own last sync; when the cache is not that
// fresh yet, it triggers a relist and waits, so it never acts on a view
// that predates its own actions.

// GetNewerThan returns uid's status once the cache is current as of a time
// after min, triggering a relist when it is not yet. A pod the runtime
// does not have yields an empty status. When inspecting the pod failed it
// returns the error with the list-level status (IDs and states, no exit
// codes), which is enough to kill it. It blocks until then or until ctx
// ends.
func (g *Generic) GetNewerThan(ctx context.Context, uid pod.UID, min time.Time) (*pod.RuntimeStatus, error) {
	for {
		g.mu.Lock()
		e, ok := g.cache[uid]
		fresh := g.timestamp.After(min)
		changed := g.changed
		g.mu.Unlock()
		if fresh {
			if !ok {
				return &pod.RuntimeStatus{UID: uid}, nil
			}
			return e.status, e.err
		}
		g.Trigger()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// updateCacheLocked records statuses read by the relist that started at
// start and wakes the waiters. g.mu is held.
func (g *Generic) updateCacheLocked(statuses map[pod.UID]cacheEntry, gone []pod.UID, start time.Time) {
	for uid, e := range statuses {
		g.cache[uid] = e
	}
	for _, uid := range gone {
		delete(g.cache, uid)
	}
	g.timestamp = start
	close(g.changed)
	g.changed = make(chan struct{})
}
