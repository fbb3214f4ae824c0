package cpumanager

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

func TestReconcilePushesCPUSets(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, oneSocketTwoCores)
	g := newPod("g", v1.RestartPolicyAlways, nil, container("c", "1"))
	b := newPod("b", v1.RestartPolicyAlways, nil, container("c", ""))
	for _, p := range []*v1.Pod{g, b} {
		if err := e.admit(p); err != nil {
			t.Fatal(err)
		}
	}
	e.pods.set(g.UID, running("g1", "c"))
	e.pods.set(b.UID, running("b1", "c"), exited("b0", "old", 0, false))

	steps := []struct {
		name string
		do   func()
		want map[string]string
	}{
		{"first pass sets every running container", func() {}, map[string]string{"g1": "1", "b1": "0"}},
		{"nothing changed, nothing set", func() {}, nil},
		{"the Guaranteed pod goes: the shared pool grows", func() {
			e.pods.set(g.UID)
			e.m.RemoveStale(map[pod.UID]bool{b.UID: true})
		}, map[string]string{"b1": "0-1"}},
		{"a new container is set once", func() { e.pods.set(b.UID, running("b1", "c"), running("b2", "d")) }, map[string]string{"b2": "0-1"}},
	}
	for _, s := range steps {
		s.do()
		if err := e.m.Reconcile(ctx, e.pods); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, _ := e.updater.take()
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: pushes (-want +got):\n%s", s.name, diff)
		}
	}

	// A failed update is retried at the next pass.
	if err := e.admit(newPod("g2", v1.RestartPolicyAlways, nil, container("c", "1"))); err != nil {
		t.Fatal(err)
	}
	e.updater.err = errors.New("runtime away")
	if err := e.m.Reconcile(ctx, e.pods); err == nil {
		t.Error("reconcile with a failing runtime: no error")
	}
	e.updater.err = nil
	if err := e.m.Reconcile(ctx, e.pods); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.updater.take(); !cmp.Equal(got, map[string]string{"b1": "0", "b2": "0"}) {
		t.Errorf("retry pushes %v, want b1 and b2 on 0", got)
	}
}

func TestReleaseWhenContainerEndsForGood(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		pod      *v1.Pod
		status   []*pod.Container
		released bool
	}{
		{"Never: exited", newPod("p", v1.RestartPolicyNever, nil, container("c", "2")),
			[]*pod.Container{exited("c1", "c", 1, false)}, true},
		{"OnFailure: exit 0", newPod("p", v1.RestartPolicyOnFailure, nil, container("c", "2")),
			[]*pod.Container{exited("c1", "c", 0, false)}, true},
		{"OnFailure: exit 1 restarts", newPod("p", v1.RestartPolicyOnFailure, nil, container("c", "2")),
			[]*pod.Container{exited("c1", "c", 1, false)}, false},
		{"Always: restarts", newPod("p", v1.RestartPolicyAlways, nil, container("c", "2")),
			[]*pod.Container{exited("c1", "c", 0, false)}, false},
		{"running", newPod("p", v1.RestartPolicyNever, nil, container("c", "2")),
			[]*pod.Container{running("c1", "c")}, false},
		{"sidecar keeps its CPUs", newPod("p", v1.RestartPolicyNever, []v1.Container{sidecar(container("c", "2"))}, container("app", "1")),
			[]*pod.Container{{ID: "c1", Name: "c", Init: true, State: pod.ContainerExited}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, dualSocketHT)
			if err := e.admit(tt.pod); err != nil {
				t.Fatal(err)
			}
			e.pods.set(tt.pod.UID, tt.status...)
			if err := e.m.Reconcile(ctx, e.pods); err != nil {
				t.Fatal(err)
			}
			_, held := e.m.Assignments()[string(tt.pod.UID)][tt.status[0].Name]
			if held == tt.released {
				t.Fatalf("released %v, want %v (assignments %v)", !held, tt.released, assignments(e.m))
			}
			if !tt.released {
				return
			}
			if got := e.m.SharedCPUs(); !got.Equals(e.m.topo.All()) {
				t.Errorf("shared %s, want every CPU back", got)
			}
			// Re-admitted (a restarted agent), it gets nothing again.
			m, err := e.restart(t)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Allocate(tt.pod); err != nil {
				t.Fatal(err)
			}
			if a := m.Assignments(); len(a) != 0 {
				t.Errorf("re-admission allocated again: %v", a)
			}
		})
	}
}

func TestInitContainerReleasedKeepsReusedCPUs(t *testing.T) {
	e := newEnv(t, dualSocketHT)
	p := newPod("p", v1.RestartPolicyAlways, []v1.Container{container("init", "4")}, container("app", "2"))
	if err := e.admit(p); err != nil {
		t.Fatal(err)
	}
	a := e.m.Assignments()[string(p.UID)]
	e.pods.set(p.UID, exited("i1", "init", 0, true), running("a1", "app"))
	if err := e.m.Reconcile(context.Background(), e.pods); err != nil {
		t.Fatal(err)
	}
	got := e.m.Assignments()[string(p.UID)]
	if _, ok := got["init"]; ok || !got["app"].Equals(a["app"]) {
		t.Fatalf("assignments %v, want only app's %s", got, a["app"])
	}
	if want := e.m.topo.All().Difference(a["app"]); !e.m.SharedCPUs().Equals(want) {
		t.Errorf("shared %s, want %s (the init's CPUs but those the app reuses)", e.m.SharedCPUs(), want)
	}
}

func TestRunReconcilesOnChangeAndEveryPeriod(t *testing.T) {
	e := newEnv(t, oneSocketTwoCores, func(c *Config) { c.ReconcilePeriod = 10 * time.Second })
	e.updater.sent = make(chan string, 10)
	b := newPod("b", v1.RestartPolicyAlways, nil, container("c", ""))
	e.pods.set(b.UID, running("b1", "c"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.m.Run(ctx, e.pods); close(done) }()
	defer func() { cancel(); <-done }()

	expect := func(what, want string) {
		t.Helper()
		select {
		case got := <-e.updater.sent:
			if got != want {
				t.Fatalf("%s: pushed %s, want %s", what, got, want)
			}
		case <-time.After(10 * time.Second): // a deadlock guard, not a wait for time to pass
			t.Fatalf("%s: no push", what)
		}
	}
	expect("at start", "b1=0-1")

	// A change wakes it at once, no tick needed.
	if err := e.admit(newPod("g", v1.RestartPolicyAlways, nil, container("c", "1"))); err != nil {
		t.Fatal(err)
	}
	expect("on change", "b1=0")

	// A container that appeared is set at the next tick.
	e.pods.set(b.UID, running("b1", "c"), running("b2", "d"))
	for !e.clock.HasWaiters() { // the ticker Run made
		runtime.Gosched()
	}
	e.clock.Step(10 * time.Second)
	expect("on tick", "b2=0")
}

func TestNoneReconcilesNothing(t *testing.T) {
	m, err := New(Config{Policy: PolicyNone, StateDir: t.TempDir(), Logger: newEnv(t, oneSocketTwoCores).cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	pods := &fakePods{}
	pods.set("u", running("c1", "c"))
	if err := m.Reconcile(context.Background(), pods); err != nil {
		t.Fatal(err)
	}
	m.Run(context.Background(), pods) // returns at once
}

// The CPU manager keeps no pod specs of its own: a container that ended
// is judged by its pod's spec in the pod manager, and a pod the pod
// manager does not hold (restored from the checkpoint, not admitted
// again yet) keeps its CPUs.
func TestReleaseEndedReadsThePodManager(t *testing.T) {
	e := newEnv(t, dualSocketHT)
	p := newPod("p", v1.RestartPolicyNever, nil, container("c", "2"))
	if err := e.m.Allocate(p); err != nil { // allocated, not (yet) in the pod manager
		t.Fatal(err)
	}
	e.pods.set(p.UID, exited("c1", "c", 0, false))
	if err := e.m.Reconcile(context.Background(), e.pods); err != nil {
		t.Fatal(err)
	}
	if _, held := e.m.Assignments()[string(p.UID)]["c"]; !held {
		t.Fatal("CPUs released for a pod the pod manager does not hold")
	}
	e.specs.mu.Lock()
	e.specs.pods[p.UID] = p
	e.specs.mu.Unlock()
	if err := e.m.Reconcile(context.Background(), e.pods); err != nil {
		t.Fatal(err)
	}
	if set := e.m.Assignments()[string(p.UID)]["c"]; set.Size() != 0 {
		t.Fatalf("the ended container of a pod the pod manager holds keeps %s", set)
	}
}
