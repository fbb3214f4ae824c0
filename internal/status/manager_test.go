package status

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
	return newManagerWith(t, Config{HostIP: "192.168.1.10"})
}

// newManagerWith is a Manager over a new directory and fake clock with
// cfg's optional parts.
func newManagerWith(t *testing.T, cfg Config) (*Manager, string, *testclock.FakeClock) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "status")
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	log := zaptest.NewLogger(t)
	cfg.Dir, cfg.Node, cfg.RuntimeName, cfg.Clock, cfg.Logger = dir, "node1", "containerd", clk, log
	cfg.Events = NewEvents(dir, "node1", nil, clk, log)
	m, err := NewManager(cfg)
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

func listOne(t *testing.T, m *Manager, dir string) *v1.Pod {
	t.Helper()
	m.flush()
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
	m.flush()
	if diff := cmp.Diff([]string{"default_web.json"}, dirEntries(t, dir)); diff != "" {
		t.Fatalf("status directory (-want +got):\n%s", diff)
	}
	got := listOne(t, m, dir)
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
	if got := listOne(t, m, dir).Status; got.Phase != v1.PodPending {
		t.Fatalf("phase = %q, want Pending", got.Phase)
	}

	clk.Step(30 * time.Second)
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})
	got := listOne(t, m, dir).Status
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
	m.flush()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	m.Synced(mgrPodA, st, pod.SyncResult{})
	m.flush()
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("an unchanged status was written again (stat error %v)", err)
	}
}

func TestManagerRefused(t *testing.T) {
	m, dir, clk := newManager(t)
	m.Refused(mgrPodA, "OutOfcpu", "Node didn't have enough resource: cpu")
	got := listOne(t, m, dir).Status
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
	m.flush()
	if diff := cmp.Diff([]string{"kube-system_db.json"}, dirEntries(t, dir)); diff != "" {
		t.Errorf("status directory after Removed (-want +got):\n%s", diff)
	}
	// Removing again, or a pod never published, is harmless.
	m.Removed(mgrPodA)

	// A pod published again after removal gets a new start time.
	clk.Step(time.Hour)
	m.Synced(mgrPodA, runtimeStatus(nil), pod.SyncResult{})
	m.flush()
	if diff := cmp.Diff([]string{"default_web.json", "kube-system_db.json"}, dirEntries(t, dir)); diff != "" {
		t.Errorf("status directory after republish (-want +got):\n%s", diff)
	}
	m.flush()
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
	m.flush()
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

// A pod is published on admission, before any sync: Pending, its
// container ContainerCreating, startTime the admission time, which the
// first sync (seconds later) keeps.
func TestManagerAdmittedBeforeFirstSync(t *testing.T) {
	m, dir, clk := newManager(t)
	admittedAt := clk.Now()
	m.Admitted(mgrPodA, nil)
	got := listOne(t, m, dir)
	if got.Status.Phase != v1.PodPending {
		t.Errorf("phase = %s, want Pending", got.Status.Phase)
	}
	if w := got.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
		t.Errorf("container state = %+v, want waiting ContainerCreating", got.Status.ContainerStatuses[0].State)
	}
	if got.Status.StartTime == nil || !got.Status.StartTime.Time.Equal(admittedAt) {
		t.Errorf("startTime = %v, want the admission time %v", got.Status.StartTime, admittedAt)
	}
	clk.Step(18 * time.Second)
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})
	got = listOne(t, m, dir)
	if got.Status.Phase != v1.PodRunning || !got.Status.StartTime.Time.Equal(admittedAt) {
		t.Errorf("after the first sync: phase %s, startTime %v; want Running and the admission time", got.Status.Phase, got.Status.StartTime)
	}
}

// A pod being removed carries a deletionTimestamp (Terminating) until its
// status is removed.
func TestManagerTerminating(t *testing.T) {
	m, dir, clk := newManager(t)
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})
	if listOne(t, m, dir).DeletionTimestamp != nil {
		t.Fatal("deletionTimestamp set before termination")
	}
	clk.Step(time.Second)
	m.Terminating(mgrPodA, 30)
	got := listOne(t, m, dir)
	if got.DeletionTimestamp == nil || !got.DeletionTimestamp.Time.Equal(clk.Now()) ||
		got.DeletionGracePeriodSeconds == nil || *got.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("deletion = %v / %v, want now and 30s", got.DeletionTimestamp, got.DeletionGracePeriodSeconds)
	}
	// A sync while terminating keeps the mark.
	m.Synced(mgrPodA, runtimeStatus(sbReady, exited("app", false, 0, "Completed")), pod.SyncResult{})
	if listOne(t, m, dir).DeletionTimestamp == nil {
		t.Error("a later publish lost the deletionTimestamp")
	}
	m.Removed(mgrPodA)
	m.flush()
	if pods, _ := List(dir); len(pods) != 0 {
		t.Errorf("status left after removal: %d pods", len(pods))
	}
}

// While the runtime is unreachable every pod shows Unknown without an IP
// and the node state names the error; health back restores the statuses.
func TestManagerRuntimeUnreachable(t *testing.T) {
	m, dir, _ := newManager(t)
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})
	before := listOne(t, m, dir)
	if before.Status.Phase != v1.PodRunning || before.Status.PodIP == "" {
		t.Fatalf("before: phase %s ip %q, want Running with an IP", before.Status.Phase, before.Status.PodIP)
	}
	m.RuntimeHealth(errors.New("connection refused"))
	got := listOne(t, m, dir)
	if got.Status.Phase != v1.PodUnknown || got.Status.Reason != "RuntimeUnreachable" || got.Status.PodIP != "" ||
		!strings.Contains(got.Status.Message, "connection refused") || !strings.Contains(got.Status.Message, "last known phase Running") {
		t.Errorf("while unreachable: %+v", got.Status)
	}
	for _, c := range got.Status.Conditions {
		if c.Type == v1.PodReady && c.Status != v1.ConditionUnknown {
			t.Errorf("Ready = %s, want Unknown", c.Status)
		}
	}
	node, err := ReadNodeState(dir)
	if err != nil || node == nil || node.RuntimeReachable || !strings.Contains(node.Message, "connection refused") {
		t.Errorf("node state = %+v, %v; want unreachable with the error", node, err)
	}
	m.RuntimeHealth(nil)
	// Back, but nothing has looked at the runtime yet: still Unknown.
	if got := listOne(t, m, dir); got.Status.Phase != v1.PodUnknown || !strings.Contains(got.Status.Message, "waiting for the pod's first sync") {
		t.Errorf("after recovery, before a sync: phase %s message %q; want Unknown waiting for a sync", got.Status.Phase, got.Status.Message)
	}
	if node, _ := ReadNodeState(dir); node != nil {
		t.Errorf("node state after recovery = %+v, want none", node)
	}
	// The first sync (even with the same outcome as before) publishes.
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})
	if got := listOne(t, m, dir); got.Status.Phase != v1.PodRunning || got.Status.PodIP != before.Status.PodIP {
		t.Errorf("after the first sync: phase %s ip %q, want Running with its IP", got.Status.Phase, got.Status.PodIP)
	}
}

// A pod re-added while it was being removed is no longer Terminating.
func TestManagerReaddedWhileTerminating(t *testing.T) {
	m, dir, _ := newManager(t)
	m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})
	m.Terminating(mgrPodA, 30)
	m.Admitted(mgrPodA, runtimeStatus(sbReady, running("app", false)))
	if got := listOne(t, m, dir); got.DeletionTimestamp != nil {
		t.Fatalf("re-added pod still marked for deletion at %v", got.DeletionTimestamp)
	}
}

// The loop and a worker publish concurrently: whatever the interleaving,
// a removed pod's file does not come back.
func TestManagerRemovedStaysRemoved(t *testing.T) {
	for i := 0; i < 500; i++ {
		m, dir, _ := newManager(t)
		m.Synced(mgrPodA, runtimeStatus(sbReady, running("app", false)), pod.SyncResult{})
		done := make(chan struct{})
		go func() {
			m.RuntimeHealth(errors.New("down"))
			close(done)
		}()
		m.Removed(mgrPodA)
		<-done
		m.flush()
		if pods, _ := List(dir); len(pods) != 0 {
			t.Fatalf("iteration %d: a removed pod's status came back", i)
		}
	}
}

// A pod whose name is too long for a file name is published all the same.
func TestManagerLongName(t *testing.T) {
	m, dir, _ := newManager(t)
	p := mgrPodA.DeepCopy()
	p.Name = strings.Repeat("a", 240) + "-node1"
	m.Admitted(p, nil)
	m.Event(p, v1.EventTypeWarning, "Failed", "boom")
	if got := listOne(t, m, dir); got.Name != p.Name {
		t.Fatalf("published name %q", got.Name)
	}
	m.flush()
	evs, err := ReadEvents(dir, p)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events = %v, %v; want the one event", evs, err)
	}
}

// A refused pod never reached the runtime: an outage does not make it
// Unknown, before or after the runtime's return.
func TestManagerRefusedPodUnaffectedByOutage(t *testing.T) {
	m, dir, _ := newManager(t)
	m.Refused(mgrPodA, "OutOfcpu", "Node didn't have enough resource: cpu")
	m.RuntimeHealth(errors.New("down"))
	if got := listOne(t, m, dir); got.Status.Phase != v1.PodFailed || got.Status.Reason != "OutOfcpu" {
		t.Fatalf("refused pod during an outage: %s/%s, want Failed/OutOfcpu", got.Status.Phase, got.Status.Reason)
	}
	m.RuntimeHealth(nil)
	if got := listOne(t, m, dir); got.Status.Phase != v1.PodFailed {
		t.Fatalf("refused pod after the outage: %s, want Failed", got.Status.Phase)
	}
}

// An evicted pod is Failed/Evicted with the message, a DisruptionTarget
// condition (TerminationByKubelet) and an event; a sync that ends after
// the eviction does not publish over it.
func TestManagerEvicted(t *testing.T) {
	m, dir, _ := newManager(t)
	st := runtimeStatus(sbReady, running("app", false))
	m.Synced(mgrPodA, st, pod.SyncResult{})
	m.Evicted(mgrPodA, "Evicted", "The node was low on resource: memory.", nil)
	m.Synced(mgrPodA, st, pod.SyncResult{})
	got := listOne(t, m, dir)
	if got.Status.Phase != v1.PodFailed || got.Status.Reason != "Evicted" || got.Status.Message != "The node was low on resource: memory." {
		t.Fatalf("status %s %s %q, want Failed Evicted with the message", got.Status.Phase, got.Status.Reason, got.Status.Message)
	}
	if len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].Ready {
		t.Fatalf("container statuses %+v: want the last one, not ready", got.Status.ContainerStatuses)
	}
	found := false
	for _, c := range got.Status.Conditions {
		found = found || c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue && c.Reason == v1.PodReasonTerminationByKubelet &&
			c.Message == "The node was low on resource: memory."
	}
	if !found {
		t.Fatalf("conditions %+v: want DisruptionTarget (TerminationByKubelet)", got.Status.Conditions)
	}
	m.flush()
	evs, err := ReadEvents(dir, mgrPodA)
	if err != nil || len(evs) != 1 || evs[0].Reason != "Evicted" {
		t.Fatalf("events %+v %v", evs, err)
	}
}

// Pod IPs as the kubelet reports them: a hostNetwork pod's are the node's;
// a pod whose sandboxes are all stopped (or gone) keeps the IPs it had
// (the PLEG's getPodIPs), until a ready sandbox shows others; while the
// runtime is unreachable the file shows none.
func TestManagerPodIPs(t *testing.T) {
	hostNet := mgrPodA.DeepCopy()
	hostNet.Spec.HostNetwork = true
	never := mgrPodA.DeepCopy()
	never.Spec.RestartPolicy = v1.RestartPolicyNever
	sb2 := &pod.Sandbox{ID: "sb2", State: runtimeapi.PodSandboxState_SANDBOX_READY, IP: "10.88.0.9", IPs: []string{"10.88.0.9"}}
	sbNoIP := &pod.Sandbox{ID: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY}
	sandboxIPs := []v1.PodIP{{IP: "10.88.0.5"}, {IP: "fd00::5"}}
	run := func(p *v1.Pod, sb *pod.Sandbox) func(m *Manager) {
		return func(m *Manager) { m.Synced(p, runtimeStatus(sb, running("app", false)), pod.SyncResult{}) }
	}
	exit := func(p *v1.Pod, sb *pod.Sandbox) func(m *Manager) {
		return func(m *Manager) { m.Synced(p, runtimeStatus(sb, exited("app", false, 0, "")), pod.SyncResult{}) }
	}

	tests := []struct {
		name    string
		pod     *v1.Pod
		steps   []func(m *Manager)
		wantIPs []v1.PodIP
	}{
		{name: "hostNetwork: the node's IP on admission", pod: hostNet,
			steps: []func(m *Manager){func(m *Manager) { m.Admitted(hostNet, nil) }}, wantIPs: []v1.PodIP{{IP: "192.168.1.10"}}},
		{name: "hostNetwork: the node's IP while running", pod: hostNet,
			steps: []func(m *Manager){run(hostNet, sbReady)}, wantIPs: []v1.PodIP{{IP: "192.168.1.10"}}},
		{name: "hostNetwork: the node's IP when refused", pod: hostNet,
			steps: []func(m *Manager){func(m *Manager) { m.Refused(hostNet, "OutOfcpu", "no cpu") }}, wantIPs: []v1.PodIP{{IP: "192.168.1.10"}}},
		{name: "the sandbox's IPs while it is ready", pod: mgrPodA,
			steps: []func(m *Manager){run(mgrPodA, sbReady)}, wantIPs: sandboxIPs},
		{name: "a stopped sandbox: the IPs it had", pod: never,
			steps: []func(m *Manager){run(never, sbReady), exit(never, sbDead)}, wantIPs: sandboxIPs},
		{name: "sandbox removed: the IPs it had", pod: never,
			steps: []func(m *Manager){run(never, sbReady), exit(never, nil)}, wantIPs: sandboxIPs},
		{name: "deleted pod's final status: the IPs it had", pod: mgrPodA,
			steps: []func(m *Manager){run(mgrPodA, sbReady), func(m *Manager) { m.Terminated(mgrPodA, runtimeStatus(sbDead)) }}, wantIPs: sandboxIPs},
		{name: "a new sandbox's IPs replace them", pod: mgrPodA,
			steps: []func(m *Manager){run(mgrPodA, sbReady), exit(mgrPodA, sbDead), run(mgrPodA, sb2)}, wantIPs: []v1.PodIP{{IP: "10.88.0.9"}}},
		{name: "a ready sandbox without an IP: none", pod: mgrPodA,
			steps: []func(m *Manager){run(mgrPodA, sbReady), run(mgrPodA, sbNoIP)}},
		{name: "never had one: none", pod: never,
			steps: []func(m *Manager){exit(never, sbDead)}},
		{name: "published again after removal: none kept", pod: never,
			steps: []func(m *Manager){run(never, sbReady), func(m *Manager) { m.Removed(never) }, exit(never, sbDead)}},
		{name: "runtime unreachable: none shown", pod: never,
			steps: []func(m *Manager){run(never, sbReady), exit(never, sbDead), func(m *Manager) { m.RuntimeHealth(errors.New("down")) }}},
		{name: "runtime back and synced: the IPs it had", pod: never,
			steps: []func(m *Manager){run(never, sbReady), func(m *Manager) { m.RuntimeHealth(errors.New("down")) },
				func(m *Manager) { m.RuntimeHealth(nil) }, exit(never, sbDead)}, wantIPs: sandboxIPs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, dir, _ := newManager(t)
			for _, step := range tt.steps {
				step(m)
			}
			got := listOne(t, m, dir).Status
			if diff := cmp.Diff(tt.wantIPs, got.PodIPs); diff != "" {
				t.Errorf("podIPs (-want +got):\n%s", diff)
			}
			wantIP := ""
			if len(tt.wantIPs) > 0 {
				wantIP = tt.wantIPs[0].IP
			}
			if got.PodIP != wantIP {
				t.Errorf("podIP = %q, want %q", got.PodIP, wantIP)
			}
		})
	}
}
