package eviction

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

type fakeObserver struct{ obs map[string]Observation }

func (f *fakeObserver) Observe(context.Context) (map[string]Observation, error) { return f.obs, nil }

type fakeStats map[types.UID]Usage

func (f fakeStats) PodUsage(context.Context) (map[types.UID]Usage, error) { return f, nil }

const mi = 1 << 20

func mkPod(name string, memReq string, prio int32, static bool) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Annotations: map[string]string{}},
		Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "main"}}}}
	if memReq != "" {
		q := resource.MustParse(memReq)
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: q}
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: q}
	}
	if static {
		p.Annotations["kubernetes.io/config.source"] = "file"
	}
	return p
}

type evicted struct {
	pod   string
	grace int64
	msg   string
}

func setup(t *testing.T, th []Threshold, pods []*v1.Pod, stats fakeStats) (*Manager, *fakeObserver, *clocktesting.FakeClock, *[]evicted) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	obs := &fakeObserver{obs: map[string]Observation{MemoryAvailable: {Available: 1000 * mi, Capacity: 4000 * mi}}}
	var out []evicted
	m, err := New(Config{Thresholds: th, Observer: obs, Stats: stats, Clock: clk, Logger: zap.NewNop(), MaxPodGracePeriod: 10,
		ActivePods: func() []*v1.Pod {
			// As the loop: an evicted pod is no longer active.
			var active []*v1.Pod
			for _, p := range pods {
				gone := false
				for _, e := range out {
					gone = gone || e.pod == p.Name
				}
				if !gone {
					active = append(active, p)
				}
			}
			return active
		},
		Evict: func(p *v1.Pod, grace int64, msg string) { out = append(out, evicted{p.Name, grace, msg}) }})
	if err != nil {
		t.Fatal(err)
	}
	return m, obs, clk, &out
}

func hard(signal, q string) Threshold {
	v := resource.MustParse(q)
	return Threshold{Signal: signal, Quantity: &v}
}

// Under memory pressure the pod using more than it requests goes first,
// with no grace (hard threshold), one pod per pass; the Guaranteed pod
// within its request and the static pod are kept; the condition holds
// for the transition period after the last crossing.
func TestMemoryPressureEvictsTheOverRequestPodFirst(t *testing.T) {
	guaranteed := mkPod("guaranteed", "500Mi", 0, false)
	hog := mkPod("hog", "", 0, false)
	static := mkPod("static", "", 0, true)
	important := mkPod("important", "", 1000, false)
	stats := fakeStats{
		"guaranteed": {Memory: 400 * mi, Containers: map[string]Usage{"main": {Memory: 400 * mi}}},
		"hog":        {Memory: 900 * mi, Containers: map[string]Usage{"main": {Memory: 900 * mi}}},
		"static":     {Memory: 2000 * mi},
		"important":  {Memory: 50 * mi},
	}
	m, obs, clk, out := setup(t, []Threshold{hard(MemoryAvailable, "500Mi")}, []*v1.Pod{static, guaranteed, important, hog}, stats)
	if p, _ := m.Synchronize(context.Background()); p != nil || m.Pressure(v1.NodeMemoryPressure) {
		t.Fatalf("evicted %v / pressure without a crossing", p)
	}
	obs.obs[MemoryAvailable] = Observation{Available: 300 * mi, Capacity: 4000 * mi}
	if _, err := m.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(*out) != 1 || (*out)[0].pod != "hog" || (*out)[0].grace != 0 {
		t.Fatalf("evictions %+v, want the hog with no grace", *out)
	}
	msg := (*out)[0].msg
	if !strings.Contains(msg, "The node was low on resource: memory. Threshold quantity: 500Mi, available: 300Mi.") ||
		!strings.Contains(msg, "Container main was using 900Mi") {
		t.Fatalf("message %q", msg)
	}
	if !m.Pressure(v1.NodeMemoryPressure) || m.Pressure(v1.NodeDiskPressure) {
		t.Fatal("MemoryPressure not reported (or DiskPressure reported)")
	}
	// Held back while the victim goes; then the next one in order: the
	// pod above its request (however high its priority), then the one
	// within it; the static pod last.
	m.Synchronize(context.Background())
	if len(*out) != 1 {
		t.Fatalf("a second eviction during the cleanup wait: %+v", *out)
	}
	var order []string
	for i := 0; i < 3; i++ {
		clk.Step(cleanupWait)
		m.Synchronize(context.Background())
		order = append(order, (*out)[len(*out)-1].pod)
	}
	if strings.Join(order, ",") != "important,guaranteed,static" {
		t.Fatalf("order after the hog %v: want important, guaranteed, the static pod last", order)
	}
	// Pressure ends the transition period after the last crossing.
	obs.obs[MemoryAvailable] = Observation{Available: 1000 * mi, Capacity: 4000 * mi}
	clk.Step(4 * time.Minute)
	m.Synchronize(context.Background())
	if !m.Pressure(v1.NodeMemoryPressure) {
		t.Fatal("MemoryPressure dropped before the transition period")
	}
	clk.Step(2 * time.Minute)
	if m.Pressure(v1.NodeMemoryPressure) {
		t.Fatal("MemoryPressure kept after the transition period")
	}
}

// A soft threshold evicts only once held for its grace, with the pod's
// grace period bounded by the maximum.
func TestSoftThresholdWaitsForItsGrace(t *testing.T) {
	th := hard(MemoryAvailable, "500Mi")
	th.Grace = time.Minute
	p := mkPod("web", "", 0, false)
	g := int64(30)
	p.Spec.TerminationGracePeriodSeconds = &g
	m, obs, clk, out := setup(t, []Threshold{th}, []*v1.Pod{p}, nil)
	obs.obs[MemoryAvailable] = Observation{Available: 100 * mi, Capacity: 4000 * mi}
	m.Synchronize(context.Background())
	clk.Step(59 * time.Second)
	m.Synchronize(context.Background())
	if len(*out) != 0 || !m.Pressure(v1.NodeMemoryPressure) {
		t.Fatalf("evictions %+v before the soft grace; pressure %v", *out, m.Pressure(v1.NodeMemoryPressure))
	}
	clk.Step(time.Second)
	m.Synchronize(context.Background())
	if len(*out) != 1 || (*out)[0].grace != 10 {
		t.Fatalf("evictions %+v, want one with grace min(30, 10)", *out)
	}
}

// Disk pressure first reclaims node-level disk (image GC); when that is
// enough, no pod is evicted.
func TestDiskPressureReclaimsFirst(t *testing.T) {
	m, obs, _, out := setup(t, []Threshold{{Signal: NodeFsAvailable, Percent: 0.10}}, []*v1.Pod{mkPod("web", "", 0, false)}, nil)
	obs.obs[NodeFsAvailable] = Observation{Available: 5, Capacity: 100}
	reclaimed := 0
	m.cfg.Reclaim = func(context.Context) error {
		reclaimed++
		obs.obs[NodeFsAvailable] = Observation{Available: 50, Capacity: 100}
		return nil
	}
	m.Synchronize(context.Background())
	if reclaimed != 1 || len(*out) != 0 || !m.Pressure(v1.NodeDiskPressure) {
		t.Fatalf("reclaimed %d, evictions %+v, disk pressure %v", reclaimed, *out, m.Pressure(v1.NodeDiskPressure))
	}
}

func TestHostObserver(t *testing.T) {
	proc := t.TempDir()
	os.MkdirAll(filepath.Join(proc, "sys", "kernel"), 0o755)
	os.WriteFile(filepath.Join(proc, "meminfo"), []byte("MemTotal:       4000 kB\nMemFree:  10 kB\nMemAvailable:   1000 kB\n"), 0o644)
	os.WriteFile(filepath.Join(proc, "sys", "kernel", "pid_max"), []byte("32768\n"), 0o644)
	os.WriteFile(filepath.Join(proc, "loadavg"), []byte("0.10 0.20 0.30 2/768 12345\n"), 0o644)
	obs, err := Host{ProcRoot: proc, RootDir: t.TempDir()}.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o := obs[MemoryAvailable]; o.Available != 1000<<10 || o.Capacity != 4000<<10 {
		t.Errorf("memory %+v", o)
	}
	if o := obs[PIDAvailable]; o.Available != 32768-768 || o.Capacity != 32768 {
		t.Errorf("pids %+v", o)
	}
	if o := obs[NodeFsAvailable]; o.Capacity <= 0 || o.Available <= 0 {
		t.Errorf("nodefs %+v", o)
	}
}

func TestRank(t *testing.T) {
	low, high, big := mkPod("low", "", 0, false), mkPod("high", "", 10, false), mkPod("big", "", 0, false)
	usage := map[types.UID]Usage{"low": {Memory: 100 * mi}, "high": {Memory: 900 * mi}, "big": {Memory: 800 * mi}}
	var names []string
	for _, p := range rank([]*v1.Pod{high, low, big}, MemoryAvailable, usage) {
		names = append(names, p.Name)
	}
	// All above their (zero) requests: lower priority first, then the
	// larger excess.
	if strings.Join(names, ",") != "big,low,high" {
		t.Fatalf("memory rank %v", names)
	}
	names = nil
	for _, p := range rank([]*v1.Pod{high, low}, PIDAvailable, usage) {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "low,high" {
		t.Fatalf("pid rank %v", names)
	}
}
