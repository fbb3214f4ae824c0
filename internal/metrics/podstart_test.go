package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

// observed is one histogram's count and sum.
type observed struct {
	Count uint64
	Sum   float64
}

// podStarts reads the pod start histograms by "name{label=value}".
func podStarts(t *testing.T, m *Metrics) map[string]observed {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]observed{}
	for _, mf := range families {
		switch mf.GetName() {
		case "kubelet_pod_start_duration_seconds", "kubelet_pod_start_sli_duration_seconds", "kubelet_pod_start_total_duration_seconds":
		case "kubelet_first_network_pod_start_sli_duration_seconds":
			out[mf.GetName()] = observed{Sum: mf.GetMetric()[0].GetGauge().GetValue()}
			continue
		default:
			continue
		}
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			out[key] = observed{mt.GetHistogram().GetSampleCount(), mt.GetHistogram().GetSampleSum()}
		}
	}
	return out
}

func startPod(name string, created time.Time, hostNetwork bool) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + name), Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.PodSpec{HostNetwork: hostNetwork, Containers: []v1.Container{{Name: "a"}, {Name: "b"}}}}
}

// statuses of a two-container pod.
var (
	pending = v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		{Name: "b", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
	}}
	halfRunning = v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
		{Name: "b", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
	}}
	allRunning = v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
		{Name: "b", State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
	}}
)

// A pod created 10s before the agent saw it, which pulled for 20s (two
// pulls overlapping, and a failed one before), ran its first container
// 30s after being seen and all 40s after: start 30s, total 50s, SLI 30s —
// each observed once, whatever statuses follow.
func TestPodStartObservedOnceLessPulls(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	m := New(clk)
	p := startPod("web", t0.Add(-10*time.Second), false)
	m.PodStart.Status(p, pending)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	m.PodStart.ImagePull(p.UID, at(time.Second), at(2*time.Second), errors.New("registry down"))
	m.PodStart.ImagePull(p.UID, at(5*time.Second), at(20*time.Second), nil)
	m.PodStart.ImagePull(p.UID, at(8*time.Second), at(21*time.Second), nil)
	m.PodStart.ImagePull("other", at(0), at(30*time.Second), nil) // not this pod's
	clk.SetTime(at(30 * time.Second))
	m.PodStart.Status(p, halfRunning)
	clk.SetTime(at(40 * time.Second))
	m.PodStart.Status(p, allRunning)
	clk.SetTime(at(50 * time.Second))
	m.PodStart.Status(p, allRunning)
	m.PodStart.Status(p, halfRunning) // a restart
	m.PodStart.Status(p, allRunning)
	want := map[string]observed{
		"kubelet_pod_start_duration_seconds":                   {1, 30},
		"kubelet_pod_start_total_duration_seconds":             {1, 50},
		"kubelet_pod_start_sli_duration_seconds":               {1, 30},
		"kubelet_first_network_pod_start_sli_duration_seconds": {0, 30},
	}
	if diff := cmp.Diff(want, podStarts(t, m)); diff != "" {
		t.Errorf("pod start metrics (-want +got):\n%s", diff)
	}
}

// Pods first published Running (adopted after a restart) or over are not
// observed; a static pod (no creationTimestamp) is measured from when the
// agent first saw it; only the first pod off the host network is marked;
// a pod removed and seen again starts afresh.
func TestPodStartWhichPods(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	m := New(clk)
	adopted := startPod("adopted", t0.Add(-time.Hour), false)
	m.PodStart.Status(adopted, allRunning)
	refused := startPod("refused", t0, false)
	m.PodStart.Status(refused, v1.PodStatus{Phase: v1.PodFailed, Reason: "OutOfcpu"})
	m.PodStart.Status(refused, allRunning) // cannot happen; not a start anyway

	host := startPod("host", t0, true)
	static := startPod("static", time.Time{}, false)
	m.PodStart.Status(host, pending)
	m.PodStart.Status(static, pending)
	clk.Step(4 * time.Second)
	m.PodStart.Status(host, allRunning)
	m.PodStart.Status(static, allRunning)

	m.PodStart.Removed(static.UID)
	m.PodStart.Status(static, pending)
	clk.Step(2 * time.Second)
	m.PodStart.Status(static, allRunning)
	want := map[string]observed{
		"kubelet_pod_start_duration_seconds":                   {3, 10},
		"kubelet_pod_start_total_duration_seconds":             {3, 10},
		"kubelet_pod_start_sli_duration_seconds":               {3, 10},
		"kubelet_first_network_pod_start_sli_duration_seconds": {0, 4}, // static's first start, not host's
	}
	if diff := cmp.Diff(want, podStarts(t, m)); diff != "" {
		t.Errorf("pod start metrics (-want +got):\n%s", diff)
	}
}
