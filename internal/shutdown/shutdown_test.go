package shutdown

import (
	"context"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

func TestGroups(t *testing.T) {
	if g := Groups(0, 0, nil); g != nil {
		t.Errorf("no period: %v; want none", g)
	}
	if diff := cmp.Diff([]Group{{0, 20}, {criticalPriority, 10}}, Groups(30*time.Second, 10*time.Second, nil)); diff != "" {
		t.Errorf("shutdownGracePeriod 30s, critical 10s (-want +got):\n%s", diff)
	}
	by := []kubeletv1beta1.ShutdownGracePeriodByPodPriority{{Priority: 100000, ShutdownGracePeriodSeconds: 5}, {Priority: 0, ShutdownGracePeriodSeconds: 7}}
	if diff := cmp.Diff([]Group{{0, 7}, {100000, 5}}, Groups(30*time.Second, 10*time.Second, by)); diff != "" {
		t.Errorf("by priority, sorted (-want +got):\n%s", diff)
	}
}

func podAt(name string, prio *int32) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}, Spec: v1.PodSpec{Priority: prio}}
}

func TestGroupByPriority(t *testing.T) {
	groups := []Group{{Priority: 10}, {Priority: 100}, {Priority: 1000}}
	pods := []*v1.Pod{podAt("none", nil), podAt("low", ptr.To[int32](5)), podAt("ten", ptr.To[int32](10)), podAt("fifty", ptr.To[int32](50)),
		podAt("hundred", ptr.To[int32](100)), podAt("top", ptr.To[int32](5000))}
	var got [][]string
	for _, g := range group(groups, pods) {
		var names []string
		for _, p := range g {
			names = append(names, p.Name)
		}
		got = append(got, names)
	}
	want := [][]string{{"none", "low", "ten", "fifty"}, {"hundred"}, {"top"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
}

// fakeLogind is logind: a lock the test can see held, signals it sends.
type fakeLogind struct {
	mu        sync.Mutex
	preparing bool            // PreparingForShutdown
	delay     time.Duration   // InhibitDelayMaxUSec; 0: 30 s
	raised    []time.Duration // RaiseInhibitDelay's calls
	unmoved   bool            // RaiseInhibitDelay leaves the delay (a drop-in overridden)
	held      int
	released  chan struct{} // a lock closed
	taken     chan struct{}
	signals   chan bool
}

type lockFile struct{ l *fakeLogind }

func (f lockFile) Close() error {
	f.l.mu.Lock()
	f.l.held--
	f.l.mu.Unlock()
	f.l.released <- struct{}{}
	return nil
}

func (l *fakeLogind) InhibitDelay() (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.delay == 0 {
		return 30 * time.Second, nil
	}
	return l.delay, nil
}

// RaiseInhibitDelay takes effect at once, as logind's reload does by
// the time the agent reads the property again.
func (l *fakeLogind) RaiseInhibitDelay(d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.raised = append(l.raised, d)
	if !l.unmoved {
		l.delay = d
	}
	return nil
}
func (l *fakeLogind) Inhibit() (io.Closer, error) {
	l.mu.Lock()
	l.held++
	l.mu.Unlock()
	l.taken <- struct{}{}
	return lockFile{l}, nil
}
func (l *fakeLogind) Watch() (<-chan bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.signals, nil
}
func (l *fakeLogind) PreparingForShutdown() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.preparing, nil
}
func (l *fakeLogind) Close() error { return nil }
func (l *fakeLogind) locks() int   { l.mu.Lock(); defer l.mu.Unlock(); return l.held }

// recv waits for one value on ch.
func recv(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

// untilWaiters yields until the fake clock has n waiters: the code under
// test has set its timers.
func untilWaiters(clk *clocktesting.FakeClock, n int) {
	for clk.Waiters() < n {
		runtime.Gosched()
	}
}

type termination struct {
	pod         string
	grace       int64
	reason, msg string
	done        chan struct{}
}

// On PrepareForShutdown the node is shutting down; regular pods are
// stopped first (their own shorter grace period kept), critical ones
// once the regular ones stopped, each with the kubelet's reason and
// message; then the lock is released. A group whose pods do not stop
// within its period is left behind when the period passes.
func TestShutdownStopsPodsByPriority(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := &fakeLogind{taken: make(chan struct{}, 4), signals: make(chan bool), released: make(chan struct{}, 4)}
	terms := make(chan termination, 10)
	changed := make(chan struct{}, 4)
	pods := []*v1.Pod{podAt("web", nil), podAt("quick", nil), podAt("dns", ptr.To[int32](2000001000))}
	pods[1].Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	m := New(Config{Groups: Groups(30*time.Second, 10*time.Second, nil),
		Connect:    func() (Inhibitor, error) { return l, nil },
		ActivePods: func() []*v1.Pod { return pods },
		Terminate: func(p *v1.Pod, grace int64, reason, msg string) <-chan struct{} {
			tm := termination{p.Name, grace, reason, msg, make(chan struct{})}
			terms <- tm
			return tm.done
		},
		OnShutdown: func() { changed <- struct{}{} },
		Clock:      clk, Logger: zap.NewNop()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	<-l.taken
	if m.ShuttingDown() != nil || l.locks() != 1 {
		t.Fatalf("before: shutting down %v, locks %d", m.ShuttingDown(), l.locks())
	}
	l.signals <- true
	got := map[string]termination{}
	for i := 0; i < 2; i++ {
		tm := <-terms
		got[tm.pod] = tm
	}
	if m.ShuttingDown() == nil {
		t.Fatal("not shutting down after PrepareForShutdown")
	}
	if got["web"].grace != 20 || got["quick"].grace != 3 || got["web"].reason != "Terminated" ||
		got["web"].msg != "Pod was terminated in response to imminent node shutdown." {
		t.Fatalf("regular pods stopped as %+v", got)
	}
	select {
	case tm := <-terms:
		t.Fatalf("%s stopped while regular pods still run", tm.pod)
	default:
	}
	close(got["web"].done)
	close(got["quick"].done)
	dns := <-terms
	if dns.pod != "dns" || dns.grace != 10 {
		t.Fatalf("critical group: %+v", dns)
	}
	if l.locks() != 1 {
		t.Fatal("lock released before the critical pods stopped")
	}
	// dns does not stop: the critical period passes, then the lock goes.
	// The critical group's timer is set before its pods are handed over.
	clk.Step(10 * time.Second)
	recv(t, l.released, "lock released after the last group's period")
	if l.locks() != 0 {
		t.Fatalf("%d locks held after the shutdown's end", l.locks())
	}
	// A cancelled shutdown takes the lock again.
	recv(t, changed, "state change at the shutdown")
	l.signals <- false
	<-l.taken
	recv(t, changed, "state change at the cancellation")
	if m.ShuttingDown() != nil {
		t.Fatal("still shutting down after the cancellation")
	}
}

// A cancellation missed while logind could not be reached is seen on the
// next connection (PreparingForShutdown false): the node is no longer
// shutting down, and the lock is taken again.
func TestMissedCancellation(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	first := make(chan bool)
	l := &fakeLogind{taken: make(chan struct{}, 4), signals: first, released: make(chan struct{}, 4)}
	changed := make(chan struct{}, 4)
	m := New(Config{Groups: Groups(30*time.Second, 10*time.Second, nil),
		Connect:    func() (Inhibitor, error) { return l, nil },
		ActivePods: func() []*v1.Pod { return nil },
		Terminate:  func(*v1.Pod, int64, string, string) <-chan struct{} { t.Fatal("no pod to stop"); return nil },
		OnShutdown: func() { changed <- struct{}{} },
		Clock:      clk, Logger: zap.NewNop()})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	<-l.taken
	first <- true
	recv(t, changed, "state change at the shutdown")
	recv(t, l.released, "lock released")
	if m.ShuttingDown() == nil {
		t.Fatal("not shutting down")
	}
	// The connection is lost; the cancellation is never signalled.
	l.mu.Lock()
	l.signals = make(chan bool)
	l.mu.Unlock()
	close(first)
	untilWaiters(clk, 1) // the reconnect's wait
	clk.Step(reconnectPeriod)
	<-l.taken
	recv(t, changed, "state change on the new connection")
	if m.ShuttingDown() != nil {
		t.Fatal("still shutting down after a connection that says it is not")
	}
}

// runIdle runs a manager of 30 s (10 s critical) with no pods against l
// until the test ends.
func runIdle(t *testing.T, l *fakeLogind, clk *clocktesting.FakeClock) {
	m := New(Config{Groups: Groups(30*time.Second, 10*time.Second, nil),
		Connect:    func() (Inhibitor, error) { return l, nil },
		ActivePods: func() []*v1.Pod { return nil },
		Terminate:  func(*v1.Pod, int64, string, string) <-chan struct{} { return nil },
		Clock:      clk, Logger: zap.NewNop()})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m.Run(ctx)
}

// logind's InhibitDelayMaxSec shorter than the periods is raised to
// their sum before the lock is taken, as the kubelet does.
func TestRaisesInhibitDelay(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := &fakeLogind{delay: 5 * time.Second, taken: make(chan struct{}, 4), signals: make(chan bool), released: make(chan struct{}, 4)}
	runIdle(t, l, clk)
	recv(t, l.taken, "the lock taken")
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.raised) != 1 || l.raised[0] != 30*time.Second {
		t.Fatalf("InhibitDelayMaxSec raised to %v, want once to 30s", l.raised)
	}
}

// An override logind does not take (a later drop-in wins) is waited for
// 2 s, then the lock is taken all the same: pods get what logind allows.
func TestInhibitDelayStillShort(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := &fakeLogind{delay: 5 * time.Second, unmoved: true, taken: make(chan struct{}, 4), signals: make(chan bool), released: make(chan struct{}, 4)}
	runIdle(t, l, clk)
	for i := 0; i < 20; i++ {
		untilWaiters(clk, 1)
		select {
		case <-l.taken:
			t.Fatalf("lock taken after %d of 20 re-reads", i)
		default:
		}
		clk.Step(100 * time.Millisecond)
	}
	recv(t, l.taken, "the lock taken after the override did not take")
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.raised) != 1 {
		t.Fatalf("raised %v, want once", l.raised)
	}
}
