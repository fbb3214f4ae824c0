// Package backoff keeps per-key exponential delays: the CrashLoopBackOff of
// containers and the ImagePullBackOff of images. It is the kubelet's
// flowcontrol.Backoff reduced to what the agent uses, on an injected clock.
//
// Safe for concurrent use.
package backoff

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Backoff doubles a key's delay from Initial up to Max on every Next. A key
// untouched for ResetAfter starts again from Initial.
type Backoff struct {
	Initial, Max, ResetAfter time.Duration

	clock clock.PassiveClock
	mu    sync.Mutex
	keys  map[string]entry
}

type entry struct {
	delay time.Duration
	last  time.Time
}

// New returns a Backoff; resetAfter 0 means 2×max.
func New(c clock.PassiveClock, initial, max, resetAfter time.Duration) *Backoff {
	if resetAfter == 0 {
		resetAfter = 2 * max
	}
	return &Backoff{Initial: initial, Max: max, ResetAfter: resetAfter, clock: c, keys: map[string]entry{}}
}

// Next records one more failure of key and returns the new delay.
func (b *Backoff) Next(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	e, ok := b.keys[key]
	switch {
	case !ok || now.Sub(e.last) > b.ResetAfter:
		e.delay = b.Initial
	default:
		e.delay *= 2
		if e.delay > b.Max {
			e.delay = b.Max
		}
	}
	e.last = now
	b.keys[key] = e
	return e.delay
}

// Remaining returns how long key is still backed off, counted from since
// (for containers: when the last instance finished), or 0.
func (b *Backoff) Remaining(key string, since time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.keys[key]
	if !ok {
		return 0
	}
	now := b.clock.Now()
	if now.Sub(e.last) > b.ResetAfter {
		delete(b.keys, key)
		return 0
	}
	if since.IsZero() {
		since = e.last
	}
	if d := e.delay - now.Sub(since); d > 0 {
		return d
	}
	return 0
}

// Delay returns key's current delay, 0 when it has none.
func (b *Backoff) Delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.keys[key].delay
}

// Reset forgets key.
func (b *Backoff) Reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.keys, key)
}

// GC forgets keys untouched for ResetAfter.
func (b *Backoff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for k, e := range b.keys {
		if now.Sub(e.last) > b.ResetAfter {
			delete(b.keys, k)
		}
	}
}
