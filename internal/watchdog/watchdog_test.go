package watchdog

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	clocktesting "k8s.io/utils/clock/testing"
)

// The watchdog is fed every half interval while the checks pass, not
// while one fails, and again once it passes. Checks and pings are seen
// in order on one channel, so a ping after a failed check cannot hide.
func TestRunPingsOnlyWhileHealthy(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	seen := make(chan string, 10)
	var mu sync.Mutex
	var bad error
	healthy := func() error {
		mu.Lock()
		defer mu.Unlock()
		seen <- "check"
		return bad
	}
	notify := func(s string) (bool, error) { seen <- s; return true, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctx, clk, 20*time.Second, healthy, notify, zap.NewNop())
		close(done)
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-seen:
			if got != want {
				t.Fatalf("saw %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing seen, want %q", want)
		}
	}
	tick := func() {
		t.Helper()
		for !clk.HasWaiters() { // Run's ticker is set
			runtime.Gosched()
		}
		clk.Step(10 * time.Second) // half the interval
	}
	next("check") // at once
	next(Ping)
	tick()
	next("check")
	next(Ping)
	mu.Lock()
	bad = errors.New("stuck")
	mu.Unlock()
	tick()
	next("check") // failed: no ping follows
	mu.Lock()
	bad = nil
	mu.Unlock()
	tick()
	next("check")
	next(Ping)
	cancel()
	<-done
}

// The loop is alive while it iterated within its allowance.
func TestLoopHealth(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := NewLoop(clk, 5*time.Minute)
	if err := l.Healthy(); err != nil {
		t.Fatalf("fresh: %v", err)
	}
	clk.Step(4 * time.Minute)
	l.Iterated()
	clk.Step(4 * time.Minute)
	if err := l.Healthy(); err != nil {
		t.Fatalf("4 minutes after an iteration: %v", err)
	}
	clk.Step(2 * time.Minute)
	if err := l.Healthy(); err == nil {
		t.Fatal("6 minutes without an iteration: healthy")
	}
}
