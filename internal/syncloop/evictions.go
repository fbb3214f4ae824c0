package syncloop

import (
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Evictions carries the eviction manager's decisions into the loop. It is
// made before both (NewEvictions), so the eviction manager — which the
// loop's admission asks about node pressure — is built before the loop,
// without a late-bound reference either way.
type Evictions struct {
	ch   chan eviction
	done chan struct{} // closed when the loop's Run returns
	once sync.Once
}

// NewEvictions returns the channel of decisions for one loop.
func NewEvictions() *Evictions {
	return &Evictions{ch: make(chan eviction, 16), done: make(chan struct{})}
}

// Evict ends p for the node's sake: Failed, reason Evicted, its
// containers killed with grace seconds, and it is not started again
// while its source keeps it. Safe from any goroutine; it returns at once
// once the loop is over.
func (e *Evictions) Evict(p *v1.Pod, grace int64, message string) {
	select {
	case e.ch <- eviction{pod: p, grace: grace, reason: ReasonEvicted, message: message}:
	case <-e.done:
	}
}

// ReasonEvicted is an evicted pod's status reason.
const ReasonEvicted = "Evicted"

// Terminate ends p for the node's sake as Evict does, with the status
// reason and message given (a node shutdown's: Terminated, "Pod was
// terminated in response to imminent node shutdown."). The returned
// channel is closed once its containers are killed (or at once when the
// pod is gone, or the loop is over).
func (e *Evictions) Terminate(p *v1.Pod, grace int64, reason, message string) <-chan struct{} {
	done := make(chan struct{})
	select {
	case <-e.done: // the loop is over: nothing will kill it
		close(done)
		return done
	default:
	}
	select {
	case e.ch <- eviction{pod: p, grace: grace, reason: reason, message: message, done: done}:
	case <-e.done:
		close(done)
	}
	return done
}

// close marks the loop over.
func (e *Evictions) close() { e.once.Do(func() { close(e.done) }) }

// eviction is the eviction manager's decision about one pod.
type eviction struct {
	pod     *v1.Pod
	grace   int64
	reason  string
	message string
	// done, if set, is closed once the pod's kill completed.
	done chan struct{}
}
