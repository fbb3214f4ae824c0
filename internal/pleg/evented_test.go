package pleg

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// scriptedWatcher is an event stream the test drives: each WatchEvents
// reports itself on opened, delivers one event per value received on
// events (reporting each on delivered), and ends with err once events is
// closed.
type scriptedWatcher struct {
	err       error
	opened    chan struct{}
	events    chan struct{}
	delivered chan struct{}
}

func newScriptedWatcher(err error) *scriptedWatcher {
	return &scriptedWatcher{err: err, opened: make(chan struct{}, 10), events: make(chan struct{}, 1), delivered: make(chan struct{}, 10)}
}

func (w *scriptedWatcher) WatchEvents(ctx context.Context, notify func()) error {
	w.opened <- struct{}{}
	for {
		select {
		case _, ok := <-w.events:
			if !ok {
				return w.err
			}
			notify()
			w.delivered <- struct{}{}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func TestRunEventedUnsupportedFallsBackToRelist(t *testing.T) {
	g, _ := newGeneric(t, staticLister{}, 10)
	w := newScriptedWatcher(fmt.Errorf("stream: %w", errors.ErrUnsupported))
	close(w.events)
	done := make(chan struct{})
	go func() { g.RunEvented(context.Background(), w, 30*time.Second); close(done) }()
	recv(t, done, "RunEvented giving up on an unsupported stream")
	if len(w.opened) != 1 {
		t.Fatalf("stream opened %d times, want 1", len(w.opened))
	}
	if g.streaming.Load() || g.period() != time.Second {
		t.Fatalf("period = %v streaming=%v, want the fast relist", g.period(), g.streaming.Load())
	}
}

func TestRunEventedSlowsRelistWhileStreamUpAndTriggers(t *testing.T) {
	g, clk := newGeneric(t, staticLister{}, 10)
	w := newScriptedWatcher(errors.New("broken"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.RunEvented(ctx, w, 30*time.Second); close(done) }()

	// RunEvented marks the stream up and triggers a relist (events may
	// have been missed) before it opens the stream.
	recv(t, w.opened, "stream opened")
	if p := g.period(); p != 30*time.Second {
		t.Fatalf("period while the stream is up = %v, want 30s", p)
	}
	select {
	case <-g.trigger:
	default:
		t.Fatal("opening the stream did not trigger a relist")
	}
	// Each runtime event triggers a relist.
	w.events <- struct{}{}
	recv(t, w.delivered, "event delivered")
	if len(g.trigger) != 1 {
		t.Fatal("an event did not trigger a relist")
	}
	<-g.trigger

	// The stream breaks: back to the fast relist at once (a relist
	// re-arms Run's timer with the fast period), reopened after 1s, then
	// after 2s.
	close(w.events)
	if d := clk.waitArmed(t); d != time.Second {
		t.Fatalf("reopen backoff = %v, want 1s", d)
	}
	if p := g.period(); p != time.Second {
		t.Fatalf("period after the stream broke = %v, want 1s", p)
	}
	if len(g.trigger) != 1 {
		t.Fatal("the stream breaking did not trigger a relist")
	}
	clk.Step(time.Second)
	recv(t, w.opened, "stream reopened after the backoff")
	if d := clk.waitArmed(t); d != 2*time.Second {
		t.Fatalf("second reopen backoff = %v, want 2s", d)
	}
	cancel()
	recv(t, done, "RunEvented returning after its context ended")
}

type staticLister struct{}

func (staticLister) ListPods(context.Context) ([]*pod.RuntimeStatus, error) { return nil, nil }
func (staticLister) InspectPod(_ context.Context, listed, _ *pod.RuntimeStatus) (*pod.RuntimeStatus, error) {
	return listed, nil
}
