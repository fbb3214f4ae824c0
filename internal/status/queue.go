package status

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// queue hands the files to write to one writer, off the callers' locks
// and goroutines: a pod queued again before its turn is written once,
// with the state of the moment it is written (write reads it then).
type queue struct {
	write func(*v1.Pod)
	// after, if set, paces the writer: after a round of writes it waits
	// pause before the next, so that a burst (a pod's Pending, Running and
	// its events within a moment) costs one write per file.
	after func(time.Duration) <-chan time.Time
	pause time.Duration

	mu    sync.Mutex
	dirty map[pod.UID]*v1.Pod
	wake  chan struct{}
}

func newQueue(write func(*v1.Pod)) *queue {
	return &queue{write: write, dirty: map[pod.UID]*v1.Pod{}, wake: make(chan struct{}, 1)}
}

// add queues p's file (its newest spec wins).
func (q *queue) add(p *v1.Pod) {
	q.mu.Lock()
	q.dirty[p.UID] = p
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// drain writes everything queued so far.
func (q *queue) drain() {
	q.mu.Lock()
	d := q.dirty
	q.dirty = map[pod.UID]*v1.Pod{}
	q.mu.Unlock()
	for _, p := range d {
		q.write(p)
	}
}

// run writes what is queued until ctx ends, then what is left.
func (q *queue) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			q.drain()
			return
		case <-q.wake:
			q.drain()
			if q.after == nil {
				continue
			}
			select {
			case <-ctx.Done():
			case <-q.after(q.pause):
			}
		}
	}
}
