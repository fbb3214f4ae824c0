package stats

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeRuntime answers from fixed lists and records the filters it got.
type fakeRuntime struct {
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
	ctrStats   []*runtimeapi.ContainerStats
	sbStats    []*runtimeapi.PodSandboxStats
	sbStatsErr error
	sbCalls    int
	selectors  []map[string]string
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, in *runtimeapi.ListPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	f.selectors = append(f.selectors, in.Filter.LabelSelector)
	var out []*runtimeapi.PodSandbox
	for _, s := range f.sandboxes {
		if s.State == in.Filter.State.State {
			out = append(out, s)
		}
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

func (f *fakeRuntime) ListContainers(_ context.Context, in *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	f.selectors = append(f.selectors, in.Filter.LabelSelector)
	var out []*runtimeapi.Container
	for _, c := range f.containers {
		if c.State == in.Filter.State.State {
			out = append(out, c)
		}
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func (f *fakeRuntime) ListContainerStats(_ context.Context, in *runtimeapi.ListContainerStatsRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	f.selectors = append(f.selectors, in.Filter.LabelSelector)
	return &runtimeapi.ListContainerStatsResponse{Stats: f.ctrStats}, nil
}

func (f *fakeRuntime) ListPodSandboxStats(_ context.Context, in *runtimeapi.ListPodSandboxStatsRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f.sbCalls++
	f.selectors = append(f.selectors, in.Filter.LabelSelector)
	if f.sbStatsErr != nil {
		return nil, f.sbStatsErr
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: f.sbStats}, nil
}

func (f *fakeRuntime) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest, ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: os.TempDir()}, UsedBytes: u64(5000), InodesUsed: u64(50),
	}}}, nil
}

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func sandbox(id, ns, name, uid string, created time.Time, state runtimeapi.PodSandboxState) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{Id: id, State: state, CreatedAt: created.UnixNano(),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid}}
}

func container(id, sb, name string, created time.Time) *runtimeapi.Container {
	return &runtimeapi.Container{Id: id, PodSandboxId: sb, State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: created.UnixNano(),
		Metadata: &runtimeapi.ContainerMetadata{Name: name}}
}

func ctrStat(id string, at time.Time, cpuNs uint64, nanoCores *runtimeapi.UInt64Value, ws, layer uint64) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes:    &runtimeapi.ContainerAttributes{Id: id},
		Cpu:           &runtimeapi.CpuUsage{Timestamp: at.UnixNano(), UsageCoreNanoSeconds: u64(cpuNs), UsageNanoCores: nanoCores},
		Memory:        &runtimeapi.MemoryUsage{Timestamp: at.UnixNano(), WorkingSetBytes: u64(ws), UsageBytes: u64(ws + 100), RssBytes: u64(ws / 2), AvailableBytes: u64(0)},
		WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: u64(layer), InodesUsed: u64(3)},
	}
}

// fakeHost writes a v1 host tree: /proc and the root cgroups.
func fakeHost(t *testing.T, cpuacct string) Host {
	root := t.TempDir()
	files := map[string]string{
		"proc/stat":                           "cpu  100 0 50 1000 10 0 0 0 0 0\ncpu0 100 0 50 1000 10 0 0 0 0 0\nbtime 1796100000\n",
		"proc/meminfo":                        "MemTotal:       4000000 kB\nMemFree:         1000000 kB\nInactive(file):   500000 kB\nAnonPages:       700000 kB\n",
		"proc/net/dev":                        "Inter-|   Receive |  Transmit\n face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop fifo colls carrier compressed\n    lo: 999 1 0 0 0 0 0 0 999 1 0 0 0 0 0 0\n  eth0: 1000 10 1 0 0 0 0 0 2000 20 2 0 0 0 0 0\nvethab12: 5 1 0 0 0 0 0 0 5 1 0 0 0 0 0 0\n",
		"proc/sys/kernel/pid_max":             "4194304\n",
		"proc/loadavg":                        "0.10 0.20 0.30 2/345 6789\n",
		"cgroup/cpu,cpuacct/cpuacct.usage":    cpuacct,
		"cgroup/memory/memory.usage_in_bytes": "3000000000\n",
		"cgroup/memory/memory.stat":           "cache 1\ntotal_rss 1500000000\ntotal_inactive_file 1000000000\ntotal_pgfault 77\ntotal_pgmajfault 7\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Host{ProcRoot: filepath.Join(root, "proc"), CgroupRoot: filepath.Join(root, "cgroup"), RootDir: root}
}

func newProvider(t *testing.T, rt Runtime, h Host, clk *clocktesting.FakeClock, logsDir string) *Provider {
	t.Helper()
	p, err := New(Config{NodeName: "n1", Runtime: rt, Selector: map[string]string{"managed": "true"}, Host: h, PodLogsDir: logsDir, Clock: clk, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSummaryPodsFromTheRuntime(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	rt := &fakeRuntime{
		sandboxes: []*runtimeapi.PodSandbox{
			sandbox("sb-web-old", "default", "web", "uid-web", t0.Add(-time.Hour), runtimeapi.PodSandboxState_SANDBOX_READY),
			sandbox("sb-web", "default", "web", "uid-web", t0.Add(-time.Minute), runtimeapi.PodSandboxState_SANDBOX_READY),
			sandbox("sb-db", "apps", "db", "uid-db", t0.Add(-2*time.Minute), runtimeapi.PodSandboxState_SANDBOX_READY),
			sandbox("sb-gone", "apps", "gone", "uid-gone", t0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY),
		},
		containers: []*runtimeapi.Container{
			container("c-app", "sb-web", "app", t0.Add(-50*time.Second)),
			container("c-side", "sb-web", "side", t0.Add(-40*time.Second)),
			container("c-db", "sb-db", "db", t0.Add(-time.Minute)),
			container("c-old", "sb-web-old", "app", t0.Add(-time.Hour)),
		},
		ctrStats: []*runtimeapi.ContainerStats{
			ctrStat("c-app", t0, 2e9, u64(5e8), 10<<20, 4096),
			ctrStat("c-side", t0, 1e9, u64(1e8), 2<<20, 0),
			ctrStat("c-db", t0, 7e9, u64(9e8), 30<<20, 8192),
		},
		sbStats: []*runtimeapi.PodSandboxStats{{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb-db"},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:     &runtimeapi.CpuUsage{Timestamp: t0.UnixNano(), UsageCoreNanoSeconds: u64(7500000000), UsageNanoCores: u64(950000000)},
				Memory:  &runtimeapi.MemoryUsage{Timestamp: t0.UnixNano(), WorkingSetBytes: u64(31 << 20)},
				Network: &runtimeapi.NetworkUsage{Timestamp: t0.UnixNano(), DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: u64(123), TxBytes: u64(456)}},
				Process: &runtimeapi.ProcessUsage{ProcessCount: u64(4)},
			},
		}},
	}
	logs := t.TempDir()
	dir := filepath.Join(logs, "default_web_uid-web", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "0.log"), []byte(strings.Repeat("x", 10000)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, rt, fakeHost(t, "123456789\n"), clk, logs)
	s, err := p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, sel := range rt.selectors {
		if sel["managed"] != "true" {
			t.Fatalf("a CRI call without the agent's selector: %v", rt.selectors)
		}
	}
	if len(s.Pods) != 2 || s.Pods[0].PodRef.Name != "db" || s.Pods[1].PodRef.Name != "web" {
		t.Fatalf("pods %+v: want apps/db and default/web (the newest ready sandbox only)", s.Pods)
	}
	db, web := s.Pods[0], s.Pods[1]
	// db: the runtime's pod-level figures, network and processes.
	if *db.CPU.UsageCoreNanoSeconds != 7500000000 || *db.CPU.UsageNanoCores != 950000000 || *db.Memory.WorkingSetBytes != 31<<20 {
		t.Errorf("db's pod figures %+v %+v: want the runtime's", db.CPU, db.Memory)
	}
	if db.Network == nil || *db.Network.RxBytes != 123 || db.ProcessStats == nil || *db.ProcessStats.ProcessCount != 4 {
		t.Errorf("db's network %+v and processes %+v", db.Network, db.ProcessStats)
	}
	if db.PodRef.UID != "uid-db" || !db.StartTime.Time.Equal(t0.Add(-2*time.Minute)) {
		t.Errorf("db's ref %+v start %v", db.PodRef, db.StartTime)
	}
	// web: no pod-level figures from the runtime, so its containers' sum.
	if len(web.Containers) != 2 || web.Containers[0].Name != "app" || web.Containers[1].Name != "side" {
		t.Fatalf("web's containers %+v: want app and side (not the old sandbox's)", web.Containers)
	}
	if *web.CPU.UsageCoreNanoSeconds != 3e9 || *web.CPU.UsageNanoCores != 6e8 || *web.Memory.WorkingSetBytes != 12<<20 {
		t.Errorf("web's pod figures %+v %+v: want the sum of app and side", web.CPU, web.Memory)
	}
	app := web.Containers[0]
	if !app.StartTime.Time.Equal(t0.Add(-50*time.Second)) || *app.Memory.WorkingSetBytes != 10<<20 || app.Memory.AvailableBytes != nil {
		t.Errorf("app %+v %+v: want its start, working set, no available (no limit)", app.StartTime, app.Memory)
	}
	if app.Rootfs == nil || *app.Rootfs.UsedBytes != 4096 || app.Rootfs.CapacityBytes == nil {
		t.Errorf("app's rootfs %+v: want the writable layer on the image fs", app.Rootfs)
	}
	if app.Logs == nil || *app.Logs.UsedBytes < 10000 || web.Containers[1].Logs != nil {
		t.Errorf("logs: app %+v, side %+v: want app's 10000-byte file, side none", app.Logs, web.Containers[1].Logs)
	}
	if web.EphemeralStorage == nil || *web.EphemeralStorage.UsedBytes != 4096+*app.Logs.UsedBytes {
		t.Errorf("web's ephemeral storage %+v: want writable layers plus logs", web.EphemeralStorage)
	}
	// The node, from the host tree.
	n := s.Node
	if n.NodeName != "n1" || n.StartTime.Unix() != 1796100000 {
		t.Errorf("node %q start %v", n.NodeName, n.StartTime)
	}
	if *n.CPU.UsageCoreNanoSeconds != 123456789 || n.CPU.UsageNanoCores != nil {
		t.Errorf("node cpu %+v: want the root cgroup's usage and no rate yet", n.CPU)
	}
	if *n.Memory.WorkingSetBytes != 2000000000 || *n.Memory.AvailableBytes != 4000000*1024-2000000000 || *n.Memory.RSSBytes != 1500000000 {
		t.Errorf("node memory %+v: want usage less inactive file, capacity less that", n.Memory)
	}
	if n.Network == nil || n.Network.Name != "eth0" || len(n.Network.Interfaces) != 1 || *n.Network.TxBytes != 2000 {
		t.Errorf("node network %+v: want eth0 only (no lo, no veth)", n.Network)
	}
	if n.Fs == nil || n.Runtime == nil || *n.Runtime.ImageFs.UsedBytes != 5000 || *n.Rlimit.MaxPID != 4194304 || *n.Rlimit.NumOfRunningProcesses != 345 {
		t.Errorf("node fs %+v runtime %+v rlimit %+v", n.Fs, n.Runtime, n.Rlimit)
	}

	only, err := p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if only.Node.Fs != nil || only.Node.Network != nil || only.Pods[0].Network != nil || only.Pods[1].Containers[0].Logs != nil || only.Pods[1].EphemeralStorage != nil {
		t.Errorf("only_cpu_and_memory: file systems, network or logs left in")
	}
	if only.Pods[1].CPU == nil || only.Node.Memory == nil {
		t.Errorf("only_cpu_and_memory: cpu or memory missing")
	}
}

func TestSummaryRates(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	rt := &fakeRuntime{
		sandboxes:  []*runtimeapi.PodSandbox{sandbox("sb", "default", "p", "uid", t0, runtimeapi.PodSandboxState_SANDBOX_READY)},
		containers: []*runtimeapi.Container{container("c", "sb", "c", t0)},
		ctrStats:   []*runtimeapi.ContainerStats{ctrStat("c", t0, 1e9, nil, 1, 0)},
		sbStatsErr: grpcstatus.Error(codes.Unimplemented, "no"),
	}
	h := fakeHost(t, "1000000000\n")
	p := newProvider(t, rt, h, clk, "")
	s, err := p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pods[0].Containers[0].CPU.UsageNanoCores != nil {
		t.Errorf("a rate from one sample")
	}
	// Two seconds later: the container used 1 s of CPU, the node 3 s.
	clk.Step(2 * time.Second)
	rt.ctrStats = []*runtimeapi.ContainerStats{ctrStat("c", t0.Add(2*time.Second), 2e9, nil, 1, 0)}
	if err := os.WriteFile(filepath.Join(h.CgroupRoot, "cpu,cpuacct", "cpuacct.usage"), []byte("4000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err = p.Summary(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if r := s.Pods[0].Containers[0].CPU.UsageNanoCores; r == nil || *r != 5e8 {
		t.Errorf("container rate %v: want 0.5 cores", r)
	}
	if r := s.Pods[0].CPU.UsageNanoCores; r == nil || *r != 5e8 {
		t.Errorf("pod rate %v: want its container's", r)
	}
	if r := s.Node.CPU.UsageNanoCores; r == nil || *r != 15e8 {
		t.Errorf("node rate %v: want 1.5 cores", r)
	}
	if rt.sbCalls != 1 {
		t.Errorf("ListPodSandboxStats called %d times: an unimplemented call is not retried", rt.sbCalls)
	}
}

func TestNodeFromProcWithoutV1Cgroups(t *testing.T) {
	h := fakeHost(t, "1\n")
	if err := os.RemoveAll(h.CgroupRoot); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	p := newProvider(t, &fakeRuntime{}, h, clk, "")
	s, err := p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	// /proc/stat: user+nice+system = 150 jiffies of 10 ms.
	if *s.Node.CPU.UsageCoreNanoSeconds != 150*uint64(10*time.Millisecond) {
		t.Errorf("node cpu %d", *s.Node.CPU.UsageCoreNanoSeconds)
	}
	// meminfo: usage total-free = 3000000 kB, less 500000 kB inactive file.
	if *s.Node.Memory.WorkingSetBytes != 2500000*1024 || *s.Node.Memory.UsageBytes != 3000000*1024 {
		t.Errorf("node memory %+v", s.Node.Memory)
	}
}

func TestResourceMetrics(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	rt := &fakeRuntime{
		sandboxes:  []*runtimeapi.PodSandbox{sandbox("sb", "apps", "web", "uid", t0.Add(-time.Minute), runtimeapi.PodSandboxState_SANDBOX_READY)},
		containers: []*runtimeapi.Container{container("c", "sb", "app", t0.Add(-30*time.Second))},
		ctrStats:   []*runtimeapi.ContainerStats{ctrStat("c", t0, 25e8, nil, 7<<20, 0)},
		sbStatsErr: grpcstatus.Error(codes.Unknown, "sandbox has no cgroup parent"),
	}
	p := newProvider(t, rt, fakeHost(t, "9000000000\n"), clk, "")
	rec := httptest.NewRecorder()
	p.ResourceHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resource", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("%v\n%s", err, rec.Body.String())
	}
	get := func(name string, labels map[string]string) (float64, int64) {
		t.Helper()
		f, ok := fams[name]
		if !ok {
			t.Fatalf("no %s in\n%s", name, rec.Body.String())
		}
	next:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			return v, m.GetTimestampMs()
		}
		t.Fatalf("no %s%v", name, labels)
		return 0, 0
	}
	if v, ts := get("node_cpu_usage_seconds_total", nil); v != 9 || ts != t0.UnixMilli() {
		t.Errorf("node cpu %v at %d", v, ts)
	}
	if v, _ := get("node_memory_working_set_bytes", nil); v != 2000000000 {
		t.Errorf("node memory %v", v)
	}
	c := map[string]string{"container": "app", "pod": "web", "namespace": "apps"}
	if v, ts := get("container_cpu_usage_seconds_total", c); v != 2.5 || ts != t0.UnixMilli() {
		t.Errorf("container cpu %v at %d", v, ts)
	}
	if v, _ := get("container_memory_working_set_bytes", c); v != 7<<20 {
		t.Errorf("container memory %v", v)
	}
	if v, _ := get("container_start_time_seconds", c); v != float64(t0.Add(-30*time.Second).Unix()) {
		t.Errorf("container start %v", v)
	}
	pl := map[string]string{"pod": "web", "namespace": "apps"}
	if v, _ := get("pod_cpu_usage_seconds_total", pl); v != 2.5 {
		t.Errorf("pod cpu %v: want its container's sum (the runtime failed pod-level stats)", v)
	}
	if v, _ := get("scrape_error", nil); v != 0 {
		t.Errorf("scrape_error %v", v)
	}
}

func TestResourceMetricsScrapeError(t *testing.T) {
	p := newProvider(t, &failingRuntime{}, fakeHost(t, "1\n"), clocktesting.NewFakeClock(t0), "")
	rec := httptest.NewRecorder()
	p.ResourceHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics/resource", nil))
	if !strings.Contains(rec.Body.String(), "scrape_error 1") || strings.Contains(rec.Body.String(), "node_cpu") {
		t.Errorf("want scrape_error 1 and nothing else:\n%s", rec.Body.String())
	}
	if _, err := p.Summary(context.Background(), false); err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Errorf("summary error %v", err)
	}
}

type failingRuntime struct{ fakeRuntime }

func (failingRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	return nil, grpcstatus.Error(codes.Unavailable, "runtime down")
}

// TestCPURateWindow: the rate is measured over at least minRateWindow
// (a request soon after another gets the last rate), an older sample
// never moves the baseline back, a counter that went down starts afresh.
func TestCPURateWindow(t *testing.T) {
	var r cpuRate
	at := func(d time.Duration, total uint64) cpuSample { return cpuSample{at: t0.Add(d), total: total} }
	if v := r.next(at(0, 1e9)); v != nil {
		t.Fatalf("rate from one sample: %d", *v)
	}
	if v := r.next(at(100*time.Millisecond, 11e8)); v != nil {
		t.Fatalf("rate over 100ms: %d", *v)
	}
	if v := r.next(at(2*time.Second, 2e9)); v == nil || *v != 5e8 {
		t.Fatalf("rate over 2s: %v; want 0.5 cores", v)
	}
	if v := r.next(at(2100*time.Millisecond, 21e8)); v == nil || *v != 5e8 {
		t.Fatalf("100ms later: %v; want the last rate", v)
	}
	if v := r.next(at(time.Second, 15e8)); v == nil || *v != 5e8 || !r.base.at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("an older sample: %v, baseline %v; want both unchanged", v, r.base.at)
	}
	if v := r.next(at(5*time.Second, 5e8)); v != nil {
		t.Fatalf("after a reset: %v; want none until the next window", *v)
	}
}

// An agent that took over the kubelet's pods lists every sandbox and
// container (no label selector) and counts those its Owns keeps: the
// kubelet's pod is in the summary with its container and figures,
// another tool's is not.
func TestSummaryOwnsSelectsAdoptedPods(t *testing.T) {
	kubelet := map[string]string{"io.kubernetes.pod.uid": "u1"}
	owns := func(l map[string]string) bool { return l["io.kubernetes.pod.uid"] != "" }
	sbKubelet := sandbox("sb1", "default", "web", "u1", t0, runtimeapi.PodSandboxState_SANDBOX_READY)
	sbKubelet.Labels = kubelet
	sbOther := sandbox("sb2", "default", "other", "", t0, runtimeapi.PodSandboxState_SANDBOX_READY)
	cKubelet, cOther := container("c1", "sb1", "app", t0), container("c2", "sb2", "x", t0)
	cKubelet.Labels = kubelet
	st1, st2 := ctrStat("c1", t0, 1e9, u64(5e8), 100<<20, 4096), ctrStat("c2", t0, 1e9, u64(5e8), 100<<20, 4096)
	st1.Attributes.Labels = kubelet
	rt := &fakeRuntime{sandboxes: []*runtimeapi.PodSandbox{sbKubelet, sbOther}, containers: []*runtimeapi.Container{cKubelet, cOther},
		ctrStats: []*runtimeapi.ContainerStats{st1, st2}}
	clk := clocktesting.NewFakeClock(t0)
	p, err := New(Config{NodeName: "n1", Runtime: rt, Owns: owns, Host: fakeHost(t, "1000\n"), Clock: clk, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Pods) != 1 || sum.Pods[0].PodRef.UID != "u1" || len(sum.Pods[0].Containers) != 1 || sum.Pods[0].Containers[0].Memory == nil {
		t.Fatalf("pods %+v; want the kubelet's pod alone, with its container's figures", sum.Pods)
	}
	for _, sel := range rt.selectors {
		if sel != nil {
			t.Errorf("a list asked with selector %v; want none", sel)
		}
	}
}

// The summary lists a desired pod's volumes the agent keeps — a disk
// emptyDir measured as du does, a configMap, a memory emptyDir by its
// tmpfs's statfs — and counts its local ephemeral ones (disk emptyDir,
// configMap) in its ephemeral storage; a measure is reused for the
// period, then taken again.
func TestSummaryVolumeStats(t *testing.T) {
	podDir := t.TempDir()
	dirs := map[string]string{"scratch": filepath.Join(podDir, "scratch"), "cfg": filepath.Join(podDir, "cfg"), "shm": filepath.Join(podDir, "shm")}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string, n int) {
		t.Helper()
		if err := os.WriteFile(path, bytes.Repeat([]byte("x"), n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dirs["scratch"], "f"), 1<<20)
	write(filepath.Join(dirs["cfg"], "k"), 100)
	desired := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}},
		{Name: "shm", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}},
	}}}
	vols := &Volumes{
		Pod: func(uid string) (*v1.Pod, bool) { return desired, uid == string(desired.UID) },
		Dir: func(_ *v1.Pod, v *v1.Volume) (string, bool) {
			return dirs[v.Name], v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumMemory
		},
	}
	rt := &fakeRuntime{sandboxes: []*runtimeapi.PodSandbox{sandbox("sb1", "default", "web", "u1", t0, runtimeapi.PodSandboxState_SANDBOX_READY)}}
	clk := clocktesting.NewFakeClock(t0)
	p, err := New(Config{NodeName: "n1", Runtime: rt, Volumes: vols, Host: fakeHost(t, "1000\n"), Clock: clk, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	summary := func() statsapi.PodStats {
		t.Helper()
		sum, err := p.Summary(context.Background(), false)
		if err != nil || len(sum.Pods) != 1 {
			t.Fatalf("summary %+v, %v", sum, err)
		}
		return sum.Pods[0]
	}
	ps := summary()
	used := map[string]uint64{}
	for _, v := range ps.VolumeStats {
		if v.UsedBytes == nil || v.CapacityBytes == nil {
			t.Fatalf("volume %s without figures: %+v", v.Name, v.FsStats)
		}
		used[v.Name] = *v.UsedBytes
	}
	if len(used) != 3 || used["scratch"] < 1<<20 || used["scratch"] > 1<<20+64<<10 || used["cfg"] == 0 {
		t.Fatalf("volume use %v; want scratch ~1 MiB, cfg, shm (no hostPath)", used)
	}
	if ps.EphemeralStorage == nil || *ps.EphemeralStorage.UsedBytes != used["scratch"]+used["cfg"] {
		t.Fatalf("ephemeral storage %+v; want the disk emptyDir and the configMap (%d)", ps.EphemeralStorage, used["scratch"]+used["cfg"])
	}
	// Within the period the measure is reused; after it, taken again.
	write(filepath.Join(dirs["scratch"], "g"), 1<<20)
	if got := summary(); *got.EphemeralStorage.UsedBytes != *ps.EphemeralStorage.UsedBytes {
		t.Fatalf("measured again within the period")
	}
	clk.Step(time.Minute)
	if got := summary(); *got.EphemeralStorage.UsedBytes < *ps.EphemeralStorage.UsedBytes+1<<20 {
		t.Fatalf("ephemeral storage %d after the period; want the new MiB counted", *got.EphemeralStorage.UsedBytes)
	}
}
