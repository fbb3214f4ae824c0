package cpumanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// machine describes a synthetic node; CPUs are numbered as Linux does on
// x86: the first thread of every core of every socket, then the second
// threads (cpu = thread*sockets*cores + socket*cores + core).
type machine struct {
	sockets, coresPerSocket, threads int
	// numaPerSocket NUMA nodes split each socket's cores; 0: no NUMA
	// directory at all.
	numaPerSocket int
}

// Package-level topologies, as the kubelet's policy_static_test.go.
var (
	oneSocketTwoCores = machine{sockets: 1, coresPerSocket: 2, threads: 1}
	// dualSocketHT: 32 CPUs; core n of socket s is CPUs s*8+n and 16+s*8+n;
	// NUMA node = socket.
	dualSocketHT = machine{sockets: 2, coresPerSocket: 8, threads: 2, numaPerSocket: 1}
	// twoNUMANodes: one socket of 8 single-thread cores in two NUMA nodes,
	// 0-3 and 4-7.
	twoNUMANodes = machine{sockets: 1, coresPerSocket: 8, threads: 1, numaPerSocket: 2}
)

// sysfs writes m's topology under a temporary root, as the kernel shows
// it: core_id is per socket, so it repeats across sockets.
func (m machine) sysfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	n := m.sockets * m.coresPerSocket
	numa := map[int][]int{}
	for th := 0; th < m.threads; th++ {
		for s := 0; s < m.sockets; s++ {
			for c := 0; c < m.coresPerSocket; c++ {
				cpu := th*n + s*m.coresPerSocket + c
				dir := filepath.Join(root, "devices/system/cpu", fmt.Sprintf("cpu%d", cpu), "topology")
				write(t, filepath.Join(dir, "physical_package_id"), fmt.Sprint(s))
				write(t, filepath.Join(dir, "core_id"), fmt.Sprint(c))
				if m.numaPerSocket > 0 {
					node := s*m.numaPerSocket + c/(m.coresPerSocket/m.numaPerSocket)
					numa[node] = append(numa[node], cpu)
				}
			}
		}
	}
	write(t, filepath.Join(root, "devices/system/cpu/online"), fmt.Sprintf("0-%d", n*m.threads-1))
	for node, cpus := range numa {
		write(t, filepath.Join(root, "devices/system/node", fmt.Sprintf("node%d", node), "cpulist"), cpuset.New(cpus...).String())
	}
	return root
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (m machine) topology(t *testing.T) *Topology {
	t.Helper()
	topo, err := Discover(m.sysfs(t))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func set(s string) cpuset.CPUSet {
	c, err := cpuset.Parse(s)
	if err != nil {
		panic(err)
	}
	return c
}

// fakeUpdater records UpdateContainerResources calls.
type fakeUpdater struct {
	mu    sync.Mutex
	calls map[string]string // container ID → last cpuset
	n     int
	err   error
	// sent, when set, receives every call.
	sent chan string
}

func (f *fakeUpdater) UpdateContainerResources(_ context.Context, in *runtimeapi.UpdateContainerResourcesRequest, _ ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	f.mu.Lock()
	if f.err != nil {
		f.mu.Unlock()
		return nil, f.err
	}
	if f.calls == nil {
		f.calls = map[string]string{}
	}
	f.calls[in.ContainerId] = in.Linux.CpusetCpus
	f.n++
	f.mu.Unlock()
	if f.sent != nil {
		f.sent <- in.ContainerId + "=" + in.Linux.CpusetCpus
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

func (f *fakeUpdater) take() (map[string]string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, n := f.calls, f.n
	f.calls, f.n = nil, 0
	return c, n
}

// fakePods is the PLEG's snapshot and inspected statuses.
type fakePods struct {
	mu   sync.Mutex
	pods map[pod.UID]*pod.RuntimeStatus
}

func (f *fakePods) Snapshot() (map[pod.UID]*pod.RuntimeStatus, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[pod.UID]*pod.RuntimeStatus{}
	for uid, st := range f.pods {
		// List level: no exit codes.
		cp := &pod.RuntimeStatus{UID: st.UID, Name: st.Name, Namespace: st.Namespace}
		for _, c := range st.Containers {
			lc := *c
			lc.ExitCode = 0
			cp.Containers = append(cp.Containers, &lc)
		}
		out[uid] = cp
	}
	return out, time.Time{}
}

func (f *fakePods) GetNewerThan(_ context.Context, uid pod.UID, _ time.Time) (*pod.RuntimeStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.pods[uid]; ok {
		return st, nil
	}
	return &pod.RuntimeStatus{UID: uid}, nil
}

func (f *fakePods) set(uid pod.UID, cs ...*pod.Container) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pods == nil {
		f.pods = map[pod.UID]*pod.RuntimeStatus{}
	}
	f.pods[uid] = &pod.RuntimeStatus{UID: uid, Name: string(uid), Namespace: "default", Containers: cs}
}

func running(id, name string) *pod.Container {
	return &pod.Container{ID: id, Name: name, State: pod.ContainerRunning}
}

func exited(id, name string, code int32, init bool) *pod.Container {
	return &pod.Container{ID: id, Name: name, State: pod.ContainerExited, ExitCode: code, Init: init}
}

type env struct {
	m       *Manager
	cfg     Config
	updater *fakeUpdater
	pods    *fakePods
	specs   *fakeSpecs
	clock   *clocktesting.FakeClock
}

// fakeSpecs are the desired pods (the pod manager's Reader).
type fakeSpecs struct {
	mu   sync.Mutex
	pods map[pod.UID]*v1.Pod
}

func (f *fakeSpecs) GetPodByUID(uid pod.UID) (*v1.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[uid]
	return p, ok
}

// admit is the loop's admission: the CPUs allocated, the pod in the
// pod manager.
func (e *env) admit(p *v1.Pod) error {
	if err := e.m.Allocate(p); err != nil {
		return err
	}
	e.specs.mu.Lock()
	defer e.specs.mu.Unlock()
	e.specs.pods[p.UID] = p
	return nil
}

// newEnv builds a static-policy Manager over m's topology; opts adjust
// the Config.
func newEnv(t *testing.T, m machine, opts ...func(*Config)) *env {
	t.Helper()
	e := &env{updater: &fakeUpdater{}, pods: &fakePods{}, specs: &fakeSpecs{pods: map[pod.UID]*v1.Pod{}},
		clock: clocktesting.NewFakeClock(time.Unix(1000, 0))}
	e.cfg = Config{Policy: PolicyStatic, SysfsRoot: m.sysfs(t), StateDir: t.TempDir(), ReservedMilliCPU: 1000,
		Updater: e.updater, Pods: e.specs, Clock: e.clock, Logger: zaptest.NewLogger(t)}
	for _, o := range opts {
		o(&e.cfg)
	}
	mgr, err := New(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.m = mgr
	return e
}

// restart builds a new Manager over the same node and state directory.
func (e *env) restart(t *testing.T, opts ...func(*Config)) (*Manager, error) {
	t.Helper()
	cfg := e.cfg
	for _, o := range opts {
		o(&cfg)
	}
	return New(cfg)
}

// container is a container spec with cpu (and memory) requests = limits;
// cpu "" for none.
func container(name, cpu string) v1.Container {
	c := v1.Container{Name: name, Image: "busybox"}
	if cpu != "" {
		l := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("64Mi")}
		c.Resources = v1.ResourceRequirements{Requests: l, Limits: l}
	}
	return c
}

func newPod(name string, restart v1.RestartPolicy, init []v1.Container, cs ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: pod.UID("uid-" + name)},
		Spec:       v1.PodSpec{RestartPolicy: restart, InitContainers: init, Containers: cs},
	}
}
