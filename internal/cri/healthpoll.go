package cri

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// HealthPoller keeps the runtime's RuntimeReady condition (Health) as
// last read: every 5s while the runtime is ready, every second while it
// is not, so its return is noticed at once. Err is nil until the first
// read. Poll and Run from one goroutine; Err from any.
type HealthPoller struct {
	c     Client
	clk   clock.WithTicker
	also  func(context.Context)
	state atomic.Pointer[error]
}

// NewHealthPoller polls c; also, if set, runs with every poll (the pod
// network's own Status read).
func NewHealthPoller(c Client, clk clock.WithTicker, also func(context.Context)) *HealthPoller {
	return &HealthPoller{c: c, clk: clk, also: also}
}

// Poll reads the runtime's status once (bounded by 10s).
func (h *HealthPoller) Poll(ctx context.Context) {
	rtErr, _ := Health(ctx, h.c, 10*time.Second)
	h.state.Store(&rtErr)
	if h.also != nil {
		h.also(ctx)
	}
}

// Err is RuntimeReady as last read: nil when true (or not read yet).
func (h *HealthPoller) Err() error {
	if e := h.state.Load(); e != nil {
		return *e
	}
	return nil
}

// Run polls until ctx ends.
func (h *HealthPoller) Run(ctx context.Context) {
	t := h.clk.NewTicker(time.Second)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if n%5 == 0 || h.Err() != nil {
				h.Poll(ctx)
			}
		}
	}
}
