package pleg

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// Watcher streams the runtime's container events (CRI
// GetContainerEvents): it calls notify for each event and returns when the
// stream ends. An error wrapping errors.ErrUnsupported means the runtime
// has no event stream (containerd < 1.7).
type Watcher interface {
	WatchEvents(ctx context.Context, notify func()) error
}

// RunEvented makes g evented: every runtime event triggers an immediate
// relist, so events reach the loop within milliseconds, and while the
// stream is up the periodic relist slows to slow (a safety net for missed
// events). When the stream breaks, the relist period returns to fast and
// the stream is reopened with a backoff (1s doubling to 30s); a runtime
// without the stream leaves g relisting at Run's period. Runs until ctx
// ends.
func (g *Generic) RunEvented(ctx context.Context, w Watcher, slow time.Duration) {
	g.slow.Store(int64(slow))
	wait := time.Second
	for {
		g.streaming.Store(true)
		g.Trigger() // events may have been missed while the stream was down
		opened := g.clock.Now()
		err := w.WatchEvents(ctx, g.Trigger)
		g.streaming.Store(false)
		g.Trigger()
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errors.ErrUnsupported) {
			g.log.Info("runtime has no container event stream; relisting", zap.Duration("period", time.Duration(g.fast.Load())), zap.Error(err))
			return
		}
		if g.clock.Since(opened) > time.Minute {
			wait = time.Second
		}
		g.log.Warn("container event stream ended; relisting until it is back", zap.Duration("retryIn", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-g.clock.After(wait):
		}
		wait = min(2*wait, 30*time.Second)
	}
}
