package status

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// A pod queued again before its turn is written once, with its newest
// spec; what is queued when the writer stops is still written.
func TestQueueWritesEachPodOnceWithItsNewestSpec(t *testing.T) {
	var wrote []*v1.Pod
	q := newQueue(func(p *v1.Pod) { wrote = append(wrote, p) })
	a1 := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a", Generation: 1}}
	a2 := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a", Generation: 2}}
	b := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b"}}
	q.add(a1)
	q.add(b)
	q.add(a2)
	q.drain()
	if len(wrote) != 2 {
		t.Fatalf("wrote %d files, want 2 (a once, b once)", len(wrote))
	}
	for _, p := range wrote {
		if p.UID == "a" && p.Generation != 2 {
			t.Fatalf("a written with generation %d, want the newest (2)", p.Generation)
		}
	}

	wrote = nil
	q.add(b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q.run(ctx) // stopped: writes what is left, then returns
	if len(wrote) != 1 || wrote[0] != b {
		t.Fatalf("at stop wrote %v, want b", wrote)
	}
}

// Pods is what the files show, without reading them: a terminating pod
// with its deletion mark, every pod Unknown while the runtime is away.
func TestManagerPodsIsThePublishedView(t *testing.T) {
	m, _, _ := newManager(t)
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", true)), pod.SyncResult{})
	m.Synced(mgrPodB, runtimeStatus(sbReady, running("pg", true)), pod.SyncResult{})
	m.Terminating(mgrPodB, 30)
	got := m.Pods()
	if len(got) != 2 || got[0].Name != "web" || got[1].Name != "db" {
		t.Fatalf("Pods() = %v, want web and db, sorted by full name", got)
	}
	if got[0].DeletionTimestamp != nil || got[1].DeletionTimestamp == nil || *got[1].DeletionGracePeriodSeconds != 30 {
		t.Fatal("only db should show its deletion (grace 30)")
	}
	if got[0].Status.Phase == v1.PodUnknown || got[0].Status.Phase == "" {
		t.Fatalf("web's phase %q before any outage", got[0].Status.Phase)
	}
	m.RuntimeHealth(errors.New("connection refused"))
	if p := m.Pods()[0]; p.Status.Phase != v1.PodUnknown {
		t.Fatalf("web's phase %q while the runtime is away, want Unknown", p.Status.Phase)
	}
}

// Paced, the writer writes at once, then waits its pause before the next
// round: what is queued meanwhile waits for it.
func TestQueuePacesItsRounds(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1_000_000, 0))
	wrote := make(chan pod.UID, 4)
	q := newQueue(func(p *v1.Pod) { wrote <- p.UID })
	q.after, q.pause = clk.After, 200*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	q.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "a"}})
	if got := <-wrote; got != "a" {
		t.Fatalf("wrote %s, want a", got)
	}
	for !clk.HasWaiters() { // the writer waits out its pause
		runtime.Gosched()
	}
	q.add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b"}})
	select {
	case got := <-wrote:
		t.Fatalf("wrote %s during the pause", got)
	default:
	}
	clk.Step(200 * time.Millisecond)
	if got := <-wrote; got != "b" {
		t.Fatalf("wrote %s, want b after the pause", got)
	}
}
