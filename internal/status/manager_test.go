package status

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Pods published by the Manager tests.
var (
	mgrPodA = &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-a", Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "app", Image: "nginx:1.25"}}},
	}
	mgrPodB = &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "kube-system", UID: "uid-b"},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{Name: "pg", Image: "postgres:16"}}},
	}
)

func newManager(t *testing.T) (*Manager, string, *testclock.FakeClock) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "status")
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	m, err := NewManager(dir, "node1", "containerd", "192.168.1.10", clk, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewManager() error = %v", err)
	}
	return m, dir, clk
}

func dirEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func listOne(t *testing.T, dir string) *v1.Pod {
	t.Helper()
	pods, err := List(dir)
	if err != nil {
		t.Fatalf("List() error = %v", err)
	}
	if len(pods) != 1 {
		t.Fatalf("List() returned %d pods, want 1", len(pods))
	}
	return pods[0]
}

func TestManagerSyncedWritesFile(t *testing.T) {
	m, dir, clk := newManager(t)
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})

	// Only the final file: the temporary file was renamed into place.
	if diff := cmp.Diff([]string{"default_web.json"}, dirEntries(t, dir)); diff != "" {
		t.Fatalf("status directory (-want +got):\n%s", diff)
	}
	got := listOne(t, dir)
	if got.Kind != "Pod" || got.APIVersion != "v1" {
		t.Errorf("TypeMeta = %q %q, want v1 Pod", got.APIVersion, got.Kind)
	}
	if diff := cmp.Diff(mgrPodA.ObjectMeta, got.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mgrPodA.Spec, got.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	s := got.Status
	if s.Phase != v1.PodRunning || s.HostIP != "192.168.1.10" || s.PodIP != "10.88.0.5" {
		t.Errorf("status phase/hostIP/podIP = %q/%q/%q, want Running/192.168.1.10/10.88.0.5", s.Phase, s.HostIP, s.PodIP)
	}
	if diff := cmp.Diff([]v1.HostIP{{IP: "192.168.1.10"}}, s.HostIPs); diff != "" {
		t.Errorf("HostIPs (-want +got):\n%s", diff)
	}
	if s.StartTime == nil || !s.StartTime.Time.Equal(clk.Now()) {
		t.Errorf("StartTime = %v, want %v", s.StartTime, clk.Now())
	}
	for _, c := range s.Conditions {
		if !c.LastTransitionTime.Time.Equal(clk.Now()) {
			t.Errorf("condition %s LastTransitionTime = %v, want %v", c.Type, c.LastTransitionTime, clk.Now())
		}
	}
}

func TestManagerKeepsStartTimeAndTransitionTimes(t *testing.T) {
	m, dir, clk := newManager(t)
	start := clk.Now()
	m.Synced(mgrPodA, runtimeStatus(nil), pod.SyncResult{})
	if got := listOne(t, dir).Status; got.Phase != v1.PodPending {
		t.Fatalf("phase = %q, want Pending", got.Phase)
	}

	clk.Step(30 * time.Second)
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})
	got := listOne(t, dir).Status
	if got.Phase != v1.PodRunning {
		t.Fatalf("phase = %q, want Running", got.Phase)
	}
	if got.StartTime == nil || !got.StartTime.Time.Equal(start) {
		t.Errorf("StartTime = %v, want the first publish's %v", got.StartTime, start)
	}
	wantTransition := map[v1.PodConditionType]time.Time{
		v1.PodScheduled:              start,     // True both times
		v1.PodInitialized:            start,     // True both times
		v1.PodReadyToStartContainers: clk.Now(), // False -> True
		v1.ContainersReady:           clk.Now(), // False -> True
		v1.PodReady:                  clk.Now(), // False -> True
	}
	for _, c := range got.Conditions {
		if want := wantTransition[c.Type]; !c.LastTransitionTime.Time.Equal(want) {
			t.Errorf("condition %s LastTransitionTime = %v, want %v", c.Type, c.LastTransitionTime.Time, want)
		}
	}
}

func TestManagerUnchangedStatusIsNotRewritten(t *testing.T) {
	m, dir, clk := newManager(t)
	st := runtimeStatus(sbReady, running("app", false))
	m.Synced(mgrPodA, st, pod.SyncResult{})
	path := filepath.Join(dir, "default_web.json")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	m.Synced(mgrPodA, st, pod.SyncResult{})
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("an unchanged status was written again (stat error %v)", err)
	}
}

func TestManagerRefused(t *testing.T) {
	m, dir, clk := newManager(t)
	m.Refused(mgrPodA, "OutOfcpu", "Node didn't have enough resource: cpu")
	got := listOne(t, dir).Status
	want := v1.PodStatus{
		Phase:     v1.PodFailed,
		Reason:    "OutOfcpu",
		Message:   "Pod was rejected: Node didn't have enough resource: cpu",
		HostIP:    "192.168.1.10",
		HostIPs:   []v1.HostIP{{IP: "192.168.1.10"}},
		StartTime: &metav1.Time{Time: clk.Now()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused status (-want +got):\n%s", diff)
	}
}

func TestManagerRemoved(t *testing.T) {
	m, dir, clk := newManager(t)
	m.Synced(mgrPodA, runtimeStatus(nil), pod.SyncResult{})
	m.Synced(mgrPodB, runtimeStatus(nil), pod.SyncResult{})
	m.Removed(mgrPodA)
	if diff := cmp.Diff([]string{"kube-system_db.json"}, dirEntries(t, dir)); diff != "" {
		t.Errorf("status directory after Removed (-want +got):\n%s", diff)
	}
	// Removing again, or a pod never published, is harmless.
	m.Removed(mgrPodA)

	// A pod published again after removal gets a new start time.
	clk.Step(time.Hour)
	m.Synced(mgrPodA, runtimeStatus(nil), pod.SyncResult{})
	if diff := cmp.Diff([]string{"default_web.json", "kube-system_db.json"}, dirEntries(t, dir)); diff != "" {
		t.Errorf("status directory after republish (-want +got):\n%s", diff)
	}
	pods, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := pods[0].Status.StartTime; pods[0].Name != "web" || st == nil || !st.Time.Equal(clk.Now()) {
		t.Errorf("republished %s StartTime = %v, want %v", pods[0].Name, st, clk.Now())
	}
}

func TestList(t *testing.T) {
	m, dir, _ := newManager(t)
	m.Synced(mgrPodA, runtimeStatus(nil), pod.SyncResult{})
	m.Synced(mgrPodB, runtimeStatus(nil), pod.SyncResult{})
	// Leftovers that are not published pods are ignored.
	for _, name := range []string{".tmp-default_web.json123", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pods, err := List(dir)
	if err != nil {
		t.Fatalf("List() error = %v", err)
	}
	var got []string
	for _, p := range pods {
		got = append(got, pod.FullName(p))
	}
	if diff := cmp.Diff([]string{"default/web", "kube-system/db"}, got); diff != "" {
		t.Errorf("List() (-want +got):\n%s", diff)
	}

	if err := os.WriteFile(filepath.Join(dir, "broken_pod.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := List(dir); err == nil {
		t.Error("List() of a directory with a corrupt status file returned no error")
	}
	if _, err := List(filepath.Join(dir, "missing")); err == nil {
		t.Error("List() of a missing directory returned no error")
	}
}
