package allocation

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
)

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// apiPod is an API pod with one Burstable container and a plain init
// container (not resizable).
func apiPod(uid, cpuReq, cpuLim string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid), Generation: 1,
			Annotations: map[string]string{"kubernetes.io/config.source": "api"}},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: rl("cpu", "50m")}}},
			Containers: []v1.Container{{Name: "app",
				Resources: v1.ResourceRequirements{Requests: rl("cpu", cpuReq, "memory", "64Mi"), Limits: rl("cpu", cpuLim)}}},
		},
	}
}

// resized is p asking for cpu req/lim, one generation on.
func resized(p *v1.Pod, cpuReq, cpuLim string) *v1.Pod {
	p = p.DeepCopy()
	p.Generation++
	p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse(cpuReq)
	p.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse(cpuLim)
	return p
}

type event struct{ Type, Reason, Message string }

type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Event(_ *v1.Pod, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{eventType, reason, message})
}

func (r *recorder) take() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

type fixture struct {
	m      *Manager
	rec    *recorder
	clock  *testclock.FakeClock
	dir    string
	active []*v1.Pod
	// fits, when set, is the Admit decision.
	fits func(p *v1.Pod, others []*v1.Pod) (bool, string)
	logs *observer.ObservedLogs
}

func newFixture(t *testing.T, mutate ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{rec: &recorder{}, clock: testclock.NewFakeClock(time.Unix(1_700_000_000, 0)), dir: t.TempDir()}
	f.m = f.open(t, mutate...)
	return f
}

// open makes a Manager over the fixture's state directory (again: an
// agent restart).
func (f *fixture) open(t *testing.T, mutate ...func(*Config)) *Manager {
	t.Helper()
	core, logs := observer.New(zap.DebugLevel)
	f.logs = logs
	cfg := Config{
		StateDir: f.dir, Allocatable: rl("cpu", "4", "memory", "8Gi"),
		Admit: func(p *v1.Pod, others []*v1.Pod) (bool, string) {
			if f.fits != nil {
				return f.fits(p, others)
			}
			return true, ""
		},
		ActivePods: func() []*v1.Pod { return f.active },
		Recorder:   f.rec, Clock: f.clock, Logger: zap.New(core),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	return m
}

func TestAdmittedRecordsTheSpecOnce(t *testing.T) {
	f := newFixture(t)
	p := apiPod("a", "100m", "200m")
	if err := f.m.Admitted(p); err != nil {
		t.Fatal(err)
	}
	got, ok := f.m.Allocated(p.UID, "app")
	if !ok || !got.Requests.Cpu().Equal(resource.MustParse("100m")) {
		t.Fatalf("Allocated(app) = %+v, %v", got, ok)
	}
	if _, ok := f.m.Allocated(p.UID, "init"); ok {
		t.Error("a plain init container has an allocation; it is not resizable")
	}
	// Re-admitted (an agent restart) with a resize in its spec: what was
	// allocated stands.
	bigger := resized(p, "1", "2")
	if err := f.m.Admitted(bigger); err != nil {
		t.Fatal(err)
	}
	if v := f.m.AllocatedPod(bigger); !v.Spec.Containers[0].Resources.Requests.Cpu().Equal(resource.MustParse("100m")) {
		t.Errorf("AllocatedPod() cpu = %v, want the admitted 100m", v.Spec.Containers[0].Resources.Requests.Cpu())
	}
	if v := f.m.AllocatedPod(p); v != p {
		t.Error("AllocatedPod() copied a pod whose spec is its allocation")
	}
}

// TestResizeAllocated: a resize that fits is allocated and checkpointed
// (it outlives a restart), PodResizeInProgress is set with the pod's
// generation and ResizeStarted posted; the runtime's report that it is
// applied clears the condition with ResizeCompleted.
func TestResizeAllocated(t *testing.T) {
	f := newFixture(t)
	p := apiPod("a", "100m", "200m")
	f.m.Admitted(p)
	bigger := resized(p, "200m", "400m")
	if got := f.m.Resize(bigger); got != bigger {
		t.Fatal("Resize() did not return the allocated spec")
	}
	conds := f.m.Conditions(p.UID)
	if len(conds) != 1 || conds[0].Type != v1.PodResizeInProgress || conds[0].Status != v1.ConditionTrue ||
		conds[0].Reason != "" || conds[0].ObservedGeneration != 2 || conds[0].LastTransitionTime.IsZero() {
		t.Fatalf("conditions %+v, want PodResizeInProgress of generation 2", conds)
	}
	wantEv := []event{{v1.EventTypeNormal, "ResizeStarted",
		`Pod resize started: {"initContainers":[{"name":"init","resources":{"requests":{"cpu":"50m"}}}],"containers":[{"name":"app","resources":{"limits":{"cpu":"400m"},"requests":{"cpu":"200m","memory":"64Mi"}}}],"generation":2}`}}
	if diff := cmp.Diff(wantEv, f.rec.take()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	f.m.ResizeProgress(bigger, false, nil)
	if c := f.m.Conditions(p.UID); len(c) != 0 {
		t.Errorf("conditions after the resize was applied: %+v", c)
	}
	if ev := f.rec.take(); len(ev) != 1 || ev[0].Reason != "ResizeCompleted" || !strings.HasPrefix(ev[0].Message, "Pod resize completed: {") {
		t.Errorf("events %+v, want ResizeCompleted", ev)
	}
	f.m.ResizeProgress(bigger, false, nil)
	if ev := f.rec.take(); len(ev) != 0 {
		t.Errorf("a second report posted %+v", ev)
	}

	// Checkpointed: a restarted agent allocates the same.
	m2 := f.open(t)
	if got, _ := m2.Allocated(p.UID, "app"); !got.Limits.Cpu().Equal(resource.MustParse("400m")) {
		t.Errorf("after a restart: allocated %+v, want the resize's", got)
	}
}

func TestResizePending(t *testing.T) {
	tests := []struct {
		name       string
		pod        func() *v1.Pod
		mutate     func(*Config)
		fits       func(*v1.Pod, []*v1.Pod) (bool, string)
		wantReason string
		wantMsg    string
	}{
		{
			name:       "more cpu than the node's allocatable: Infeasible",
			pod:        func() *v1.Pod { return resized(apiPod("a", "100m", "200m"), "5", "5") },
			wantReason: v1.PodReasonInfeasible, wantMsg: "Node didn't have enough capacity: cpu, requested: 5000, capacity: 4000",
		},
		{
			name: "more memory than the node's allocatable: Infeasible",
			pod: func() *v1.Pod {
				p := apiPod("a", "100m", "200m").DeepCopy()
				p.Generation++
				p.Spec.Containers[0].Resources.Requests[v1.ResourceMemory] = resource.MustParse("9Gi")
				return p
			},
			wantReason: v1.PodReasonInfeasible, wantMsg: "Node didn't have enough capacity: memory, requested: 9663676416, capacity: 8589934592",
		},
		{
			name: "no room beside the other pods: Deferred with admission's message",
			pod:  func() *v1.Pod { return resized(apiPod("a", "100m", "200m"), "3", "3") },
			fits: func(p *v1.Pod, others []*v1.Pod) (bool, string) {
				return false, "Node didn't have enough resource: cpu, requested: 3050, used: 2000, capacity: 4000"
			},
			wantReason: v1.PodReasonDeferred, wantMsg: "Node didn't have enough resource: cpu, requested: 3050, used: 2000, capacity: 4000",
		},
		{
			name: "a Guaranteed pod's cpu under the static CPU manager policy: Infeasible",
			pod: func() *v1.Pod {
				p := apiPod("a", "1", "1")
				p.Spec.InitContainers = nil
				p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "64Mi"), Limits: rl("cpu", "1", "memory", "64Mi")}
				return p
			},
			mutate:     func(c *Config) { c.StaticCPUManager = true },
			wantReason: v1.PodReasonInfeasible, wantMsg: `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`,
		},
		{
			name: "a static pod: Infeasible",
			pod: func() *v1.Pod {
				p := resized(apiPod("a", "100m", "200m"), "200m", "400m")
				p.Annotations["kubernetes.io/config.source"] = "file"
				return p
			},
			wantReason: v1.PodReasonInfeasible, wantMsg: "In-place resize of static-pods is not supported",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) {
				if tt.mutate != nil {
					tt.mutate(c)
				}
			})
			f.fits = tt.fits
			desired := tt.pod()
			admitted := desired.DeepCopy()
			admitted.Spec.Containers[0].Resources = apiPod("a", "100m", "200m").Spec.Containers[0].Resources
			if tt.mutate != nil { // the Guaranteed pod was admitted with 2 CPUs
				admitted.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "64Mi"), Limits: rl("cpu", "2", "memory", "64Mi")}
			}
			f.m.Admitted(admitted)
			got := f.m.Resize(desired)
			if !got.Spec.Containers[0].Resources.Requests.Cpu().Equal(*admitted.Spec.Containers[0].Resources.Requests.Cpu()) ||
				!got.Spec.Containers[0].Resources.Requests.Memory().Equal(*admitted.Spec.Containers[0].Resources.Requests.Memory()) {
				t.Errorf("Resize() returned %+v, want the allocated resources", got.Spec.Containers[0].Resources)
			}
			conds := f.m.Conditions(desired.UID)
			if len(conds) != 1 || conds[0].Type != v1.PodResizePending || conds[0].Reason != tt.wantReason ||
				conds[0].Message != tt.wantMsg || conds[0].ObservedGeneration != desired.Generation {
				t.Fatalf("conditions %+v, want PodResizePending %s %q", conds, tt.wantReason, tt.wantMsg)
			}
			ev := f.rec.take()
			if len(ev) != 1 || ev[0].Type != v1.EventTypeWarning || ev[0].Reason != "Resize"+tt.wantReason ||
				!strings.HasPrefix(ev[0].Message, "Pod resize "+tt.wantReason+": {") || !strings.Contains(ev[0].Message, tt.wantMsg[:20]) {
				t.Errorf("events %+v", ev)
			}
			// Decided again at the next sync: no new event while nothing
			// changes.
			f.m.Resize(desired)
			if ev := f.rec.take(); len(ev) != 0 {
				t.Errorf("the same decision posted %+v again", ev)
			}
		})
	}
}

// A deferred resize is tried at each sync and allocated once there is
// room; the other pods count by their allocation, not their spec.
func TestDeferredThenAllocated(t *testing.T) {
	f := newFixture(t)
	other := apiPod("b", "1", "1")
	f.m.Admitted(other)
	otherResizing := resized(other, "3", "3") // not allocated: counts as 1
	f.active = []*v1.Pod{otherResizing}
	var seen []string
	room := false
	f.fits = func(p *v1.Pod, others []*v1.Pod) (bool, string) {
		seen = nil
		for _, o := range others {
			seen = append(seen, o.Spec.Containers[0].Resources.Requests.Cpu().String())
		}
		return room, "no room"
	}
	p := apiPod("a", "100m", "200m")
	f.m.Admitted(p)
	f.active = append(f.active, p)
	bigger := resized(p, "2", "2")
	f.m.Resize(bigger)
	if c := f.m.Conditions(p.UID); len(c) != 1 || c[0].Reason != v1.PodReasonDeferred {
		t.Fatalf("conditions %+v, want Deferred", c)
	}
	if !cmp.Equal(seen, []string{"1"}) {
		t.Errorf("others seen by the fit check: %v, want the other pod at its allocated 1 CPU", seen)
	}
	room = true
	f.m.Resize(bigger)
	if c := f.m.Conditions(p.UID); len(c) != 1 || c[0].Type != v1.PodResizeInProgress {
		t.Fatalf("conditions %+v, want only PodResizeInProgress", c)
	}
	// Reverting the request clears a pending resize.
	f2 := newFixture(t)
	f2.fits = func(*v1.Pod, []*v1.Pod) (bool, string) { return false, "no room" }
	f2.m.Admitted(p)
	f2.m.Resize(bigger)
	f2.m.Resize(p)
	if c := f2.m.Conditions(p.UID); len(c) != 0 {
		t.Errorf("conditions after the revert: %+v", c)
	}
}

func TestResizeProgressError(t *testing.T) {
	f := newFixture(t)
	p := apiPod("a", "100m", "200m")
	f.m.Admitted(p)
	err := errors.New(`cannot decrease memory limits: attempting to set container "app" memory limit (1) below current usage (2)`)
	f.m.ResizeProgress(p, true, err)
	c := f.m.Conditions(p.UID)
	if len(c) != 1 || c[0].Type != v1.PodResizeInProgress || c[0].Reason != v1.PodReasonError || c[0].Message != err.Error() {
		t.Fatalf("conditions %+v, want PodResizeInProgress Error", c)
	}
	ev := f.rec.take()
	if len(ev) != 1 || ev[0].Reason != "ResizeError" || ev[0].Type != v1.EventTypeWarning ||
		!strings.Contains(ev[0].Message, `"error":"cannot decrease memory limits`) {
		t.Errorf("events %+v", ev)
	}
	f.m.ResizeProgress(p, true, err)
	if ev := f.rec.take(); len(ev) != 0 {
		t.Errorf("the same error posted again: %+v", ev)
	}
	f.m.ResizeProgress(p, false, nil)
	if c := f.m.Conditions(p.UID); len(c) != 0 {
		t.Errorf("conditions %+v after success", c)
	}
}

func TestActuatedRecords(t *testing.T) {
	f := newFixture(t)
	p := apiPod("a", "100m", "200m")
	if err := f.m.SetActuated(p.UID, "app", pod.Actuated{ContainerID: "c1"}); err == nil {
		t.Error("SetActuated() of a pod without allocation succeeded")
	}
	f.m.Admitted(p)
	rec := pod.Actuated{ContainerID: "c1", Resources: v1.ResourceRequirements{Limits: rl("cpu", "400m")}, Hash: "v2:abc"}
	if err := f.m.SetActuated(p.UID, "app", rec); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.m.Actuated(p.UID, "app", "c2"); ok {
		t.Error("a record of instance c1 answers for c2")
	}
	m2 := f.open(t)
	got, ok := m2.Actuated(p.UID, "app", "c1")
	if !ok || got.Hash != "v2:abc" || !got.Resources.Limits.Cpu().Equal(resource.MustParse("400m")) {
		t.Errorf("after a restart: %+v, %v", got, ok)
	}
	// Released with the pod, for good.
	m2.RemoveOrphans(map[types.UID]bool{"other": true})
	if _, ok := m2.Allocated(p.UID, "app"); ok {
		t.Error("allocation kept after the pod went")
	}
	if _, ok := f.open(t).Allocated(p.UID, "app"); ok {
		t.Error("release not checkpointed")
	}
}

// A corrupt checkpoint is moved aside and said so; the agent starts.
func TestCorruptState(t *testing.T) {
	for name, body := range map[string]string{
		"not JSON":     "{not json",
		"bad checksum": `{"pods":{"a":{"containers":{}}},"checksum":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			path := filepath.Join(f.dir, StateFile)
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			m := f.open(t)
			if _, ok := m.Allocated("a", "app"); ok {
				t.Error("allocation read from a corrupt file")
			}
			if b, err := os.ReadFile(path + ".corrupt"); err != nil || string(b) != body {
				t.Errorf("corrupt file not moved aside: %v", err)
			}
			entries := f.logs.FilterMessageSnippet("corrupt").All()
			if len(entries) != 1 || entries[0].Level != zap.ErrorLevel || !strings.Contains(entries[0].Message, "Check the pods' resources") {
				t.Errorf("log %+v, want one error saying what to do", entries)
			}
			// And it works on.
			if err := m.Admitted(apiPod("b", "1", "1")); err != nil {
				t.Error(err)
			}
		})
	}
}
