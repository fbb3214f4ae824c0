package pleg

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// scriptedWatcher delivers a number of events, then ends the stream with
// err; it records how often it was opened.
type scriptedWatcher struct {
	events int
	err    error
	opened chan struct{}
	block  chan struct{}
}

func (w *scriptedWatcher) WatchEvents(ctx context.Context, notify func()) error {
	w.opened <- struct{}{}
	for i := 0; i < w.events; i++ {
		notify()
	}
	if w.block != nil {
		select {
		case <-w.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.err
}

func TestRunEventedUnsupportedFallsBackToRelist(t *testing.T) {
	g, _ := newGeneric(t, staticLister{}, 10)
	w := &scriptedWatcher{err: fmt.Errorf("stream: %w", errors.ErrUnsupported), opened: make(chan struct{}, 10)}
	done := make(chan struct{})
	go func() { g.RunEvented(context.Background(), w, 30*time.Second); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunEvented did not give up on an unsupported stream")
	}
	if len(w.opened) != 1 {
		t.Fatalf("stream opened %d times, want 1", len(w.opened))
	}
	if g.streaming.Load() || g.period() != time.Second {
		t.Fatalf("period = %v streaming=%v, want the fast relist", g.period(), g.streaming.Load())
	}
}

func TestRunEventedSlowsRelistWhileStreamUpAndTriggers(t *testing.T) {
	g, clk := newGeneric(t, staticLister{}, 10)
	w := &scriptedWatcher{events: 1, opened: make(chan struct{}, 10), block: make(chan struct{}), err: errors.New("broken")}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.RunEvented(ctx, w, 30*time.Second); close(done) }()
	<-w.opened
	waitFor(t, func() bool { return g.period() == 30*time.Second })
	if len(g.trigger) != 1 {
		t.Fatal("an event did not trigger a relist")
	}
	// The stream breaks: back to the fast relist, reopened after 1s.
	close(w.block)
	waitFor(t, func() bool { return g.period() == time.Second })
	waitArmed(t, clk)
	clk.Step(time.Second)
	select {
	case <-w.opened:
	case <-time.After(10 * time.Second):
		t.Fatal("stream not reopened after the backoff")
	}
	cancel()
	<-done
}

type staticLister struct{}

func (staticLister) ListPods(context.Context) ([]*pod.RuntimeStatus, error) { return nil, nil }
func (staticLister) InspectPod(_ context.Context, listed, _ *pod.RuntimeStatus) (*pod.RuntimeStatus, error) {
	return listed, nil
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
