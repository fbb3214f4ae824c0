package syncloop

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// deleted is p as the API server shows it after a DELETE with grace.
func deleted(p *v1.Pod, grace int64) *v1.Pod {
	d := p.DeepCopy()
	now := metav1.Now()
	d.DeletionTimestamp, d.DeletionGracePeriodSeconds = &now, &grace
	return d
}

func update(r *rig, pods ...*v1.Pod) func() {
	return func() { r.updates <- pod.Update{Op: pod.OpUpdate, Source: pod.SourceAPI, Pods: pods} }
}

// An API deletion (deletionTimestamp on an update) kills the pod with the
// API's grace period; a second deletion with a shorter one restarts the
// kill in flight with it; the pod given to Removed carries the deletion.
func TestAPIDeletionUsesItsGracePeriodAndAShorterOneWins(t *testing.T) {
	r := newRig(t, nil)
	p := testPod("u1", "a")
	r.step(t, add(r, p))
	if c := r.next(t); c.op != "sync" {
		t.Fatalf("got %+v, want sync", c)
	}
	gate := make(chan struct{})
	r.rt.mu.Lock()
	r.rt.killGate = gate
	r.rt.mu.Unlock()

	r.step(t, update(r, deleted(p, 30)))
	if uid := recv(t, r.status.terminating, "terminating"); uid != "u1" {
		t.Fatalf("terminating %s", uid)
	}
	if c := r.next(t); c.op != "stop" || c.grace != 30 {
		t.Fatalf("got %+v, want stop with grace 30", c)
	}
	// The stop waits at the gate; a shorter grace cancels and restarts it.
	r.step(t, update(r, deleted(p, 5)))
	if c := r.next(t); c.op != "stop" || c.grace != 5 {
		t.Fatalf("got %+v, want the stop restarted with grace 5", c)
	}
	close(gate)
	// Then, on a view taken after the stop, the final status, and the
	// removal.
	c := r.next(t)
	if c.op != "kill" || c.grace != 5 {
		t.Fatalf("got %+v, want kill with grace 5", c)
	}
	if uid := recv(t, r.status.removed, "removed"); uid != "u1" {
		t.Fatalf("removed %s", uid)
	}
	r.status.mu.Lock()
	term := append([]pod.UID(nil), r.status.terminated...)
	r.status.mu.Unlock()
	if len(term) != 1 || term[0] != "u1" {
		t.Fatalf("final statuses %v, want one for u1 before the removal", term)
	}
	r.status.mu.Lock()
	got := r.status.removedPods[len(r.status.removedPods)-1]
	r.status.mu.Unlock()
	if got.DeletionTimestamp == nil || *got.DeletionGracePeriodSeconds != 5 {
		t.Fatalf("Removed got %+v, want the deleted pod with grace 5", got.ObjectMeta)
	}
	// A longer grace after that changes nothing: the worker is gone, and
	// the pod is only reported removed again (the API still shows it).
	r.step(t, update(r, deleted(p, 60)))
	if uid := recv(t, r.status.removed, "removed again"); uid != "u1" {
		t.Fatalf("removed %s", uid)
	}
	if r.worker("u1") != nil {
		t.Fatal("a worker was started for a pod already killed")
	}
}

// A pod that arrives already deleted (the agent was away during the
// DELETE) is killed, never synced.
func TestPodAddedWhileBeingDeletedIsKilledNotRun(t *testing.T) {
	r := newRig(t, nil)
	r.step(t, add(r, deleted(testPod("u1", "a"), 0)))
	if c := r.next(t); c.op != "stop" || c.grace != 0 {
		t.Fatalf("got %+v, want stop with grace 0", c)
	}
	if c := r.next(t); c.op != "kill" || c.grace != 0 {
		t.Fatalf("got %+v, want kill with grace 0", c)
	}
	if uid := recv(t, r.status.removed, "removed"); uid != "u1" {
		t.Fatalf("removed %s", uid)
	}
}
