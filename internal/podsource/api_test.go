package podsource

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

func apiPod(uid, name string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "default", Generation: 3},
		Spec:   v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}},
		Status: v1.PodStatus{Phase: phase}}
}

// sourceRig is an API source over an informer whose store the test fills and
// whose "synced" it decides; time is a fake clock that reports each timer
// and ticker Run makes, so a step is taken only once Run waits on them.
type sourceRig struct {
	src    *API
	inf    cache.SharedIndexInformer
	lister corelisters.PodLister
	synced atomic.Bool
	clock  *armClock
	got    chan []*v1.Pod
	ckpt   string
}

type armClock struct {
	*testclock.FakeClock
	armed chan string
}

func (c *armClock) NewTimer(d time.Duration) clock.Timer {
	tm := c.FakeClock.NewTimer(d)
	c.armed <- "timer"
	return tm
}

func (c *armClock) NewTicker(d time.Duration) clock.Ticker {
	tk := c.FakeClock.NewTicker(d)
	c.armed <- "ticker"
	return tk
}

func newSourceRig(t *testing.T) *sourceRig {
	t.Helper()
	cs := fake.NewClientset()
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().Pods()
	r := &sourceRig{clock: &armClock{FakeClock: testclock.NewFakeClock(time.Unix(1_000_000, 0)), armed: make(chan string, 10)},
		got:  make(chan []*v1.Pod, 10),
		ckpt: filepath.Join(t.TempDir(), "checkpoints", "api-pods.json")}
	r.inf, r.lister = inf.Informer(), inf.Lister()
	src, err := NewAPI(APIConfig{Informer: r.inf, Lister: r.lister, Synced: r.synced.Load, Sink: func(p []*v1.Pod) { r.got <- p }, Checkpoint: r.ckpt,
		CheckpointWait: 5 * time.Second, Clock: r.clock, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r.src = src
	return r
}

func (r *sourceRig) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.src.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (r *sourceRig) next(t *testing.T) []*v1.Pod {
	t.Helper()
	select {
	case p := <-r.got:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("nothing handed over")
	}
	return nil
}

// waitTimers waits until Run has made its checkpoint timer and its poll
// ticker: from then on a step of the clock reaches them.
func (r *sourceRig) waitTimers(t *testing.T) {
	t.Helper()
	for _, want := range []string{"timer", "ticker"} {
		select {
		case got := <-r.clock.armed:
			if got != want {
				t.Fatalf("Run made a %s, want its %s", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Run never made its %s", want)
		}
	}
}

func TestAPISourceHandsOverAPIPodsButNotMirrors(t *testing.T) {
	r := newSourceRig(t)
	mirror := apiPod("m", "static-n1", v1.PodRunning)
	mirror.Annotations = map[string]string{ConfigMirrorAnnotation: "h"}
	running := apiPod("u1", "a", v1.PodRunning)
	running.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	gate := v1.PodCondition{Type: "example.com/gate", Status: v1.ConditionFalse}
	running.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}, gate}
	running.Status.PodIP = "10.0.0.5"
	failed := apiPod("u2", "b", v1.PodFailed)
	failed.Status.Reason, failed.Status.Message = "DeadlineExceeded", "too long"
	failed.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c"}}
	for _, p := range []*v1.Pod{running, failed, mirror} {
		r.inf.GetStore().Add(p)
	}
	r.synced.Store(true)
	r.run(t)
	pods := r.next(t)
	if len(pods) != 2 || pods[0].UID != "u1" || pods[1].UID != "u2" || !IsAPIPod(pods[0]) || !IsAPIPod(pods[1]) {
		t.Fatalf("handed over %v, want u1 and u2 marked as API pods", pods)
	}
	// Of the status, only the readiness gates' conditions of a running
	// pod, and how a finished pod ended.
	if got := pods[0].Status; got.Phase != "" || got.PodIP != "" || len(got.Conditions) != 1 || got.Conditions[0] != gate {
		t.Fatalf("running pod handed over with status %+v, want only its gate condition", got)
	}
	if got := pods[1].Status; got.Phase != v1.PodFailed || got.Reason != "DeadlineExceeded" || got.Message != "too long" ||
		len(got.ContainerStatuses) != 0 {
		t.Fatalf("finished pod handed over with status %+v, want its phase, reason and message only", got)
	}
	// The informer's object is never modified.
	if p, _ := r.lister.Pods("default").Get("a"); p.Annotations[ConfigSourceAnnotation] != "" {
		t.Fatal("the informer's pod was annotated in place")
	}
	// What was handed over is checkpointed, specs only.
	ck, err := readCheckpoint(r.ckpt)
	if err != nil || len(ck) != 2 || ck[0].UID != "u1" || ck[0].Status.Phase != "" || ck[1].Status.Phase != v1.PodFailed {
		t.Fatalf("checkpoint %v, %v", ck, err)
	}
	if st, _ := os.Stat(r.ckpt); st.Mode().Perm() != 0o600 {
		t.Fatalf("checkpoint mode %v, want 0600", st.Mode().Perm())
	}
}

func TestAPISourceRunsTheCheckpointWhenTheAPIServerIsAway(t *testing.T) {
	// An earlier run checkpointed u1.
	first := newSourceRig(t)
	first.inf.GetStore().Add(apiPod("u1", "a", v1.PodRunning))
	first.synced.Store(true)
	first.run(t)
	first.next(t)

	r := newSourceRig(t)
	r.ckpt = first.ckpt
	r.src.cfg.Checkpoint = first.ckpt
	r.run(t)
	r.waitTimers(t)
	r.clock.Step(5 * time.Second)
	pods := r.next(t)
	if len(pods) != 1 || pods[0].UID != "u1" {
		t.Fatalf("handed over %v, want the checkpointed u1", pods)
	}
	// The API server answers: its set replaces the checkpoint's.
	r.inf.GetStore().Add(apiPod("u2", "b", v1.PodRunning))
	r.synced.Store(true)
	r.clock.Step(50 * time.Millisecond) // the poll ticker made above
	pods = r.next(t)
	if len(pods) != 1 || pods[0].UID != "u2" {
		t.Fatalf("handed over %v, want the API's u2", pods)
	}
}

func TestBrokenCheckpointIsNotRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	os.WriteFile(path, []byte(`{"items":[{"metadata":{"name":"x"}}]}`), 0o600)
	if _, err := readCheckpoint(path); err == nil {
		t.Fatal("a checkpoint of non-API pods was accepted")
	}
}

// The agent's own status writes (and a mirror pod's) do not make the
// source re-list and re-diff every pod; what it hands over changing does.
func TestOnlyChangesOfWhatIsHandedOverWakeTheSource(t *testing.T) {
	base := apiPod("u1", "a", v1.PodPending)
	base.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/gate"}}
	with := func(f func(p *v1.Pod)) *v1.Pod { p := base.DeepCopy(); f(p); return p }
	mirror := with(func(p *v1.Pod) { p.Annotations = map[string]string{ConfigMirrorAnnotation: "h"} })
	for _, tt := range []struct {
		name string
		old  *v1.Pod
		new  *v1.Pod
		want bool
	}{
		{"status written by the agent", base, with(func(p *v1.Pod) {
			p.ResourceVersion, p.Status.Phase, p.Status.PodIP = "9", v1.PodRunning, "10.0.0.5"
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		}), false},
		{"mirror pod's status", mirror, with(func(p *v1.Pod) {
			p.Annotations = mirror.Annotations
			p.Status.Phase = v1.PodRunning
		}), false},
		{"finished", base, with(func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }), true},
		{"readiness gate set", base, with(func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}
		}), true},
		{"deleted", base, with(func(p *v1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }), true},
		{"spec (resize, ephemeral container)", base, with(func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg"}}}
		}), true},
		{"labels", base, with(func(p *v1.Pod) { p.Labels = map[string]string{"a": "b"} }), true},
	} {
		if got := handedOverChanged(tt.old, tt.new); got != tt.want {
			t.Errorf("%s: changed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// A change hands over the set again with only the changed pod made anew:
// the others are the same objects (the Mux skips them without a diff),
// and the checkpoint follows.
func TestAPISourceRedoesOnlyTheChangedPod(t *testing.T) {
	r := newSourceRig(t)
	a, b := apiPod("u1", "a", v1.PodRunning), apiPod("u2", "b", v1.PodRunning)
	r.inf.GetStore().Add(a)
	r.inf.GetStore().Add(b)
	r.synced.Store(true)
	r.run(t)
	first := r.next(t)
	if len(first) != 2 {
		t.Fatalf("handed over %v, want u1 and u2", first)
	}

	a2 := a.DeepCopy()
	a2.Labels = map[string]string{"tier": "web"}
	r.inf.GetStore().Update(a2)
	r.src.changed(a2) // what the informer's update handler calls
	second := r.next(t)
	if len(second) != 2 || second[0].Labels["tier"] != "web" || second[0] == first[0] {
		t.Fatalf("handed over %v, want u1 anew with its label", second)
	}
	if second[1] != first[1] {
		t.Fatal("the unchanged u2 was made anew")
	}

	r.inf.GetStore().Delete(b)
	r.src.changed(cache.DeletedFinalStateUnknown{Key: "default/b", Obj: b})
	third := r.next(t)
	if len(third) != 1 || third[0] != second[0] {
		t.Fatalf("handed over %v, want only u1, unchanged", third)
	}
	ck, err := readCheckpoint(r.ckpt)
	if err != nil || len(ck) != 1 || ck[0].UID != "u1" || ck[0].Labels["tier"] != "web" || !IsAPIPod(ck[0]) {
		t.Fatalf("checkpoint %v, %v; want u1 with its label", ck, err)
	}
}
