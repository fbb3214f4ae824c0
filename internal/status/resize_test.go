package status

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/pod"
)

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// fakeResizes is the allocation manager as the status reads it.
type fakeResizes struct {
	alloc map[string]v1.ResourceRequirements // by container name
	act   map[string]pod.Actuated            // by container name
	conds []v1.PodCondition
}

func (f fakeResizes) Allocated(_ types.UID, c string) (v1.ResourceRequirements, bool) {
	r, ok := f.alloc[c]
	return r, ok
}

func (f fakeResizes) Actuated(_ types.UID, c, id string) (pod.Actuated, bool) {
	a, ok := f.act[c]
	return a, ok && a.ContainerID == id
}

func (f fakeResizes) Conditions(types.UID) []v1.PodCondition { return f.conds }

// resizedPod has an app container resized to 200m/400m, a sidecar and a
// plain init container.
var resizedPod = func() *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	p := podAlways.DeepCopy()
	p.Generation = 3
	p.Spec.InitContainers = []v1.Container{
		{Name: "init", Image: "busybox", Resources: v1.ResourceRequirements{Requests: rl("cpu", "50m")}},
		{Name: "side", Image: "envoy", RestartPolicy: &always, Resources: v1.ResourceRequirements{Requests: rl("cpu", "10m")}},
	}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: rl("cpu", "200m", "memory", "64Mi", "ephemeral-storage", "1Gi"), Limits: rl("cpu", "400m")}
	return p
}()

func TestComputeResizeFields(t *testing.T) {
	old := v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: rl("cpu", "200m")}
	alloc := resizedPod.Spec.Containers[0].Resources
	sideAlloc := resizedPod.Spec.InitContainers[1].Resources
	pending := v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred, Message: "no room",
		ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(t0)}
	rz := fakeResizes{alloc: map[string]v1.ResourceRequirements{"app": alloc, "side": sideAlloc}, conds: []v1.PodCondition{pending}}
	initDone := exited("init", true, 0, "Completed")
	side := running("side", true)
	tests := []struct {
		name    string
		app     *pod.Container
		act     map[string]pod.Actuated
		wantRes v1.ResourceRequirements
	}{
		{
			name: "running, created with the old resources: those are in effect",
			app:  func() *pod.Container { c := running("app", false); c.Resources = &old; return c }(),
			wantRes: v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi", "ephemeral-storage", "1Gi"),
				Limits: rl("cpu", "200m")},
		},
		{
			name:    "running, resized in place since: the record's",
			app:     func() *pod.Container { c := running("app", false); c.Resources = &old; return c }(),
			act:     map[string]pod.Actuated{"app": {ContainerID: "c-app", Resources: v1.ResourceRequirements{Requests: rl("cpu", "200m", "memory", "64Mi"), Limits: rl("cpu", "400m")}}},
			wantRes: alloc,
		},
		{
			name:    "running, resources unknown (an older agent's): as allocated",
			app:     running("app", false),
			wantRes: alloc,
		},
		{
			name:    "exited: as allocated",
			app:     func() *pod.Container { c := exited("app", false, 1, "Error"); c.Resources = &old; return c }(),
			wantRes: alloc,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rz := rz
			rz.act = tt.act
			s := compute(resizedPod, runtimeStatus(sbReady, tt.app, side, initDone), pod.SyncResult{}, "containerd", nil, rz)
			cs := s.ContainerStatuses[0]
			if diff := cmp.Diff(alloc.Requests, cs.AllocatedResources); diff != "" {
				t.Errorf("allocatedResources (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(&tt.wantRes, cs.Resources); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if ic := s.InitContainerStatuses[0]; ic.AllocatedResources != nil || ic.Resources != nil {
				t.Errorf("plain init container has resize fields: %+v %+v", ic.AllocatedResources, ic.Resources)
			}
			if sc := s.InitContainerStatuses[1]; !cmp.Equal(sc.AllocatedResources, sideAlloc.Requests) || sc.Resources == nil {
				t.Errorf("sidecar allocatedResources %v resources %v", sc.AllocatedResources, sc.Resources)
			}
			last := s.Conditions[len(s.Conditions)-1]
			if diff := cmp.Diff(pending, last); diff != "" {
				t.Errorf("last condition (-want +got):\n%s", diff)
			}
			if s.Conditions[len(s.Conditions)-2].Type != v1.PodScheduled {
				t.Errorf("the resize condition is not after the others: %+v", s.Conditions)
			}
		})
	}
	// Without the allocation manager, or for a container not yet made:
	// nothing.
	s := Compute(resizedPod, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{}, "containerd", nil)
	if cs := s.ContainerStatuses[0]; cs.AllocatedResources != nil || cs.Resources != nil {
		t.Errorf("Compute without resizes set resize fields")
	}
	s = compute(resizedPod, runtimeStatus(sbReady), pod.SyncResult{}, "containerd", nil, rz)
	if cs := s.ContainerStatuses[0]; cs.AllocatedResources != nil || cs.Resources != nil {
		t.Errorf("a container without an instance has resize fields")
	}
}

// The published status keeps the resize conditions' own transition
// times; a condition reported by an earlier status and no longer set is
// gone.
func TestManagerPublishesResizeConditions(t *testing.T) {
	inProgress := v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: 3,
		LastTransitionTime: metav1.NewTime(t0), LastProbeTime: metav1.NewTime(t0)}
	rz := &fakeResizes{alloc: map[string]v1.ResourceRequirements{"app": resizedPod.Spec.Containers[0].Resources},
		conds: []v1.PodCondition{inProgress}}
	m, _, clk := newManagerWith(t, Config{Resizes: rz})
	p := resizedPod.DeepCopy()
	st := runtimeStatus(sbReady, running("app", false))
	clk.Step(time.Hour)
	m.Synced(p, st, pod.SyncResult{})
	s := m.last[p.UID]
	c := findCondition(s.Conditions, v1.PodResizeInProgress)
	if c == nil || !c.LastTransitionTime.Time.Equal(t0) || c.ObservedGeneration != 3 {
		t.Fatalf("PodResizeInProgress %+v, want the allocation manager's", c)
	}
	if s.ContainerStatuses[0].AllocatedResources == nil {
		t.Error("no allocatedResources published")
	}
	rz.conds = nil
	m.Synced(p, st, pod.SyncResult{})
	if c := findCondition(m.last[p.UID].Conditions, v1.PodResizeInProgress); c != nil {
		t.Errorf("PodResizeInProgress %+v still published", c)
	}
}
