package node

import (
	"context"
	"errors"
	"k8s.io/utils/ptr"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"
)

func TestAllocatableSubtractsReservationsAndHardThresholds(t *testing.T) {
	capacity := v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
	}
	hard, err := ParseThresholds(DefaultEvictionHard)
	if err != nil {
		t.Fatal(err)
	}
	got := Allocatable(capacity, []v1.ResourceList{
		{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")},
		{v1.ResourceCPU: resource.MustParse("250m")},
	}, hard)
	want := map[v1.ResourceName]string{
		v1.ResourceCPU:              "3250m",
		v1.ResourceMemory:           "7068Mi", // 8Gi - 1Gi - 100Mi
		v1.ResourceEphemeralStorage: "90Gi",   // 10% held back
		v1.ResourcePods:             "110",
	}
	for name, w := range want {
		q := got[name]
		if q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s = %s, want %s", name, q.String(), w)
		}
	}
	// Never below zero.
	got = Allocatable(v1.ResourceList{v1.ResourceMemory: resource.MustParse("50Mi")}, nil, hard)
	if q := got[v1.ResourceMemory]; q.Sign() != 0 {
		t.Errorf("memory = %s, want 0", q.String())
	}
}

func TestParseThresholdsRefusesNonsense(t *testing.T) {
	for _, bad := range []string{"memory.available", "memory.available<abc", "nodefs.available<120%", "<1Gi"} {
		if _, err := ParseThresholds(bad); err == nil {
			t.Errorf("ParseThresholds(%q) accepted", bad)
		}
	}
}

func newTestManager(t *testing.T, cs *fake.Clientset, runtimeErr *error) (*Manager, *record.FakeRecorder) {
	t.Helper()
	rec := record.NewFakeRecorder(100)
	m, err := New(Config{Client: cs, Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}, Register: true,
		Taints: []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}},
		NodeIP: "192.0.2.10", Hostname: "n1",
		Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}, Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
		RuntimeVersion: "containerd://2.4.2", AgentVersion: "v1.37.2-nodeagent", Port: 10250,
		RuntimeHealth: func() error { return *runtimeErr },
		RuntimeFeatures: func(context.Context) (v1.NodeFeatures, []v1.NodeRuntimeHandler, error) {
			if *runtimeErr != nil {
				return v1.NodeFeatures{}, nil, *runtimeErr
			}
			return v1.NodeFeatures{SupplementalGroupsPolicy: ptr.To(true)},
				[]v1.NodeRuntimeHandler{{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(false)}}}, nil
		},
		Recorder: rec, Clock: testclock.NewFakeClock(time.Unix(1_000_000, 0)), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return m, rec
}

func TestRegisterAndStatusConditions(t *testing.T) {
	cs := fake.NewClientset()
	var runtimeErr error
	m, rec := newTestManager(t, cs, &runtimeErr)
	ctx := context.Background()
	if err := m.registerOnce(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["kubernetes.io/hostname"] != "n1" || len(n.Spec.Taints) != 1 {
		t.Fatalf("registered node = %+v", n.ObjectMeta)
	}
	m.mu.Lock()
	m.uid = "x" // the fake API sets no UID
	m.mu.Unlock()
	m.updateStatus(ctx, true)
	n, _ = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	ready := findCond(n.Status.Conditions, v1.NodeReady)
	if ready.Status != v1.ConditionTrue || ready.Reason != "KubeletReady" {
		t.Fatalf("Ready = %+v", ready)
	}
	if n.Status.NodeInfo.ContainerRuntimeVersion != "containerd://2.4.2" || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 ||
		len(n.Status.Addresses) != 2 || findCond(n.Status.Conditions, v1.NodeMemoryPressure).Reason != "KubeletHasSufficientMemory" {
		t.Fatalf("status = %+v", n.Status)
	}
	if f := n.Status.Features; f == nil || !*f.SupplementalGroupsPolicy || len(n.Status.RuntimeHandlers) != 1 || !*n.Status.RuntimeHandlers[0].Features.RecursiveReadOnlyMounts {
		t.Fatalf("features = %+v, handlers %+v; want the runtime's", f, n.Status.RuntimeHandlers)
	}
	// The runtime goes away: NotReady with the real reason.
	runtimeErr = errors.New("RuntimeReady=false")
	m.updateStatus(ctx, false)
	n, _ = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	ready = findCond(n.Status.Conditions, v1.NodeReady)
	if ready.Status != v1.ConditionFalse || ready.Message != "container runtime not ready: RuntimeReady=false" {
		t.Fatalf("Ready = %+v", ready)
	}
	if n.Status.Features == nil || len(n.Status.RuntimeHandlers) != 1 {
		t.Fatalf("features %+v, handlers %+v; want them kept while the runtime is unreadable", n.Status.Features, n.Status.RuntimeHandlers)
	}
	var reasons []string
	for len(rec.Events) > 0 {
		reasons = append(reasons, <-rec.Events)
	}
	want := []string{"Normal RegisteredNode Node n1 registered", "Normal NodeReady Node n1 status is now: NodeReady", "Normal NodeNotReady Node n1 status is now: NodeNotReady"}
	if len(reasons) != len(want) {
		t.Fatalf("events = %q, want %q", reasons, want)
	}
	for i := range want {
		if reasons[i] != want[i] {
			t.Fatalf("events = %q, want %q", reasons, want)
		}
	}
}

func TestUnchangedStatusIsNotPostedUntilTheReportFrequency(t *testing.T) {
	cs := fake.NewClientset()
	var runtimeErr error
	m, _ := newTestManager(t, cs, &runtimeErr)
	ctx := context.Background()
	if err := m.registerOnce(ctx); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.uid = "x"
	m.mu.Unlock()
	m.updateStatus(ctx, true)
	cs.ClearActions()
	clk := m.cfg.Clock.(*testclock.FakeClock)
	clk.Step(10 * time.Second)
	m.updateStatus(ctx, false)
	for _, a := range cs.Actions() {
		if a.GetVerb() == "patch" {
			t.Fatalf("unchanged status posted after 10s: %v", a)
		}
	}
	clk.Step(5 * time.Minute)
	m.updateStatus(ctx, false)
	patched := false
	for _, a := range cs.Actions() {
		patched = patched || a.GetVerb() == "patch"
	}
	if !patched {
		t.Fatal("status not posted after the report frequency")
	}
}

func TestExistingNodeGetsMissingLabels(t *testing.T) {
	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "old", Labels: map[string]string{"a": "b"}}})
	var runtimeErr error
	m, _ := newTestManager(t, cs, &runtimeErr)
	if err := m.registerOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, _ := cs.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	if n.Labels["a"] != "b" || n.Labels["kubernetes.io/hostname"] != "n1" || m.UID() != "old" {
		t.Fatalf("labels = %v uid %q", n.Labels, m.UID())
	}
}

// OnRegistered hears of the Node once per UID: at registration and when
// it is registered again, not at every observation.
func TestOnRegisteredOncePerNodeUID(t *testing.T) {
	var runtimeErr error
	m, _ := newTestManager(t, fake.NewClientset(), &runtimeErr)
	calls := 0
	m.cfg.OnRegistered = func(types.UID) { calls++ }
	node := func(uid string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: types.UID(uid)}}
	}
	for _, n := range []*v1.Node{node("u1"), node("u1"), node("u2"), node("u2")} {
		m.observe(n)
	}
	if calls != 2 {
		t.Fatalf("OnRegistered called %d times, want 2 (u1, then u2)", calls)
	}
}

// Device plugins' resources join the node's capacity and allocatable,
// and a change of them changes the key the status loop posts on.
func TestExtendedResourcesInStatus(t *testing.T) {
	cs := fake.NewClientset()
	var runtimeErr error
	m, _ := newTestManager(t, cs, &runtimeErr)
	devs := int64(2)
	m.cfg.Extended = func() (v1.ResourceList, v1.ResourceList) {
		return v1.ResourceList{"example.com/r": *resource.NewQuantity(devs, resource.DecimalSI)},
			v1.ResourceList{"example.com/r": *resource.NewQuantity(devs-1, resource.DecimalSI)}
	}
	ctx := context.Background()
	if err := m.registerOnce(ctx); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.uid = "x"
	m.mu.Unlock()
	m.updateStatus(ctx, true)
	n, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	capacity, allocatable := n.Status.Capacity["example.com/r"], n.Status.Allocatable["example.com/r"]
	if capacity.Value() != 2 || allocatable.Value() != 1 || n.Status.Capacity.Cpu().Value() != 2 {
		t.Fatalf("capacity %v allocatable %v", n.Status.Capacity, n.Status.Allocatable)
	}
	key := m.healthKey()
	devs = 3
	if m.healthKey() == key {
		t.Error("a new device does not change the status key")
	}
}
