package podsource

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Pods handed to the Mux.
var (
	muxPodA = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "uid-a"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx:1.25"}}}}
	muxPodB = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default", UID: "uid-b"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "redis:7"}}}}
	muxPodAAnnotated = func() *v1.Pod {
		p := muxPodA.DeepCopy()
		p.Annotations = map[string]string{"note": "changed"}
		return p
	}()
)

// updateView is what a test compares of a pod.Update.
type updateView struct {
	Op     pod.Op
	Source string
	UIDs   []types.UID
}

// drainUpdates returns what the Mux has queued, without blocking.
func drainUpdates(m *Mux) []updateView {
	var out []updateView
	for {
		select {
		case u := <-m.Updates():
			v := updateView{Op: u.Op, Source: u.Source}
			for _, p := range u.Pods {
				v.UIDs = append(v.UIDs, p.UID)
			}
			out = append(out, v)
		default:
			return out
		}
	}
}

func TestMuxSet(t *testing.T) {
	type step struct {
		source string
		pods   []*v1.Pod
		want   []updateView
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "new pods are added",
			steps: []step{{source: "file", pods: []*v1.Pod{muxPodA},
				want: []updateView{{pod.OpAdd, "file", []types.UID{"uid-a"}}}}},
		},
		{
			name: "identical set again sends nothing",
			steps: []step{
				{source: "file", pods: []*v1.Pod{muxPodA, muxPodB},
					want: []updateView{{pod.OpAdd, "file", []types.UID{"uid-a", "uid-b"}}}},
				{source: "file", pods: []*v1.Pod{muxPodA.DeepCopy(), muxPodB.DeepCopy()}},
			},
		},
		{
			name: "changed annotation with the same UID is an update",
			steps: []step{
				{source: "file", pods: []*v1.Pod{muxPodA, muxPodB},
					want: []updateView{{pod.OpAdd, "file", []types.UID{"uid-a", "uid-b"}}}},
				{source: "file", pods: []*v1.Pod{muxPodAAnnotated, muxPodB},
					want: []updateView{{pod.OpUpdate, "file", []types.UID{"uid-a"}}}},
			},
		},
		{
			name: "dropped pod is removed",
			steps: []step{
				{source: "file", pods: []*v1.Pod{muxPodA, muxPodB},
					want: []updateView{{pod.OpAdd, "file", []types.UID{"uid-a", "uid-b"}}}},
				{source: "file", pods: []*v1.Pod{muxPodB},
					want: []updateView{{pod.OpRemove, "file", []types.UID{"uid-a"}}}},
				{source: "file", pods: nil,
					want: []updateView{{pod.OpRemove, "file", []types.UID{"uid-b"}}}},
			},
		},
		{
			name: "remove, add and update in one set, removes first",
			steps: []step{
				{source: "file", pods: []*v1.Pod{muxPodA},
					want: []updateView{{pod.OpAdd, "file", []types.UID{"uid-a"}}}},
				{source: "file", pods: []*v1.Pod{muxPodB},
					want: []updateView{{pod.OpRemove, "file", []types.UID{"uid-a"}}, {pod.OpAdd, "file", []types.UID{"uid-b"}}}},
				{source: "file", pods: []*v1.Pod{muxPodAAnnotated, func() *v1.Pod {
					p := muxPodB.DeepCopy()
					p.Labels = map[string]string{"x": "y"}
					return p
				}()},
					want: []updateView{{pod.OpAdd, "file", []types.UID{"uid-a"}}, {pod.OpUpdate, "file", []types.UID{"uid-b"}}}},
			},
		},
		{
			name: "sources are diffed separately",
			steps: []step{
				{source: "file", pods: []*v1.Pod{muxPodA},
					want: []updateView{{pod.OpAdd, "file", []types.UID{"uid-a"}}}},
				{source: "api", pods: []*v1.Pod{muxPodB},
					want: []updateView{{pod.OpAdd, "api", []types.UID{"uid-b"}}}},
				{source: "api", pods: nil,
					want: []updateView{{pod.OpRemove, "api", []types.UID{"uid-b"}}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMux(clock.RealClock{}, "file", "api")
			for i, s := range tt.steps {
				m.Set(context.Background(), s.source, s.pods)
				if diff := cmp.Diff(s.want, drainUpdates(m)); diff != "" {
					t.Fatalf("step %d: updates (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestMuxSeenAll(t *testing.T) {
	m := NewMux(clock.RealClock{}, "file", "api")
	if m.SeenAll() {
		t.Fatal("SeenAll() = true before any Set")
	}
	m.Set(context.Background(), "file", nil)
	if m.SeenAll() {
		t.Fatal("SeenAll() = true with only the file source seen")
	}
	if got := drainUpdates(m); len(got) != 0 {
		t.Errorf("an empty first set sent %v, want nothing", got)
	}
	m.Set(context.Background(), "api", []*v1.Pod{muxPodA})
	<-m.Updates() // the consumer takes the ADD
	if !m.SeenAll() {
		t.Fatal("SeenAll() = false after every source was set and read")
	}
}

func TestMuxSeenAllWithoutSources(t *testing.T) {
	if !NewMux(clock.RealClock{}).SeenAll() {
		t.Error("SeenAll() = false for a Mux that expects no source")
	}
}

func TestMuxSetReturnsWhenContextEnds(t *testing.T) {
	m := NewMux(clock.RealClock{}, "file")
	for len(m.out) < cap(m.out) {
		m.out <- pod.Update{} // a stream nobody reads
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A Set blocked on the full stream despite the ended context would
	// hang here and fail the test by timeout.
	m.Set(ctx, "file", []*v1.Pod{muxPodB})
	m.mu.Lock()
	seen := m.seen["file"]
	m.mu.Unlock()
	if !seen {
		t.Error("the source's set must be recorded even when its updates could not be sent")
	}
}

// An adopted pod's ADD still in the channel keeps SeenAll false, so
// housekeeping cannot take the pod for an orphan.
func TestMuxSeenAllWaitsForTheConsumer(t *testing.T) {
	m := NewMux(clock.RealClock{}, "file")
	m.Set(context.Background(), "file", []*v1.Pod{muxPodA})
	if m.SeenAll() {
		t.Fatal("SeenAll() = true while an ADD is not consumed")
	}
	<-m.Updates()
	if !m.SeenAll() {
		t.Fatal("SeenAll() = false after the consumer took every delta")
	}
}

// A static pod carries the time its source first handed it over, as the
// kubelet's config.seen: kept through updates of the same UID, new for a
// new UID; API pods get none.
func TestMuxStampsConfigSeen(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 3, 12, 0, 0, 5, time.UTC))
	m := NewMux(clk, "file", "api")
	first := muxPodA.DeepCopy()
	first.Annotations = nil // the shared pod was stamped by other tests
	m.Set(context.Background(), "file", []*v1.Pod{first})
	drainUpdates(m)
	want := "2026-12-03T12:00:00.000000005Z"
	if got := first.Annotations[ConfigSeenAnnotation]; got != want {
		t.Fatalf("config.seen of a new static pod = %q, want %q", got, want)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	changed := muxPodA.DeepCopy()
	changed.Annotations = nil
	changed.Spec.Containers[0].Image = "nginx:1.26"
	m.Set(context.Background(), "file", []*v1.Pod{changed})
	drainUpdates(m)
	if got := changed.Annotations[ConfigSeenAnnotation]; got != want {
		t.Errorf("config.seen after an update of the same UID = %q, want %q (first seen)", got, want)
	}
	other := muxPodB.DeepCopy()
	other.Annotations = nil
	m.Set(context.Background(), "file", []*v1.Pod{changed, other})
	drainUpdates(m)
	if got := other.Annotations[ConfigSeenAnnotation]; got != "2026-12-03T12:01:00.000000005Z" {
		t.Errorf("config.seen of a pod first seen a minute later = %q", got)
	}
	api := muxPodB.DeepCopy()
	api.UID, api.Annotations = "uid-api", nil
	m.Set(context.Background(), "api", []*v1.Pod{api})
	drainUpdates(m)
	if _, ok := api.Annotations[ConfigSeenAnnotation]; ok {
		t.Errorf("an API pod got config.seen: %v", api.Annotations)
	}
}
