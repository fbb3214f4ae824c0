// Package watchdog keeps systemd's service watchdog fed while the agent
// is healthy, as the kubelet's (its SystemdWatchdog feature): with
// WatchdogSec= in the unit, systemd passes WATCHDOG_USEC and restarts
// the service when no WATCHDOG=1 came within it. The agent pings at half
// the interval while its health checks pass — the sync loop iterated
// recently, the PLEG relisted — and stops pinging when one fails, so a
// stuck agent is restarted (its pods keep running and are adopted).
//
// It owns the ping schedule and the loop's liveness record; the health
// checks and the notification (go-systemd's daemon.SdNotify) are given.
package watchdog

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Notify sends one state to systemd (daemon.SdNotify); false: no
// systemd to tell.
type Notify func(state string) (bool, error)

// Ping is the watchdog keep-alive.
const Ping = "WATCHDOG=1"

// Run pings every interval/2 while healthy() is nil, until ctx ends. A
// failed check is logged once when it starts failing and once when it
// passes again.
func Run(ctx context.Context, clk clock.WithTicker, interval time.Duration, healthy func() error, notify Notify, log *zap.Logger) {
	if interval <= 0 {
		return
	}
	t := clk.NewTicker(interval / 2)
	defer t.Stop()
	failing := false
	for {
		if err := healthy(); err != nil {
			if !failing {
				log.Error("unhealthy: systemd's watchdog is no longer fed and will restart the agent (pods keep running)", zap.Error(err))
			}
			failing = true
		} else {
			if failing {
				log.Info("healthy again: feeding systemd's watchdog")
			}
			failing = false
			if _, err := notify(Ping); err != nil {
				log.Warn("notify systemd's watchdog", zap.Error(err))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// Loop records the sync loop's iterations: it is alive while it
// iterated within its allowance.
type Loop struct {
	clk   clock.PassiveClock
	max   time.Duration
	last  atomic.Int64 // unix nanoseconds of the last iteration
	since time.Time
}

// NewLoop is a record whose loop must iterate at least every max (the
// kubelet's syncLoop health: twice the resync period, at least 5
// minutes). It counts from now until the first iteration.
func NewLoop(clk clock.PassiveClock, max time.Duration) *Loop {
	l := &Loop{clk: clk, max: max, since: clk.Now()}
	l.last.Store(l.since.UnixNano())
	return l
}

// Iterated records one iteration (syncloop's OnIteration).
func (l *Loop) Iterated() { l.last.Store(l.clk.Now().UnixNano()) }

// Healthy is nil while the loop iterated within its allowance.
func (l *Loop) Healthy() error {
	last := time.Unix(0, l.last.Load())
	if d := l.clk.Since(last); d > l.max {
		return fmt.Errorf("the sync loop has not iterated for %v (allowed %v)", d.Round(time.Second), l.max)
	}
	return nil
}
