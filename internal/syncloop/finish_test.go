package syncloop

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/admit"
	"github.com/nodeagent/nodeagent/internal/pleg"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// runningStatus is uid's runtime view with a ready sandbox and a running
// container; stoppedStatus the same after StopPod.
func runningStatus(uid pod.UID) *pod.RuntimeStatus {
	return &pod.RuntimeStatus{UID: uid, Name: "a", Namespace: "default",
		Sandboxes:  []*pod.Sandbox{{ID: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		Containers: []*pod.Container{{ID: "c1", SandboxID: "s1", Name: "c", State: pod.ContainerRunning}}}
}

func stoppedStatus(uid pod.UID) *pod.RuntimeStatus {
	return &pod.RuntimeStatus{UID: uid, Name: "a", Namespace: "default",
		Sandboxes:  []*pod.Sandbox{{ID: "s1", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}},
		Containers: []*pod.Container{{ID: "c1", SandboxID: "s1", Name: "c", State: pod.ContainerExited}}}
}

// stopThenFinished expects uid's finished pod stopped (with its own grace
// period) — the runtime then shows it stopped — and its final status
// published from a view after the stop.
func stopThenFinished(t *testing.T, r *rig, uid pod.UID, reason string) {
	t.Helper()
	if c := r.next(t); c.op != "stop" || c.uid != uid || c.grace != -1 {
		t.Fatalf("got %+v, want the finished pod %s stopped with its own grace period", c, uid)
	}
	r.waiting(t) // for a view newer than the stop
	r.clock.Step(time.Millisecond)
	r.pleg.Publish(r.clock.Now(), stoppedStatus(uid))
	f := recv(t, r.status.finished, "final status")
	if f.uid != uid || f.reason != reason || f.running {
		t.Fatalf("finished %+v, want %s with reason %q from a stopped view", f, uid, reason)
	}
}

// A pod whose sync reports a terminal phase is over: stopped (not
// removed), its final status published, never synced again; its
// removal kills it.
func TestTerminalPhaseFinishesThePod(t *testing.T) {
	r := newRig(t, nil)
	r.pleg.Publish(r.clock.Now(), runningStatus("u1"))
	r.status.setPhase("u1", v1.PodSucceeded)
	p := testPod("u1", "a")
	r.step(t, add(r, p))
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1", c)
	}
	stopThenFinished(t, r, "u1", "")
	if got := r.loop.Pods().ActivePods(); len(got) != 0 {
		t.Fatalf("active pods %v, want none: u1 is finished", got)
	}
	r.rt.mu.Lock()
	released := r.rt.released
	r.rt.mu.Unlock()
	if len(released) != 1 || released[0] != "u1" {
		t.Fatalf("released %v, want u1's volumes released once, before its final status", released)
	}
	// Housekeeping: u1 is active (its containers and logs stay) but no
	// longer running (its cgroup and CPUs go).
	var active, running map[pod.UID]bool
	hkDone := make(chan struct{})
	r.loop.cfg.Housekeeping = func(a, run map[pod.UID]bool) { active, running = a, run; close(hkDone) }
	r.step(t, func() { r.hkC <- r.clock.Now() })
	recv(t, hkDone, "the housekeeping round (off the loop goroutine)")
	if !active["u1"] || running["u1"] {
		t.Fatalf("housekeeping: active %v running %v; want u1 active, not running", active, running)
	}

	// A PLEG event wakes the worker: it publishes again and syncs nothing
	// (a sync would have come before a Finished report).
	r.step(t, func() { r.pleg.Send(pleg.Event{UID: "u1", Type: pleg.ContainerDied, Data: "c1"}) })
	r.waiting(t) // the worker waits for a view newer than its last step
	r.relist()
	recv(t, r.status.finished, "status of the finished pod after an event")
	if n := len(r.rt.calls); n != 0 {
		t.Fatalf("%d runtime calls for a finished pod, want none", n)
	}
	// Not due for any resync.
	r.clock.Step(time.Hour)
	if due := r.loop.queue.Due(); len(due) != 0 {
		t.Fatalf("due %v, want nothing: a finished pod is not resynced", due)
	}

	// Its removal (the API object deleted, the manifest gone) kills it.
	r.step(t, remove(r, p))
	if c := r.next(t); c.op != "kill" || c.uid != "u1" {
		t.Fatalf("got %+v, want kill u1", c)
	}
	if uid := recv(t, r.status.removed, "status removal"); uid != "u1" {
		t.Fatalf("removed %s, want u1", uid)
	}
}

// A pod its source shows finished (an API pod that ended before a
// restart of the agent) is not admitted, not counted beside new pods,
// never run: only its final status is published.
func TestPodFinishedAtItsSourceIsNeitherAdmittedNorRun(t *testing.T) {
	r := newRig(t, admit.Chain{admit.MaxPods(2)})
	r.pleg.Publish(r.clock.Now(), stoppedStatus("u2"))
	running := testPod("u1", "a")
	over := testPod("u2", "b")
	over.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: "DeadlineExceeded"}
	r.step(t, add(r, running, over))
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want the running pod synced", c)
	}
	f := recv(t, r.status.finished, "status of the pod finished at its source")
	if f.uid != "u2" || f.reason != "" {
		t.Fatalf("finished %+v, want u2 with no reason of the agent's", f)
	}
	// A third pod fits under maxPods 2: the finished one does not count.
	r.step(t, add(r, testPod("u3", "c")))
	r.status.mu.Lock()
	refused := r.status.refused
	r.status.mu.Unlock()
	if len(refused) != 0 {
		t.Fatalf("refused %v: the finished pod was counted", refused)
	}
	if c := r.next(t); c.op != "sync" || c.uid != "u3" {
		t.Fatalf("got %+v, want u3 synced; u2 is never run", c)
	}
}

// activeDeadlineSeconds: the pod is synced until the deadline, woken at
// it, then ended as Failed/DeadlineExceeded — its containers stopped,
// not removed.
func TestActiveDeadlineEndsThePod(t *testing.T) {
	r := newRig(t, nil)
	r.pleg.Publish(r.clock.Now(), runningStatus("u1"))
	p := testPod("u1", "a")
	five := int64(5)
	p.Spec.ActiveDeadlineSeconds = &five
	r.step(t, add(r, p))
	if c := r.next(t); c.op != "sync" || c.uid != "u1" {
		t.Fatalf("got %+v, want sync u1", c)
	}
	recv(t, r.synced, "first sync queued its next")
	// Not yet: nothing is due a moment before the deadline.
	r.clock.Step(5*time.Second - time.Millisecond)
	if due := r.loop.queue.Due(); len(due) != 0 {
		t.Fatalf("due %v before the deadline", due)
	}
	r.clock.Step(time.Millisecond)
	r.step(t, func() { r.syncC <- r.clock.Now() })
	stopThenFinished(t, r, "u1", reasonDeadlineExceeded)
}

// ResyncNamespace (an object the namespace's pods read changed) syncs
// that namespace's pods at once.
func TestResyncNamespace(t *testing.T) {
	r := newRig(t, nil)
	other := testPod("u2", "b")
	other.Namespace = "other"
	r.step(t, add(r, testPod("u1", "a"), other))
	for range 2 {
		r.next(t)
	}
	r.loop.ResyncNamespace("other")
	if c := r.next(t); c.op != "sync" || c.uid != "u2" {
		t.Fatalf("got %+v, want the pod of namespace other synced", c)
	}
}
