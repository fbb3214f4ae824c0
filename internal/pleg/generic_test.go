package pleg

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// fakeLister returns whatever snapshot the test set last, or err.
type fakeLister struct {
	mu    sync.Mutex
	pods  []*pod.RuntimeStatus
	err   error
	calls int
}

func (f *fakeLister) ListPods(context.Context) ([]*pod.RuntimeStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return f.pods, nil
}

func (f *fakeLister) InspectPod(_ context.Context, listed, _ *pod.RuntimeStatus) (*pod.RuntimeStatus, error) {
	return listed, nil
}

func (f *fakeLister) set(pods []*pod.RuntimeStatus, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods, f.err = pods, err
}

const (
	ready    = runtimeapi.PodSandboxState_SANDBOX_READY
	notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
)

func sandbox(id string, s runtimeapi.PodSandboxState) *pod.Sandbox {
	return &pod.Sandbox{ID: id, State: s}
}

func ctr(id string, s pod.ContainerState) *pod.Container {
	return &pod.Container{ID: id, SandboxID: "sb1", Name: "n-" + id, State: s}
}

func podOf(uid pod.UID, sbs []*pod.Sandbox, cs ...*pod.Container) *pod.RuntimeStatus {
	return &pod.RuntimeStatus{UID: uid, Name: string(uid), Namespace: "default", Sandboxes: sbs, Containers: cs}
}

func sbs(s ...*pod.Sandbox) []*pod.Sandbox { return s }

func snapshot(ps ...*pod.RuntimeStatus) []*pod.RuntimeStatus { return ps }

func newGeneric(t *testing.T, l Lister, capacity int) (*Generic, *armClock) {
	t.Helper()
	clk := &armClock{FakeClock: testclock.NewFakeClock(time.Unix(1_700_000_000, 0)), armed: make(chan time.Duration, 100)}
	return NewGeneric(l, clk, zaptest.NewLogger(t), capacity), clk
}

// within bounds every wait for something that must happen; only a hang
// (a failing test) reaches it.
const within = 10 * time.Second

// recv returns the next value of ch, failing the test after within.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("%s: nothing within %v", what, within)
	}
	var zero T
	return zero
}

// armClock is a FakeClock that reports each timer armed on it (After,
// NewTimer) once it is armed, so a test steps time exactly when the code
// waits for it.
type armClock struct {
	*testclock.FakeClock
	armed chan time.Duration
}

func (c *armClock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	c.armed <- d
	return ch
}

func (c *armClock) NewTimer(d time.Duration) clock.Timer {
	tm := c.FakeClock.NewTimer(d)
	c.armed <- d
	return tm
}

// waitArmed returns the duration of the next timer armed.
func (c *armClock) waitArmed(t *testing.T) time.Duration {
	t.Helper()
	return recv(t, c.armed, "timer armed")
}

// drain returns the queued events, sorted, without blocking.
func drain(g *Generic) []Event {
	var out []Event
	for {
		select {
		case ev := <-g.Watch():
			out = append(out, ev)
		default:
			sort.Slice(out, func(i, j int) bool {
				a, b := out[i], out[j]
				if a.UID != b.UID {
					return a.UID < b.UID
				}
				if a.Data != b.Data {
					return a.Data < b.Data
				}
				return a.Type < b.Type
			})
			return out
		}
	}
}

func TestRelistEvents(t *testing.T) {
	tests := []struct {
		name string
		old  []*pod.RuntimeStatus
		cur  []*pod.RuntimeStatus
		want []Event
	}{
		{
			name: "nothing before, nothing now",
		},
		{
			name: "new pod with a running container",
			cur:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning))),
			want: []Event{{"u1", ContainerStarted, "c1"}, {"u1", SandboxChanged, "sb1"}},
		},
		{
			name: "new container in a known pod",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning))),
			want: []Event{{"u1", ContainerStarted, "c1"}},
		},
		{
			name: "created container",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerCreated))),
			want: []Event{{"u1", ContainerChanged, "c1"}},
		},
		{
			name: "created to running",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerCreated))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning))),
			want: []Event{{"u1", ContainerStarted, "c1"}},
		},
		{
			name: "running to exited",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerExited))),
			want: []Event{{"u1", ContainerDied, "c1"}},
		},
		{
			name: "exited container removed",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerExited))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)))),
			want: []Event{{"u1", ContainerRemoved, "c1"}},
		},
		{
			name: "running container gone dies and is removed",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)))),
			want: []Event{{"u1", ContainerDied, "c1"}, {"u1", ContainerRemoved, "c1"}},
		},
		{
			name: "sandbox stopped",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb1", notReady)))),
			want: []Event{{"u1", SandboxChanged, "sb1"}},
		},
		{
			name: "new sandbox beside the old one",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", notReady)))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb2", ready), sandbox("sb1", notReady)))),
			want: []Event{{"u1", SandboxChanged, "sb2"}},
		},
		{
			name: "sandbox removed",
			old:  snapshot(podOf("u1", sbs(sandbox("sb2", ready), sandbox("sb1", notReady)))),
			cur:  snapshot(podOf("u1", sbs(sandbox("sb2", ready)))),
			want: []Event{{"u1", SandboxChanged, "sb1"}},
		},
		{
			name: "no change, no events",
			old: snapshot(
				podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning), ctr("c0", pod.ContainerExited)),
				podOf("u2", sbs(sandbox("sb9", notReady))),
			),
			cur: snapshot(
				podOf("u2", sbs(sandbox("sb9", notReady))),
				podOf("u1", sbs(sandbox("sb1", ready)), ctr("c0", pod.ContainerExited), ctr("c1", pod.ContainerRunning)),
			),
		},
		{
			name: "whole pod gone",
			old:  snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning), ctr("c2", pod.ContainerExited))),
			want: []Event{
				{"u1", ContainerDied, "c1"}, {"u1", ContainerRemoved, "c1"},
				{"u1", ContainerRemoved, "c2"},
				{"u1", SandboxChanged, "sb1"},
			},
		},
		{
			name: "changes in two pods",
			old: snapshot(
				podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning)),
				podOf("u2", sbs(sandbox("sb2", ready)), ctr("c2", pod.ContainerRunning)),
			),
			cur: snapshot(
				podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerExited)),
				podOf("u2", sbs(sandbox("sb2", ready)), ctr("c2", pod.ContainerRunning), ctr("c3", pod.ContainerRunning)),
			),
			want: []Event{{"u1", ContainerDied, "c1"}, {"u2", ContainerStarted, "c3"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &fakeLister{}
			g, _ := newGeneric(t, l, 100)
			l.set(tt.old, nil)
			if err := g.Relist(context.Background()); err != nil {
				t.Fatalf("first Relist() error = %v", err)
			}
			drain(g)
			l.set(tt.cur, nil)
			if err := g.Relist(context.Background()); err != nil {
				t.Fatalf("Relist() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, drain(g)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if g.Dropped() != 0 {
				t.Errorf("Dropped() = %d, want 0", g.Dropped())
			}
		})
	}
}

func TestRelistErrorKeepsSnapshot(t *testing.T) {
	l := &fakeLister{}
	g, clk := newGeneric(t, l, 10)
	first := snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerRunning)))
	l.set(first, nil)
	if err := g.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	drain(g)
	at := clk.Now()

	clk.Step(time.Second)
	listErr := errors.New("runtime unavailable")
	l.set(nil, listErr)
	if err := g.Relist(context.Background()); !errors.Is(err, listErr) {
		t.Fatalf("Relist() error = %v, want it to wrap %v", err, listErr)
	}
	if evs := drain(g); len(evs) != 0 {
		t.Errorf("a failed relist sent events %v", evs)
	}
	snap, when := g.Snapshot()
	if !when.Equal(at) || len(snap) != 1 || snap["u1"] != first[0] {
		t.Errorf("Snapshot() = %v at %v, want the last good list at %v", snap, when, at)
	}

	// When the runtime answers again, only the real changes are reported.
	l.set(snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", pod.ContainerExited))), nil)
	if err := g.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Event{{"u1", ContainerDied, "c1"}}, drain(g)); diff != "" {
		t.Errorf("events after recovery (-want +got):\n%s", diff)
	}
}

func TestRelistFullChannelDrops(t *testing.T) {
	l := &fakeLister{}
	g, _ := newGeneric(t, l, 2)
	l.set(snapshot(podOf("u1", sbs(sandbox("sb1", ready)),
		ctr("c1", pod.ContainerRunning), ctr("c2", pod.ContainerRunning), ctr("c3", pod.ContainerRunning), ctr("c4", pod.ContainerRunning))), nil)

	done := make(chan error, 1)
	go func() { done <- g.Relist(context.Background()) }()
	if err := recv(t, done, "Relist blocked on a full event channel"); err != nil {
		t.Fatalf("Relist() error = %v", err)
	}
	// 4 container starts + 1 sandbox; the channel holds 2.
	if got := len(drain(g)); got != 2 {
		t.Errorf("queued events = %d, want 2 (the channel capacity)", got)
	}
	if got := g.Dropped(); got != 3 {
		t.Errorf("Dropped() = %d, want 3", got)
	}

	// Drops accumulate.
	l.set(snapshot(podOf("u1", sbs(sandbox("sb1", notReady)))), nil)
	if err := g.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 4 died + 4 removed + 1 sandbox = 9 events, 2 fit.
	if got := g.Dropped(); got != 3+7 {
		t.Errorf("Dropped() after a second relist = %d, want 10", got)
	}
}

func TestHealthy(t *testing.T) {
	l := &fakeLister{}
	g, clk := newGeneric(t, l, 10)
	if err := g.Healthy(); err != nil {
		t.Errorf("Healthy() before the first relist = %v, want nil", err)
	}
	if err := g.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Healthy(); err != nil {
		t.Errorf("Healthy() right after a relist = %v", err)
	}
	clk.Step(MaxRelistAge)
	if err := g.Healthy(); err != nil {
		t.Errorf("Healthy() exactly at the threshold = %v, want nil", err)
	}
	clk.Step(time.Second)
	if err := g.Healthy(); err == nil {
		t.Error("Healthy() = nil 3m1s after the last relist, want an error")
	}

	// A failing relist does not make it healthy.
	l.set(nil, errors.New("down"))
	if err := g.Relist(context.Background()); err == nil {
		t.Fatal("Relist() with a failing lister returned nil")
	}
	if err := g.Healthy(); err == nil {
		t.Error("Healthy() = nil after a failed relist, want an error")
	}

	l.set(nil, nil)
	if err := g.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := g.Healthy(); err != nil {
		t.Errorf("Healthy() after a successful relist = %v, want nil", err)
	}
}

// signalLister reports each ListPods call on a channel.
type signalLister struct{ called chan struct{} }

func (l signalLister) ListPods(ctx context.Context) ([]*pod.RuntimeStatus, error) {
	select {
	case l.called <- struct{}{}:
	case <-ctx.Done():
	}
	return nil, nil
}

func (l signalLister) InspectPod(_ context.Context, listed, _ *pod.RuntimeStatus) (*pod.RuntimeStatus, error) {
	return listed, nil
}

func TestRunRelistsOnEveryTick(t *testing.T) {
	l := signalLister{called: make(chan struct{})}
	g, clk := newGeneric(t, l, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		g.Run(ctx, time.Second)
		close(done)
	}()

	// Run relists at once, then arms a timer for the next relist; each
	// Step comes once the timer is armed, so it is the tick that relists.
	recv(t, l.called, "relist at start")
	for i := 0; i < 3; i++ {
		if d := clk.waitArmed(t); d != time.Second {
			t.Fatalf("relist timer armed for %v, want the period 1s", d)
		}
		clk.Step(time.Second)
		recv(t, l.called, "relist after a tick")
	}
	// A trigger relists without any time passing.
	clk.waitArmed(t)
	g.Trigger()
	recv(t, l.called, "relist after a trigger")
	cancel()
	recv(t, done, "Run returning after its context ended")
}

func TestConcurrentReaders(t *testing.T) {
	// Run under -race: readers of Snapshot, Healthy, Dropped and Watch
	// while Relist replaces the snapshot.
	l := &fakeLister{}
	g, _ := newGeneric(t, l, 1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				snap, _ := g.Snapshot()
				for _, st := range snap {
					_ = st.LatestSandbox()
				}
				_ = g.Healthy()
				_ = g.Dropped()
				select {
				case <-g.Watch():
				default:
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		state := pod.ContainerRunning
		if i%2 == 1 {
			state = pod.ContainerExited
		}
		l.set(snapshot(podOf("u1", sbs(sandbox("sb1", ready)), ctr("c1", state))), nil)
		if err := g.Relist(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
}
