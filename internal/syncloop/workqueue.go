package syncloop

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// workQueue holds, per pod, when it is next due for a sync.
type workQueue struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	due   map[pod.UID]time.Time
}

func newWorkQueue(c clock.PassiveClock) *workQueue {
	return &workQueue{clock: c, due: map[pod.UID]time.Time{}}
}

// Enqueue makes uid due after delay; an earlier due time is kept.
func (q *workQueue) Enqueue(uid pod.UID, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.clock.Now().Add(delay)
	if old, ok := q.due[uid]; ok && old.Before(t) {
		return
	}
	q.due[uid] = t
}

// Replace sets uid's due time, later or earlier.
func (q *workQueue) Replace(uid pod.UID, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.due[uid] = q.clock.Now().Add(delay)
}

// Forget drops uid.
func (q *workQueue) Forget(uid pod.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.due, uid)
}

// Due removes and returns the pods that are due now.
func (q *workQueue) Due() []pod.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	var out []pod.UID
	for uid, t := range q.due {
		if !t.After(now) {
			out = append(out, uid)
			delete(q.due, uid)
		}
	}
	return out
}
