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
	"github.com/nodeagent/nodeagent/internal/pleg/plegtest"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// These tests never sleep: they drive the loop one Iterate at a time, step
// a fake clock only when the code waits on it, and learn what workers do
// from the fakes (runtime calls, status reports, PLEG requests). A check
// that something did not happen is made where nothing more can happen: the
// iteration that could have done it has returned, and every worker that
// could act is blocked at a known point (a gated runtime call, a wait for
// a newer PLEG view) or gone. within only turns a hang into a failure.

// within bounds every wait for something that must happen.
const within = 10 * time.Second

var _ PLEG = (*plegtest.Fake)(nil)

// call is one recorded runtime call.
type call struct {
	op    string // "sync" or "kill"
	uid   pod.UID
	spec  *v1.Pod
	st    *pod.RuntimeStatus // the status the worker acted on
	grace int64              // kill's grace period (< 0: the pod's own)
}

// fakeRuntime records calls on a channel. gate, when set, blocks SyncPod
// until it is closed; took is how long each call lasts on the fake clock.
type fakeRuntime struct {
	clock    *armClock
	calls    chan call
	mu       sync.Mutex
	gate     chan struct{}
	entered  chan struct{} // receives when SyncPod waits at the gate
	killGate chan struct{} // when set, KillPod waits for it
	// killGates, per UID, take precedence over killGate.
	killGates map[pod.UID]chan struct{}
	res       pod.SyncResult
	took      time.Duration
	released  []pod.UID // ReleasePod's pods, in order
}

func (f *fakeRuntime) SyncPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus) pod.SyncResult {
	f.mu.Lock()
	gate, res, took := f.gate, f.res, f.took
	f.mu.Unlock()
	if gate != nil {
		f.entered <- struct{}{}
		select {
		case <-gate:
		case <-ctx.Done():
			return pod.SyncResult{Err: ctx.Err()}
		}
	}
	f.clock.Step(took)
	f.calls <- call{"sync", p.UID, p, st, 0}
	return res
}

func (f *fakeRuntime) KillPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, grace int64) error {
	return f.end(ctx, "kill", p, st, grace)
}

func (f *fakeRuntime) ReleasePod(_ context.Context, _ *v1.Pod, st *pod.RuntimeStatus) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, st.UID)
	return nil
}

func (f *fakeRuntime) StopPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, grace int64) error {
	return f.end(ctx, "stop", p, st, grace)
}

// end is KillPod and StopPod: recorded as op, gated by killGate(s).
func (f *fakeRuntime) end(ctx context.Context, op string, p *v1.Pod, st *pod.RuntimeStatus, grace int64) error {
	f.mu.Lock()
	gate, took := f.killGate, f.took
	if g, ok := f.killGates[st.UID]; ok {
		gate = g
	}
	f.mu.Unlock()
	f.clock.Step(took)
	f.calls <- call{op, st.UID, p, st, grace}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// fakeStatus records refusals and reports every removal on removed,
// every admission on admitted, every termination on terminating and every
// health report on health.
type fakeStatus struct {
	mu          sync.Mutex
	refused     map[pod.UID]string
	removed     chan pod.UID
	admitted    chan pod.UID
	terminating chan pod.UID
	health      chan error
	removedPods []*v1.Pod // the pods Removed was given, in order
	terminated  []pod.UID // the pods Terminated was given, in order
	blocked     chan string
	phases      map[pod.UID]v1.PodPhase // what Synced reports
	finished    chan finishedReport
}

func (f *fakeStatus) Synced(p *v1.Pod, _ *pod.RuntimeStatus, _ pod.SyncResult) v1.PodPhase {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.phases[p.UID]
}
func (f *fakeStatus) Finished(p *v1.Pod, st *pod.RuntimeStatus, reason, _ string) {
	f.finished <- finishedReport{p.UID, reason, st.Running()}
}

// setPhase makes Synced report phase for uid from now on.
func (f *fakeStatus) setPhase(uid pod.UID, phase v1.PodPhase) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.phases[uid] = phase
}

// finishedReport is one Finished call.
type finishedReport struct {
	uid     pod.UID
	reason  string
	running bool // the view it was given still ran something
}

func (f *fakeStatus) Terminated(p *v1.Pod, _ *pod.RuntimeStatus) {
	f.mu.Lock()
	f.terminated = append(f.terminated, p.UID)
	f.mu.Unlock()
}
func (f *fakeStatus) Admitted(p *v1.Pod, _ *pod.RuntimeStatus) { f.admitted <- p.UID }
func (f *fakeStatus) Terminating(p *v1.Pod, _ int64)           { f.terminating <- p.UID }
func (f *fakeStatus) RuntimeHealth(err error)                  { f.health <- err }
func (f *fakeStatus) Refused(p *v1.Pod, reason, _ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused[p.UID] = reason
}
func (f *fakeStatus) Evicted(p *v1.Pod, reason, message string, _ *pod.RuntimeStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refused[p.UID] = reason + ": " + message
}
func (f *fakeStatus) Blocked(p *v1.Pod, _ *pod.RuntimeStatus, reason, _ string) {
	f.blocked <- string(p.UID) + " " + reason
}
func (f *fakeStatus) Removed(p *v1.Pod) {
	f.mu.Lock()
	f.removedPods = append(f.removedPods, p)
	f.mu.Unlock()
	f.removed <- p.UID
}

// armClock is a FakeClock that reports each After once it is armed, so a
// test steps time exactly when the loop waits for it.
type armClock struct {
	*testclock.FakeClock
	armed chan time.Duration
}

func (c *armClock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	c.armed <- d
	return ch
}

type rig struct {
	loop    *Loop
	rt      *fakeRuntime
	pleg    *plegtest.Fake
	status  *fakeStatus
	clock   *armClock
	updates chan pod.Update
	syncC   chan time.Time
	hkC     chan time.Time
	// synced receives each pod sync's operation type, once its next sync
	// is queued (OnPodSync).
	synced chan string
	ctx    context.Context
	cancel context.CancelFunc
	ready  bool

	healthMu   sync.Mutex
	runtimeErr error
}

func newRig(t *testing.T, chain admit.Chain) *rig {
	t.Helper()
	clk := &armClock{FakeClock: testclock.NewFakeClock(time.Unix(1_000_000, 0)), armed: make(chan time.Duration, 100)}
	r := &rig{
		rt:   &fakeRuntime{clock: clk, calls: make(chan call, 100)},
		pleg: plegtest.New(),
		status: &fakeStatus{refused: map[pod.UID]string{}, removed: make(chan pod.UID, 100),
			admitted: make(chan pod.UID, 100), terminating: make(chan pod.UID, 100), health: make(chan error, 100),
			blocked: make(chan string, 100), phases: map[pod.UID]v1.PodPhase{}, finished: make(chan finishedReport, 100)},
		clock:   clk,
		updates: make(chan pod.Update, 10),
		syncC:   make(chan time.Time, 1),
		hkC:     make(chan time.Time, 1),
		synced:  make(chan string, 100),
		ready:   true,
	}
	// The PLEG has relisted once before the loop starts.
	r.pleg.Publish(clk.Now())
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx, r.cancel = ctx, cancel
	l, err := New(Config{
		Updates: r.updates, Runtime: r.rt, PLEG: r.pleg, Status: r.status, Admit: chain,
		SourcesReady:  func() bool { return r.ready },
		RuntimeHealth: func() error { r.healthMu.Lock(); defer r.healthMu.Unlock(); return r.runtimeErr },
		OnPodSync:     func(op string, _ time.Duration) { r.synced <- op },
		Clock:         clk, Logger: zaptest.NewLogger(t),
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

// relist is a relist that starts after everything so far: time passes
// and the PLEG cache becomes current.
func (r *rig) relist() {
	r.clock.Step(time.Millisecond)
	r.pleg.Publish(r.clock.Now())
}

// next returns the next runtime call. A worker that waits for a view
// newer than its last action meanwhile gets one (relist): only the tests
// about that wait (TestWorkerNeverActsOnAStaleView, TestUpdatesCoalesce)
// answer it themselves.
func (r *rig) next(t *testing.T) call {
	t.Helper()
	deadline := time.After(within)
	for {
		// A call already queued comes first: a worker records its call
		// before it waits for a view newer than it, and a relist answered
		// first would hand it a view without the call's effect (select
		// picks among ready cases at random).
		select {
		case c := <-r.rt.calls:
			return c
		default:
		}
		select {
		case c := <-r.rt.calls:
			return c
		case <-r.pleg.Waiting():
			r.relist()
		case <-deadline:
			t.Fatalf("no runtime call within %v", within)
		}
	}
}

// waiting returns the next request of a worker that waits for a newer
// view. A runtime call instead fails the test: a worker acted on the view
// the cache had.
func (r *rig) waiting(t *testing.T) plegtest.Request {
	t.Helper()
	select {
	case req := <-r.pleg.Waiting():
		return req
	case c := <-r.rt.calls:
		t.Fatalf("runtime call %s %s on a view older than the worker's last action", c.op, c.uid)
	case <-time.After(within):
		t.Fatalf("no worker waited for a newer view within %v", within)
	}
	return plegtest.Request{}
}

// worker returns uid's live worker or nil.
func (r *rig) worker(uid pod.UID) *worker {
	r.loop.mu.Lock()
	defer r.loop.mu.Unlock()
	return r.loop.workers[uid]
}

// started reports whether a worker was ever started for uid: it is live,
// or it finished a kill (remembered for a minute). A look at the live
// workers alone could miss one that already killed its pod and exited.
func (r *rig) started(uid pod.UID) bool {
	r.loop.mu.Lock()
	defer r.loop.mu.Unlock()
	_, live := r.loop.workers[uid]
	_, finished := r.loop.finished[uid]
	return live || finished
}

// waitWorkersExit waits until every worker started so far has exited. The
// test goroutine runs every iteration, so no worker can be started by the
// loop meanwhile (WaitGroup: no Add races this Wait); only use it when no
// held pod can start either.
func (r *rig) waitWorkersExit(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() { r.loop.wg.Wait(); close(done) }()
	recv(t, done, "workers exiting")
}

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

func testPod(uid, name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}}
}

func add(r *rig, pods ...*v1.Pod) func() {
	return func() { r.updates <- pod.Update{Op: pod.OpAdd, Source: "file", Pods: pods} }
}

func remove(r *rig, pods ...*v1.Pod) func() {
	return func() { r.updates <- pod.Update{Op: pod.OpRemove, Source: "file", Pods: pods} }
}

func TestAddSyncsAndRemoveKills(t *testing.T) {
	r := newRig(t, nil)
	p := testPod("u1", "a")
	r.step(t, add(r, p))
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1", c)
	}
	r.step(t, remove(r, p))
	if c := r.next(t); c.op != "kill" || c.uid != "u1" || c.spec == nil {
		t.Fatalf("got %+v, want kill u1 with its spec", c)
	}
	if uid := recv(t, r.status.removed, "status removal"); uid != "u1" {
		t.Fatalf("status removed for %s, want u1", uid)
	}
	// The worker leaves the workers map before it reports the removal.
	if n := r.loop.Workers(); n != 0 {
		t.Fatalf("%d workers after the kill, want 0", n)
	}
}

func TestAdmissionRefusal(t *testing.T) {
	r := newRig(t, admit.Chain{admit.MaxPods(1)})
	r.step(t, add(r, testPod("u1", "a"), testPod("u2", "b")))
	// Admission happens within the iteration: once it returned, u2 is
	// refused and has no worker, so nothing can ever sync it.
	r.status.mu.Lock()
	reason := r.status.refused["u2"]
	r.status.mu.Unlock()
	if reason != "OutOfpods" {
		t.Fatalf("refusal reason = %q, want OutOfpods", reason)
	}
	if r.started("u2") {
		t.Fatal("a worker was started for the refused pod")
	}
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want the admitted pod synced", c)
	}
}

func TestPLEGEventWakesWorker(t *testing.T) {
	r := newRig(t, nil)
	r.step(t, add(r, testPod("u1", "a")))
	r.next(t)
	r.step(t, func() { r.pleg.Send(pleg.Event{UID: "u1", Type: pleg.ContainerDied, Data: "c1"}) })
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1", c)
	}
	// An event for an unknown pod starts nothing: once the iteration
	// returned there is still only u1's worker.
	r.step(t, func() { r.pleg.Send(pleg.Event{UID: "zz", Type: pleg.ContainerDied}) })
	if r.started("zz") {
		t.Fatal("an event for an unknown pod started a worker")
	}
}

// Each pod sync is named as the kubelet's pod worker metric names it: the
// worker's first sync creates, the first after a new spec updates, the
// others (PLEG events, resyncs) sync.
func TestPodSyncOperationTypes(t *testing.T) {
	r := newRig(t, nil)
	r.step(t, add(r, testPod("u1", "a")))
	r.next(t)
	if op := recv(t, r.synced, "first sync"); op != "create" {
		t.Fatalf("first sync is %q, want create", op)
	}
	r.step(t, func() { r.pleg.Send(pleg.Event{UID: "u1", Type: pleg.ContainerDied, Data: "c1"}) })
	r.next(t)
	if op := recv(t, r.synced, "sync on a PLEG event"); op != "sync" {
		t.Fatalf("sync on a PLEG event is %q, want sync", op)
	}
	p := testPod("u1", "a")
	p.Labels = map[string]string{"new": "spec"}
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpUpdate, Pods: []*v1.Pod{p}} })
	r.next(t)
	if op := recv(t, r.synced, "sync of a new spec"); op != "update" {
		t.Fatalf("sync of a new spec is %q, want update", op)
	}
	r.step(t, func() { r.pleg.Send(pleg.Event{UID: "u1", Type: pleg.ContainerDied, Data: "c1"}) })
	r.next(t)
	if op := recv(t, r.synced, "the next sync"); op != "sync" {
		t.Fatalf("the sync after the update is %q, want sync", op)
	}
}

func TestRetryAfterIsHonouredBySyncTick(t *testing.T) {
	r := newRig(t, nil)
	// Shorter than ResyncPeriod (10s): only RetryAfter explains a sync 3s
	// later.
	r.rt.res = pod.SyncResult{RetryAfter: 3 * time.Second}
	r.step(t, add(r, testPod("u1", "a")))
	r.next(t)
	recv(t, r.synced, "the next sync queued")
	queued := func() bool {
		r.loop.queue.mu.Lock()
		defer r.loop.queue.mu.Unlock()
		_, ok := r.loop.queue.due["u1"]
		return ok
	}
	r.clock.Step(2 * time.Second)
	r.step(t, func() { r.syncC <- r.clock.Now() })
	// A sync tick wakes only what the queue gives out: u1 is still queued,
	// so its worker was not woken.
	if !queued() {
		t.Fatal("u1 was due 2s after a sync that asked to be retried after 3s")
	}
	r.clock.Step(time.Second)
	r.step(t, func() { r.syncC <- r.clock.Now() })
	if queued() {
		t.Fatal("u1 not due 3s after a sync that asked to be retried after 3s")
	}
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1", c)
	}
}

func TestUpdatesCoalesce(t *testing.T) {
	r := newRig(t, nil)
	gate := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.gate = gate
	r.rt.entered = make(chan struct{}, 10)
	r.rt.mu.Unlock()
	r.step(t, add(r, testPod("u1", "a")))
	recv(t, r.rt.entered, "first sync started") // and waits at the gate
	var last *v1.Pod
	for i := 0; i < 5; i++ {
		p := testPod("u1", "a")
		p.Labels = map[string]string{"gen": string(rune('0' + i))}
		last = p
		r.step(t, func() { r.updates <- pod.Update{Op: pod.OpUpdate, Pods: []*v1.Pod{p}} })
	}
	close(gate)
	first := recv(t, r.rt.calls, "first sync")
	// The second sync waits for a view newer than the first. The worker is
	// blocked there and the loop is idle: no wake-up left means no third
	// sync can follow.
	r.waiting(t)
	if n := len(r.worker("u1").wake); n != 0 {
		t.Fatalf("%d more syncs pending after five updates during one sync, want 0", n)
	}
	r.relist()
	second := recv(t, r.rt.calls, "second sync")
	if second.spec != last {
		t.Fatalf("second sync saw %v, want the newest spec %v (first saw %v)", second.spec.Labels, last.Labels, first.spec.Labels)
	}
}

func TestOrphansKilledOnlyAfterSourcesReady(t *testing.T) {
	r := newRig(t, nil)
	r.pleg.SetSnapshot(map[pod.UID]*pod.RuntimeStatus{"orphan": {UID: "orphan", Name: "x", Namespace: "default"}}, r.clock.Now())
	r.ready = false
	r.step(t, func() { r.hkC <- r.clock.Now() })
	// Only housekeeping starts an orphan's worker, and it has returned.
	if r.started("orphan") {
		t.Fatal("the orphan was acted on before every source was seen")
	}
	r.ready = true
	r.step(t, func() { r.hkC <- r.clock.Now() })
	if c := r.next(t); c.op != "kill" || c.uid != "orphan" || c.spec != nil {
		t.Fatalf("got %+v, want kill of orphan without spec", c)
	}
	r.waitWorkersExit(t)
	// The same stale snapshot does not trigger a second kill. A worker
	// started for the orphan now could not have finished: it waits for a
	// view newer than the kill, and the PLEG has not relisted since.
	r.step(t, func() { r.hkC <- r.clock.Now() })
	if n := r.loop.Workers(); n != 0 {
		t.Fatalf("%d workers after housekeeping saw the killed orphan in an older snapshot, want 0", n)
	}
}

func TestUnhealthyBackoffDoublesToTwoSeconds(t *testing.T) {
	var b unhealthyBackoff
	var got []time.Duration
	for i := 0; i < 8; i++ {
		got = append(got, b.next())
	}
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms, 2000 * ms}
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
	tests := []struct {
		name      string
		setHealth func(r *rig, err error)
	}{
		{
			name: "runtime",
			setHealth: func(r *rig, err error) {
				r.healthMu.Lock()
				defer r.healthMu.Unlock()
				r.runtimeErr = err
			},
		},
		{
			name:      "pleg",
			setHealth: func(r *rig, err error) { r.pleg.SetHealthy(err) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			tt.setHealth(r, errors.New("down"))
			r.updates <- pod.Update{Op: pod.OpAdd, Pods: []*v1.Pod{testPod("u1", "a")}}
			done := make(chan struct{})
			ctx, cancel := context.WithCancel(r.ctx)
			go func() { r.loop.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			var want unhealthyBackoff
			var wait time.Duration
			for i := 0; i < 6; i++ {
				// Each round the loop checks health and arms its backoff
				// wait; the update is still queued: the loop took nothing.
				wait = r.clock.waitArmed(t)
				if w := want.next(); wait != w {
					t.Fatalf("backoff wait %d = %v, want %v", i, wait, w)
				}
				if len(r.updates) != 1 || r.loop.Workers() != 0 {
					t.Fatalf("the loop handled the update while unhealthy (round %d)", i)
				}
				if i < 5 {
					r.clock.Step(wait)
				}
			}
			tt.setHealth(r, nil)
			r.clock.Step(wait)
			if c := r.next(t); c.op != "sync" || c.uid != "u1" {
				t.Fatalf("got %+v after recovery, want sync u1", c)
			}
		})
	}
}

// The status sink hears of a pod on admission (before its first sync) and
// on removal (before its kill); of the runtime going down once, however
// long it stays down, and of its return, upon which every pod is synced
// at once (not at its next resync).
func TestStatusReportsAndResyncAfterOutage(t *testing.T) {
	r := newRig(t, nil)
	p := testPod("u1", "a")
	r.step(t, add(r, p))
	if uid := recv(t, r.status.admitted, "admission report"); uid != "u1" {
		t.Fatalf("admitted %s, want u1", uid)
	}
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1", c)
	}
	recv(t, r.synced, "first sync done")

	r.healthMu.Lock()
	r.runtimeErr = errors.New("down")
	r.healthMu.Unlock()
	done := make(chan struct{})
	// Run on the rig's context: the worker started above lives on it too,
	// and Run waits for every worker when it ends.
	go func() { r.loop.Run(r.ctx); close(done) }()
	defer func() { r.cancel(); <-done }()
	w1 := r.clock.waitArmed(t)
	if err := recv(t, r.status.health, "health report"); err == nil {
		t.Fatal("reported healthy while down")
	}
	r.clock.Step(w1)
	w2 := r.clock.waitArmed(t) // still down: checked again, not reported again
	select {
	case err := <-r.status.health:
		t.Fatalf("a second report while still down: %v", err)
	default:
	}
	r.healthMu.Lock()
	r.runtimeErr = nil
	r.healthMu.Unlock()
	// 300ms in all: no sync tick (1s) and no resync (10s) is due.
	r.clock.Step(w2)
	if err := recv(t, r.status.health, "recovery report"); err != nil {
		t.Fatalf("recovery reported as %v", err)
	}
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v after the runtime's return, want an immediate sync of u1", c)
	}
}

func TestRemovalReportsTerminating(t *testing.T) {
	r := newRig(t, nil)
	p := testPod("u1", "a")
	r.step(t, add(r, p))
	r.next(t)
	r.step(t, remove(r, p))
	if uid := recv(t, r.status.terminating, "terminating report"); uid != "u1" {
		t.Fatalf("terminating %s, want u1", uid)
	}
	if c := r.next(t); c.op != "kill" {
		t.Fatalf("got %+v, want kill", c)
	}
}

// waitArmed returns the duration of the next After armed.
func (c *armClock) waitArmed(t *testing.T) time.Duration {
	t.Helper()
	return recv(t, c.armed, "backoff wait armed")
}

// An edited static pod (same name, new UID) starts only once the old one
// is gone, as with the kubelet: two etcds must never share a data dir.
func TestSameNamePodWaitsForItsPredecessor(t *testing.T) {
	r := newRig(t, nil)
	old := testPod("old", "etcd")
	r.step(t, add(r, old))
	r.next(t)
	gate := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.killGate = gate
	r.rt.mu.Unlock()
	r.step(t, remove(r, old))
	r.step(t, add(r, testPod("new", "etcd")))
	if c := r.next(t); c.op != "kill" || c.uid != "old" {
		t.Fatalf("got %+v, want the old pod killed first", c)
	}
	// The old pod's kill is blocked at the gate and the loop is idle: only
	// the end of that kill could start the new pod, so it has no worker.
	if r.started("new") {
		t.Fatal("the new pod started while the old one terminates")
	}
	close(gate)
	if c := r.next(t); c.op != "sync" || c.uid != "new" {
		t.Fatalf("got %+v, want the new pod synced after the kill", c)
	}
}

// The old version of a pod edited while the agent was down is killed as
// soon as the new one is added, and the new one starts only after.
func TestSameNameOrphanKilledBeforeTheNewPod(t *testing.T) {
	r := newRig(t, nil)
	r.pleg.SetSnapshot(map[pod.UID]*pod.RuntimeStatus{"old": {UID: "old", Name: "etcd", Namespace: "default"}}, r.clock.Now())
	gate := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.killGates = map[pod.UID]chan struct{}{"old": gate}
	r.rt.mu.Unlock()
	r.ready = false // sources not all seen: no housekeeping kill
	r.step(t, add(r, testPod("new", "etcd")))
	if c := r.next(t); c.op != "kill" || c.uid != "old" {
		t.Fatalf("got %+v, want the old pod killed", c)
	}
	if r.started("new") {
		t.Fatal("the new pod started while the old one terminates")
	}
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
	r.step(t, add(r, b))
	r.next(t)
	// "a", an older version, is still in the runtime snapshot.
	r.pleg.SetSnapshot(map[pod.UID]*pod.RuntimeStatus{"a": {UID: "a", Name: "etcd", Namespace: "default"}, "b": {UID: "b", Name: "etcd", Namespace: "default"}}, r.clock.Now())
	gateA, gateB := make(chan struct{}), make(chan struct{})
	r.rt.mu.Lock()
	r.rt.killGates = map[pod.UID]chan struct{}{"a": gateA, "b": gateB}
	r.rt.mu.Unlock()
	r.step(t, remove(r, b))
	r.step(t, add(r, testPod("c", "etcd")))
	kills := map[pod.UID]bool{}
	for len(kills) < 2 {
		c := r.next(t)
		if c.op != "kill" {
			t.Fatalf("got %+v while a and b terminate", c)
		}
		kills[c.uid] = true
	}
	// b's kill ends first; its worker reports the removal once it is done
	// (a, an orphan without a spec, reports none). a is still at its
	// gate: c must still wait.
	close(gateB)
	if uid := recv(t, r.status.removed, "b removed"); uid != "b" {
		t.Fatalf("removed %s, want b", uid)
	}
	if r.started("c") {
		t.Fatal("c started while a still terminates")
	}
	close(gateA)
	if c := r.next(t); c.op != "sync" || c.uid != "c" {
		t.Fatalf("got %+v, want c synced after both kills", c)
	}
}

// A worker never acts on a view of its pod older than its own last action
// (GetNewerThan's min): woken after a sync, or started again for a pod
// killed a moment ago, it waits for a status the PLEG read after that
// action ended, however often the cache changes meanwhile.
func TestWorkerNeverActsOnAStaleView(t *testing.T) {
	tests := []struct {
		name string
		// lastAction makes u1's worker act once, then wakes it (or starts
		// a new worker for u1), and returns when that action ended.
		lastAction func(t *testing.T, r *rig) time.Time
	}{
		{
			name: "woken after its own sync",
			lastAction: func(t *testing.T, r *rig) time.Time {
				r.step(t, add(r, testPod("u1", "a")))
				if c := r.next(t); c.op != "sync" {
					t.Fatalf("got %+v, want sync", c)
				}
				end := r.clock.Now()
				r.step(t, func() { r.pleg.Send(pleg.Event{UID: "u1", Type: pleg.ContainerDied, Data: "c1"}) })
				return end
			},
		},
		{
			name: "started again after its kill",
			lastAction: func(t *testing.T, r *rig) time.Time {
				p := testPod("u1", "a")
				r.step(t, add(r, p))
				r.next(t)
				r.step(t, remove(r, p))
				if c := r.next(t); c.op != "kill" {
					t.Fatalf("got %+v, want kill", c)
				}
				recv(t, r.status.removed, "u1 removed")
				end := r.clock.Now()
				r.step(t, add(r, p))
				return end
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			// Every runtime call lasts 5s: its start and its end differ.
			r.rt.took = 5 * time.Second
			end := tt.lastAction(t, r)
			if req := r.waiting(t); req.UID != "u1" || !req.Min.Equal(end) {
				t.Fatalf("worker asked for %+v, want a view of u1 newer than %v, the end of its last action", req, end)
			}
			// A relist that started during the action does not do.
			r.pleg.Publish(end.Add(-time.Second), &pod.RuntimeStatus{UID: "u1", Name: "during"})
			if req := r.waiting(t); !req.Min.Equal(end) {
				t.Fatalf("worker asked for %+v, want a view newer than %v", req, end)
			}
			// One that started after it does, and it is what the worker
			// acts on.
			r.clock.Step(time.Second)
			after := &pod.RuntimeStatus{UID: "u1", Name: "after"}
			r.pleg.Publish(r.clock.Now(), after)
			if c := r.next(t); c.op != "sync" || c.uid != "u1" || c.st != after {
				t.Fatalf("got %s %s on %+v, want sync u1 on the view read after its last action", c.op, c.uid, c.st)
			}
		})
	}
}

type fakeProber struct {
	updates chan pod.ProbeUpdate
	synced  chan pod.UID
	removed chan pod.UID
}

func (f *fakeProber) Updates() <-chan pod.ProbeUpdate      { return f.updates }
func (f *fakeProber) Sync(p *v1.Pod, _ *pod.RuntimeStatus) { f.synced <- p.UID }
func (f *fakeProber) RemovePod(uid pod.UID)                { f.removed <- uid }

// A probe verdict is an input of the loop: it syncs its pod at once (no
// wait for the sync tick); every sync points the prober at the pod's
// containers, a kill stops its probes.
func TestProbeVerdictSyncsThePod(t *testing.T) {
	r := newRig(t, nil)
	fp := &fakeProber{updates: make(chan pod.ProbeUpdate, 1), synced: make(chan pod.UID, 10), removed: make(chan pod.UID, 10)}
	r.loop.cfg.Prober = fp
	p := testPod("u1", "a")
	r.step(t, add(r, p))
	r.next(t)
	if uid := recv(t, fp.synced, "prober sync"); uid != "u1" {
		t.Fatalf("prober synced %s", uid)
	}
	r.step(t, func() {
		fp.updates <- pod.ProbeUpdate{UID: "u1", Container: "c", ContainerID: "c1", Kind: pod.Liveness, Result: pod.ProbeFailure}
	})
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1", c)
	}
	recv(t, fp.synced, "prober sync after the verdict")
	r.step(t, remove(r, p))
	if c := r.next(t); c.op != "kill" {
		t.Fatalf("got %+v, want kill", c)
	}
	if uid := recv(t, fp.removed, "prober stopped for the killed pod"); uid != "u1" {
		t.Fatalf("removed %s", uid)
	}
}

// The run chain keeps a pod it refuses from running: no sync, its
// running containers stopped, its status Blocked; once the chain admits
// it (here: its spec changed), it syncs.
func TestRunChainKeepsPodPending(t *testing.T) {
	r := newRig(t, nil)
	r.loop.cfg.Run = admit.Chain{admit.HandlerFunc{N: "NoHostNet", F: func(a *admit.Attributes) admit.Result {
		if a.Pod.Spec.HostNetwork {
			return admit.Result{Reason: "Forbidden", Message: "no host network here"}
		}
		return admit.Result{Admit: true}
	}}}
	p := testPod("u1", "a")
	p.Spec.HostNetwork = true
	// Adopted while running: the stop comes first.
	r.clock.Step(time.Millisecond)
	r.pleg.Publish(r.clock.Now(), &pod.RuntimeStatus{UID: "u1", Name: "a", Namespace: "default",
		Containers: []*pod.Container{{ID: "c1", Name: "main", State: pod.ContainerRunning}}})
	r.step(t, add(r, p))
	if c := r.next(t); c.op != "stop" || c.uid != "u1" {
		t.Fatalf("got %+v, want stop u1", c)
	}
	if got := recv(t, r.status.blocked, "blocked status"); got != "u1 Forbidden" {
		t.Fatalf("blocked %q", got)
	}
	q := p.DeepCopy()
	q.Spec.HostNetwork = false
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpUpdate, Source: pod.SourceFile, Pods: []*v1.Pod{q}} })
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1 once the run chain admits it", c)
	}
}

// An eviction stops, then kills, the pod with the manager's grace, then
// publishes its Failed status (no Removed) — not while its containers may
// still run —, and an update of the pod does not bring it back;
// ActivePods no longer lists it.
func TestEvictionEndsThePod(t *testing.T) {
	r := newRig(t, nil)
	p := testPod("u1", "a")
	r.step(t, add(r, p))
	r.next(t)
	if got := r.loop.Pods().ActivePods(); len(got) != 1 || got[0].UID != "u1" {
		t.Fatalf("active pods %v", got)
	}
	r.step(t, func() { r.loop.Evict(p, 0, "The node was low on resource: memory.") })
	if c := r.next(t); c.op != "stop" || c.uid != "u1" || c.grace != 0 {
		t.Fatalf("got %+v, want stop u1 with grace 0", c)
	}
	r.status.mu.Lock()
	early := r.status.refused["u1"]
	r.status.mu.Unlock()
	if early != "" {
		t.Fatalf("status %q published before the containers stopped", early)
	}
	if c := r.next(t); c.op != "kill" || c.uid != "u1" {
		t.Fatalf("got %+v, want kill u1", c)
	}
	r.waitWorkersExit(t)
	r.status.mu.Lock()
	reason := r.status.refused["u1"]
	removed := len(r.status.removedPods)
	r.status.mu.Unlock()
	if reason != "Evicted: The node was low on resource: memory." || removed != 0 {
		t.Fatalf("status %q, %d removals: want Evicted kept published", reason, removed)
	}
	if got := r.loop.Pods().ActivePods(); len(got) != 0 {
		t.Fatalf("active pods after the eviction %v", got)
	}
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpUpdate, Source: pod.SourceFile, Pods: []*v1.Pod{p}} })
	if r.worker("u1") != nil {
		t.Fatal("an update restarted the evicted pod")
	}
}

// An evicted pod deleted while its kill runs is removed (status, API)
// only once the kill is over, not while its containers still run.
func TestEvictedPodDeletedDuringItsKill(t *testing.T) {
	r := newRig(t, nil)
	gate := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.killGate = gate
	r.rt.mu.Unlock()
	p := testPod("u1", "a")
	r.step(t, add(r, p))
	r.next(t)
	r.step(t, func() { r.loop.Evict(p, 30, "low on memory") })
	if c := r.next(t); c.op != "stop" {
		t.Fatalf("got %+v, want the stop of the evicted pod", c)
	}
	// The kill waits on the gate: the API deletes the Failed pod now.
	deleted := p.DeepCopy()
	now := metav1.Now()
	zero := int64(0)
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, &zero
	r.step(t, func() { r.updates <- pod.Update{Op: pod.OpUpdate, Source: pod.SourceAPI, Pods: []*v1.Pod{deleted}} })
	// The deletion's shorter grace restarts the kill (first the stop of a
	// deleted pod), which waits again.
	if c := r.next(t); c.op != "stop" || c.grace != 0 {
		t.Fatalf("got %+v, want the stop of the deleted pod with grace 0", c)
	}
	r.status.mu.Lock()
	early := len(r.status.removedPods)
	r.status.mu.Unlock()
	if early != 0 {
		t.Fatal("the evicted pod was removed while its kill was still running")
	}
	close(gate)
	if c := r.next(t); c.op != "kill" {
		t.Fatalf("got %+v, want the kill after the stop", c)
	}
	if uid := recv(t, r.status.removed, "removal once the kill is over"); uid != "u1" {
		t.Fatalf("removed %s", uid)
	}
}
