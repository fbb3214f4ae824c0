package plegtest

import (
	"context"
	"sync"
	"time"

	"github.com/nodeagent/nodeagent/internal/pleg"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// Request is one GetNewerThan call: a status of UID as of a time after Min.
type Request struct {
	UID pod.UID
	Min time.Time
}

// Fake is an in-memory PLEG. The zero value is not usable; call New.
type Fake struct {
	events  chan pleg.Event
	waiting chan Request

	mu       sync.Mutex
	statuses map[pod.UID]*pod.RuntimeStatus
	errs     map[pod.UID]error
	// current is when the cache is current as of; changed is closed and
	// replaced by every Publish.
	current   time.Time
	changed   chan struct{}
	snap      map[pod.UID]*pod.RuntimeStatus
	snapAt    time.Time
	healthErr error
	requests  []Request
}

// New returns a Fake whose cache is current as of no time at all: every
// GetNewerThan waits for a Publish.
func New() *Fake {
	return &Fake{
		events:   make(chan pleg.Event, 100),
		waiting:  make(chan Request, 100),
		statuses: map[pod.UID]*pod.RuntimeStatus{},
		errs:     map[pod.UID]error{},
		changed:  make(chan struct{}),
	}
}

// Watch returns the events the test sends.
func (f *Fake) Watch() <-chan pleg.Event { return f.events }

// Send queues ev for Watch; it blocks when 100 events are queued.
func (f *Fake) Send(ev pleg.Event) { f.events <- ev }

// Publish stores statuses (by UID; other pods keep theirs) and marks the
// whole cache current as of at, as a relist that started at at does, and
// wakes the waiters. at is expected not to go backwards.
func (f *Fake) Publish(at time.Time, statuses ...*pod.RuntimeStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range statuses {
		f.statuses[st.UID] = st
	}
	f.current = at
	close(f.changed)
	f.changed = make(chan struct{})
}

// FailInspection makes GetNewerThan return err, with the published status,
// for uid (nil: succeed again), as the real PLEG does when inspecting a pod
// failed and only its list-level view is known.
func (f *Fake) FailInspection(uid pod.UID, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, uid)
		return
	}
	f.errs[uid] = err
}

// GetNewerThan returns uid's published status once the cache is current as
// of a time after min, or an empty status for a pod never published. Each
// time it finds the cache not that fresh it sends the request on Waiting
// (after it started waiting, so a Publish the test makes on receiving it
// wakes this call) and waits for the next Publish or the end of ctx.
func (f *Fake) GetNewerThan(ctx context.Context, uid pod.UID, min time.Time) (*pod.RuntimeStatus, error) {
	req := Request{UID: uid, Min: min}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()
	for {
		f.mu.Lock()
		fresh := f.current.After(min)
		st, ok := f.statuses[uid]
		err := f.errs[uid]
		changed := f.changed
		f.mu.Unlock()
		if fresh {
			if !ok {
				st = &pod.RuntimeStatus{UID: uid}
			}
			return st, err
		}
		select {
		case f.waiting <- req:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Waiting receives a Request each time a GetNewerThan call finds the cache
// not current enough and waits; it holds up to 100 unread requests, and a
// caller waits while it is full.
func (f *Fake) Waiting() <-chan Request { return f.waiting }

// Requests returns every GetNewerThan call so far, in order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// SetSnapshot sets what Snapshot returns.
func (f *Fake) SetSnapshot(snap map[pod.UID]*pod.RuntimeStatus, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.snap, f.snapAt = snap, at
}

// Snapshot returns the snapshot the test set.
func (f *Fake) Snapshot() (map[pod.UID]*pod.RuntimeStatus, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap, f.snapAt
}

// SetHealthy sets what Healthy returns.
func (f *Fake) SetHealthy(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.healthErr = err
}

// Healthy returns the error the test set.
func (f *Fake) Healthy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthErr
}
