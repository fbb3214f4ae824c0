package kubeapi

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/podsource"
)

// The resize fields are the node's to write: the containers'
// allocatedResources and resources, the PodResizePending and
// PodResizeInProgress conditions (removed once the node no longer
// reports them), with observedGeneration the pod's.
func TestResizeStatusIsWritten(t *testing.T) {
	stored := apiPod("u1", "a", v1.PodRunning)
	stored.Generation = 4
	r := newStatusRig(t, stored)
	cpu := func(q string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(q)} }
	t1 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := running()
	s.ContainerStatuses = []v1.ContainerStatus{{Name: "c", ContainerID: "containerd://c1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		AllocatedResources: cpu("200m"), Resources: &v1.ResourceRequirements{Requests: cpu("100m")}}}
	s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: 4, LastTransitionTime: t1})
	r.w.PodStatus(podsource.MarkAPI(stored), s)
	r.sync(t, "u1")
	got := r.refresh(t, "default", "a")
	cs := got.Status.ContainerStatuses
	if len(cs) != 1 || !cs[0].AllocatedResources.Cpu().Equal(resource.MustParse("200m")) || cs[0].Resources == nil ||
		!cs[0].Resources.Requests.Cpu().Equal(resource.MustParse("100m")) {
		t.Fatalf("API container statuses %+v, want allocatedResources 200m and resources 100m", cs)
	}
	c := findCondition(got.Status.Conditions, v1.PodResizeInProgress)
	if c == nil || c.ObservedGeneration != 4 || !c.LastTransitionTime.Equal(&t1) || got.Status.ObservedGeneration != 4 {
		t.Fatalf("API status %+v, want PodResizeInProgress of generation 4 and observedGeneration 4", got.Status)
	}

	// Applied: the node reports no resize condition any more.
	s = *s.DeepCopy()
	s.Conditions = s.Conditions[:1]
	s.ContainerStatuses[0].Resources.Requests = cpu("200m")
	r.w.PodStatus(podsource.MarkAPI(got), s)
	r.sync(t, "u1")
	got = r.refresh(t, "default", "a")
	if c := findCondition(got.Status.Conditions, v1.PodResizeInProgress); c != nil {
		t.Fatalf("PodResizeInProgress %+v left in the API", c)
	}
	if !got.Status.ContainerStatuses[0].Resources.Requests.Cpu().Equal(resource.MustParse("200m")) {
		t.Fatalf("API resources %+v, want 200m", got.Status.ContainerStatuses[0].Resources)
	}
}

// A resize condition keeps the API's transition time while its reason
// stays; a new reason takes the node's.
func TestMergedResizeConditionTimes(t *testing.T) {
	t1 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t2 := metav1.NewTime(t1.Add(time.Hour))
	old := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred, LastTransitionTime: t1}}}
	same := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred, LastTransitionTime: t2}}}
	if c := merged(old, same, 1).Conditions[0]; !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("same reason: transition %v, want the API's %v", c.LastTransitionTime, t1)
	}
	other := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonInfeasible, LastTransitionTime: t2}}}
	if c := merged(old, other, 1).Conditions[0]; !c.LastTransitionTime.Equal(&t2) {
		t.Errorf("new reason: transition %v, want the node's %v", c.LastTransitionTime, t2)
	}
}
