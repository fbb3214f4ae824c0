package syncloop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/admit"
	"github.com/nodeagent/nodeagent/internal/pleg"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// call is one recorded runtime call.
type call struct {
	op   string // "sync" or "kill"
	uid  pod.UID
	spec *v1.Pod
}

// fakeRuntime records calls on a channel; gate, when set, blocks SyncPod
// until it is closed.
type fakeRuntime struct {
	calls    chan call
	mu       sync.Mutex
	gate     chan struct{}
	entered  chan struct{} // receives when SyncPod waits at the gate
	killGate chan struct{} // when set, KillPod waits for it
	// killGates, per UID, take precedence over killGate.
	killGates map[pod.UID]chan struct{}
	res       pod.SyncResult
}

func newFakeRuntime() *fakeRuntime { return &fakeRuntime{calls: make(chan call, 100)} }

func (f *fakeRuntime) SyncPod(_ context.Context, p *v1.Pod, _ *pod.RuntimeStatus) pod.SyncResult {
	f.mu.Lock()
	gate, res := f.gate, f.res
	f.mu.Unlock()
	if gate != nil {
		f.entered <- struct{}{}
		<-gate
	}
	f.calls <- call{"sync", p.UID, p}
	return res
}

func (f *fakeRuntime) KillPod(_ context.Context, p *v1.Pod, st *pod.RuntimeStatus, _ int64) error {
	f.mu.Lock()
	gate := f.killGate
	if g, ok := f.killGates[st.UID]; ok {
		gate = g
	}
	f.mu.Unlock()
	f.calls <- call{"kill", st.UID, p}
	if gate != nil {
		<-gate
	}
	return nil
}

type fakePLEG struct {
	ch   chan pleg.Event
	mu   sync.Mutex
	snap map[pod.UID]*pod.RuntimeStatus
	at   time.Time
}

func (f *fakePLEG) Watch() <-chan pleg.Event { return f.ch }
func (f *fakePLEG) Healthy() error           { return nil }
func (f *fakePLEG) GetNewerThan(_ context.Context, uid pod.UID, _ time.Time) (*pod.RuntimeStatus, error) {
	return &pod.RuntimeStatus{UID: uid}, nil
}
func (f *fakePLEG) Snapshot() (map[pod.UID]*pod.RuntimeStatus, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap, f.at
}

type fakeStatus struct {
	mu      sync.Mutex
	refused map[pod.UID]string
	removed map[pod.UID]bool
}

func (f *fakeStatus) Synced(*v1.Pod, *pod.RuntimeStatus, pod.SyncResult) {}
func (f *fakeStatus) Refused(p *v1.Pod, reason, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused[p.UID] = reason
}
func (f *fakeStatus) Removed(p *v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed[p.UID] = true
}

type rig struct {
	loop    *Loop
	rt      *fakeRuntime
	pleg    *fakePLEG
	status  *fakeStatus
	clock   *testclock.FakeClock
	updates chan pod.Update
	syncC   chan time.Time
	hkC     chan time.Time
	ctx     context.Context
	ready   bool
}

func newRig(t *testing.T, chain admit.Chain) *rig {
	t.Helper()
	r := &rig{
		rt:      newFakeRuntime(),
		pleg:    &fakePLEG{ch: make(chan pleg.Event, 10)},
		status:  &fakeStatus{refused: map[pod.UID]string{}, removed: map[pod.UID]bool{}},
		clock:   testclock.NewFakeClock(time.Unix(1_000_000, 0)),
		updates: make(chan pod.Update, 10),
		syncC:   make(chan time.Time, 1),
		hkC:     make(chan time.Time, 1),
		ready:   true,
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx = ctx
	l, err := New(Config{
		Updates: r.updates, Runtime: r.rt, PLEG: r.pleg, Status: r.status, Admit: chain,
		SourcesReady: func() bool { return r.ready },
		Clock:        r.clock, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	r.loop = l
	t.Cleanup(func() { cancel(); l.wg.Wait() })
	return r
}

// step feeds one input and runs one iteration.
func (r *rig) step(t *testing.T, feed func()) {
	t.Helper()
	feed()
	if !r.loop.Iterate(r.ctx, r.syncC, r.hkC) {
		t.Fatal("iteration stopped")
	}
}

func (r *rig) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-r.rt.calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no runtime call within 5s")
	}
	return call{}
}

func (r *rig) none(t *testing.T) {
	t.Helper()
	select {
	case c := <-r.rt.calls:
		t.Fatalf("unexpected runtime call %s %s", c.op, c.uid)
	case <-time.After(50 * time.Millisecond):
	}
}

func testPod(uid, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}
}

func TestAddSyncsAndRemoveKills(t *testing.T) {
	r := newRig(t, nil)
	p := testPod("u1", "a")
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Source: "file", Pods: []*v1.Pod{p}} })
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1", c)
	}
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpRemove, Source: "file", Pods: []*v1.Pod{p}} })
	if c := r.next(t); c.op != "kill" || c.uid != "u1" || c.spec == nil {
		t.Fatalf("got %+v, want kill u1 with its spec", c)
	}
	waitFor(t, func() bool { return r.loop.Workers() == 0 })
	r.status.mu.Lock()
	defer r.status.mu.Unlock()
	if !r.status.removed["u1"] {
		t.Fatal("status not removed")
	}
}

func TestAdmissionRefusal(t *testing.T) {
	r := newRig(t, admit.Chain{admit.MaxPods(1)})
	r.step(t, func() {
		r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{testPod("u1", "a"), testPod("u2", "b")}}
	})
	if c := r.next(t); c.uid != "u1" {
		t.Fatalf("first pod not synced: %+v", c)
	}
	r.none(t)
	r.status.mu.Lock()
	reason := r.status.refused["u2"]
	r.status.mu.Unlock()
	if reason != "OutOfpods" {
		t.Fatalf("refusal reason = %q, want OutOfpods", reason)
	}
}

func TestPLEGEventWakesWorker(t *testing.T) {
	r := newRig(t, nil)
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{testPod("u1", "a")}} })
	r.next(t)
	r.step(t, func() { r.pleg.ch <- pleg.Event{UID: "u1", Type: pleg.ContainerDied, Data: "c1"} })
	if c := r.next(t); c.op != "sync" {
		t.Fatalf("got %+v", c)
	}
	// An event for an unknown pod starts nothing.
	r.step(t, func() { r.pleg.ch <- pleg.Event{UID: "zz", Type: pleg.ContainerDied} })
	r.none(t)
}

func TestRetryAfterIsHonouredBySyncTick(t *testing.T) {
	r := newRig(t, nil)
	r.rt.res = pod.SyncResult{RetryAfter: 10 * time.Second}
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{testPod("u1", "a")}} })
	r.next(t)
	waitFor(t, func() bool { r.loop.queue.mu.Lock(); defer r.loop.queue.mu.Unlock(); return len(r.loop.queue.due) == 1 })
	r.clock.Step(9 * time.Second)
	r.step(t, func() { r.syncC <- r.clock.Now() })
	r.none(t)
	r.clock.Step(time.Second)
	r.step(t, func() { r.syncC <- r.clock.Now() })
	if c := r.next(t); c.op != "sync" {
		t.Fatalf("got %+v", c)
	}
}

func TestUpdatesCoalesce(t *testing.T) {
	r := newRig(t, nil)
	gate := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.gate = gate
	r.rt.entered = make(chan struct{}, 10)
	r.rt.mu.Unlock()
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{testPod("u1", "a")}} })
	<-r.rt.entered // the first sync is in progress
	var last *v1.Pod
	for i := 0; i < 5; i++ {
		p := testPod("u1", "a")
		p.Labels = map[string]string{"gen": string(rune('0' + i))}
		last = p
		r.step(t, func() { r.updates <- pod.Update{Op: pod.OpUpdate, Pods: []*v1.Pod{p}} })
	}
	close(gate)
	first := r.next(t)
	second := r.next(t)
	if second.spec != last {
		t.Fatalf("second sync saw %v, want the newest spec %v (first saw %v)", second.spec.Labels, last.Labels, first.spec.Labels)
	}
	r.none(t) // five updates, at most two syncs
}

func TestOrphansKilledOnlyAfterSourcesReady(t *testing.T) {
	r := newRig(t, nil)
	r.pleg.snap = map[pod.UID]*pod.RuntimeStatus{"orphan": {UID: "orphan", Name: "x", Namespace: "default"}}
	r.pleg.at = r.clock.Now()
	r.ready = false
	r.step(t, func() { r.hkC <- r.clock.Now() })
	r.none(t)
	r.ready = true
	r.step(t, func() { r.hkC <- r.clock.Now() })
	if c := r.next(t); c.op != "kill" || c.uid != "orphan" || c.spec != nil {
		t.Fatalf("got %+v, want kill of orphan without spec", c)
	}
	waitFor(t, func() bool { return r.loop.Workers() == 0 })
	// The same stale snapshot does not trigger a second kill.
	r.step(t, func() { r.hkC <- r.clock.Now() })
	r.none(t)
}

func TestUnhealthyBackoffDoublesToFiveSeconds(t *testing.T) {
	var b unhealthyBackoff
	var got []time.Duration
	for i := 0; i < 8; i++ {
		got = append(got, b.next())
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5000 * ms, 5000 * ms}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits = %v, want %v", got, want)
		}
	}
	b.reset()
	if w := b.next(); w != 100*ms {
		t.Fatalf("after reset wait = %v", w)
	}
}

func TestUnhealthyRuntimeHoldsTheLoop(t *testing.T) {
	r := newRig(t, nil)
	var mu sync.Mutex
	healthErr := errors.New("runtime down")
	r.loop.cfg.RuntimeHealth = func() error { mu.Lock(); defer mu.Unlock(); return healthErr }
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(r.ctx)
	go func() { r.loop.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{testPod("u1", "a")}}
	for i := 0; i < 5; i++ {
		r.clock.Step(time.Second)
		r.none(t) // the update waits while the runtime is down
	}
	mu.Lock()
	healthErr = nil
	mu.Unlock()
	for i := 0; ; i++ {
		r.clock.Step(5 * time.Second)
		select {
		case c := <-r.rt.calls:
			if c.op != "sync" {
				t.Fatalf("got %+v after recovery", c)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if i > 250 {
			t.Fatal("no sync after the runtime recovered")
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// An edited static pod (same name, new UID) starts only once the old one
// is gone, as with the kubelet: two etcds must never share a data dir.
func TestSameNamePodWaitsForItsPredecessor(t *testing.T) {
	r := newRig(t, nil)
	old := testPod("old", "etcd")
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{old}} })
	r.next(t)
	gate := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.killGate = gate
	r.rt.mu.Unlock()
	edited := testPod("new", "etcd")
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpRemove, Pods: []*v1.Pod{old}} })
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{edited}} })
	if c := r.next(t); c.op != "kill" || c.uid != "old" {
		t.Fatalf("got %+v, want the old pod killed first", c)
	}
	r.none(t) // the new pod waits while the old one terminates
	close(gate)
	if c := r.next(t); c.op != "sync" || c.uid != "new" {
		t.Fatalf("got %+v, want the new pod synced after the kill", c)
	}
}

// The old version of a pod edited while the agent was down is killed as
// soon as the new one is added, and the new one starts only after.
func TestSameNameOrphanKilledBeforeTheNewPod(t *testing.T) {
	r := newRig(t, nil)
	r.pleg.snap = map[pod.UID]*pod.RuntimeStatus{"old": {UID: "old", Name: "etcd", Namespace: "default"}}
	r.pleg.at = r.clock.Now()
	gate := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.killGates = map[pod.UID]chan struct{}{"old": gate}
	r.rt.mu.Unlock()
	r.ready = false // sources not all seen: no housekeeping kill
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{testPod("new", "etcd")}} })
	if c := r.next(t); c.op != "kill" || c.uid != "old" {
		t.Fatalf("got %+v, want the old pod killed", c)
	}
	r.none(t) // the new pod waits for the kill
	close(gate)
	if c := r.next(t); c.op != "sync" || c.uid != "new" {
		t.Fatalf("got %+v, want the new pod synced next", c)
	}
}

// Two old pods of one name terminating at once (an edit of an edit): the
// newest waits for both, not just the first to finish.
func TestHeldPodWaitsForEveryPredecessor(t *testing.T) {
	r := newRig(t, nil)
	b := testPod("b", "etcd")
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{b}} })
	r.next(t)
	// "a", an older version, is still in the runtime snapshot.
	r.pleg.mu.Lock()
	r.pleg.snap = map[pod.UID]*pod.RuntimeStatus{"a": {UID: "a", Name: "etcd", Namespace: "default"}, "b": {UID: "b", Name: "etcd", Namespace: "default"}}
	r.pleg.at = r.clock.Now()
	r.pleg.mu.Unlock()
	gateB := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.killGates = map[pod.UID]chan struct{}{"b": gateB}
	r.rt.mu.Unlock()
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpRemove, Pods: []*v1.Pod{b}} })
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{testPod("c", "etcd")}} })
	kills := map[pod.UID]bool{}
	for len(kills) < 2 {
		c := r.next(t)
		if c.op != "kill" {
			t.Fatalf("got %+v while a and b terminate", c)
		}
		kills[c.uid] = true
	}
	r.none(t) // a is gone, b is not: c still waits
	close(gateB)
	if c := r.next(t); c.op != "sync" || c.uid != "c" {
		t.Fatalf("got %+v, want c synced after both kills", c)
	}
}
