package devicemanager

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/devicemanager/checkpoint"
)

const res = "example.com/dev"

// fakePlugin is a device plugin served on a real socket.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	devs      []*pluginapi.Device
	opts      *pluginapi.DevicePluginOptions
	preferred []string

	mu       sync.Mutex
	prestart [][]string
	srv      *grpc.Server
}

func (f *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return f.opts, nil
}

func (f *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: f.devs}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func (f *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"DEVICES": strings.Join(c.DevicesIds, ",")}}
		for _, id := range c.DevicesIds {
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: "/dev-" + id, HostPath: "/tmp/" + id})
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: res + "=" + id})
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (f *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: f.preferred}}}, nil
}

func (f *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	f.mu.Lock()
	f.prestart = append(f.prestart, r.DevicesIds)
	f.mu.Unlock()
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serve starts the plugin on dir/name.
func (f *fakePlugin) serve(t *testing.T, dir, name string) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	f.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(f.srv, f)
	go f.srv.Serve(ln)
	t.Cleanup(f.srv.Stop)
}

type rig struct {
	m       *Manager
	clk     *clocktesting.FakeClock
	dir     string
	changes chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

func newRig(t *testing.T, dir string) *rig { return newRigGone(t, dir, nil) }

func newRigGone(t *testing.T, dir string, gone func(types.UID) bool) *rig {
	t.Helper()
	r := &rig{clk: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), dir: dir, changes: make(chan struct{}, 100), done: make(chan struct{})}
	m, err := New(Config{Dir: dir, Clock: r.clk, Logger: zaptest.NewLogger(t), Gone: gone, OnChange: func() { r.changes <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { m.Run(ctx); close(r.done) }()
	t.Cleanup(r.stop)
	// Run removes the sockets it finds before it listens: plugins are
	// started once it listens.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, SocketName)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("registration socket not made")
		}
		runtime.Gosched()
	}
	return r
}

func (r *rig) stop() {
	r.cancel()
	<-r.done
}

// register calls Register on the registration socket as a plugin does.
func (r *rig) register(t *testing.T, req *pluginapi.RegisterRequest) error {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(r.dir, SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req, grpc.WaitForReady(true))
	return err
}

// plug serves p on <dir>/fake.sock, registers it for res and waits for
// the manager to take its devices.
func (r *rig) plug(t *testing.T, dir string, p *fakePlugin) {
	t.Helper()
	p.serve(t, dir, "fake.sock")
	if err := r.register(t, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "fake.sock", ResourceName: res}); err != nil {
		t.Fatal(err)
	}
	r.waitChange(t)
}

func (r *rig) waitChange(t *testing.T) {
	t.Helper()
	select {
	case <-r.changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no device change reported")
	}
}

func devs(ids ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range ids {
		out = append(out, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	return out
}

func podAsking(uid string, n int64, init ...int64) *v1.Pod {
	lim := func(n int64) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: lim(n)}}}}
	for i, k := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init" + string(rune('0'+i)), Resources: lim(k)})
	}
	return p
}

func quantities(l v1.ResourceList) map[string]int64 {
	out := map[string]int64{}
	for k, q := range l {
		out[string(k)] = q.Value()
	}
	return out
}

// A plugin registers, its devices become the node's resource, pods get
// devices (init containers' reused), the answer reaches the container's
// config after PreStartContainer, and more than is free is refused with
// the kubelet's error.
func TestRegisterAllocateAndConfig(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	p := &fakePlugin{devs: devs("d1", "d2", "d3"), opts: &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true}, preferred: []string{"d3"}}
	r.plug(t, dir, p)
	capacity, allocatable := r.m.Capacity()
	if got := quantities(capacity); got[res] != 3 || quantities(allocatable)[res] != 3 {
		t.Fatalf("capacity %v allocatable %v, want 3 and 3", got, quantities(allocatable))
	}

	ctx := context.Background()
	one := podAsking("p1", 1)
	if err := r.m.Allocate(ctx, one); err != nil {
		t.Fatal(err)
	}
	if got := r.m.ContainerDevices("p1", "app"); !cmp.Equal(got, map[string][]string{res: {"d3"}}) {
		t.Errorf("p1 devices %v, want the plugin's preferred d3", got)
	}
	cfg := &runtimeapi.ContainerConfig{Envs: []*runtimeapi.KeyValue{{Key: "DEVICES", Value: []byte("mine")}}}
	if err := r.m.MutateConfig(ctx, one, &one.Spec.Containers[0], cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Envs) != 2 || cfg.Envs[0].Key != "DEVICES" || string(cfg.Envs[0].Value) != "d3" || string(cfg.Envs[1].Value) != "mine" {
		t.Errorf("envs %v: want the plugin's first, the container's after (it wins)", cfg.Envs)
	}
	if len(cfg.Mounts) != 1 || cfg.Mounts[0].HostPath != "/tmp/d3" || len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != res+"=d3" {
		t.Errorf("mounts %v cdi %v", cfg.Mounts, cfg.CDIDevices)
	}
	p.mu.Lock()
	if !cmp.Equal(p.prestart, [][]string{{"d3"}}) {
		t.Errorf("PreStartContainer calls %v", p.prestart)
	}
	p.mu.Unlock()

	// An init container's device is the app container's after it.
	two := podAsking("p2", 1, 1)
	if err := r.m.Allocate(ctx, two); err != nil {
		t.Fatal(err)
	}
	if a, b := r.m.ContainerDevices("p2", "init0"), r.m.ContainerDevices("p2", "app"); !cmp.Equal(a, b) || len(a[res]) != 1 {
		t.Errorf("init %v app %v: want the same one device", a, b)
	}
	err := r.m.Allocate(ctx, podAsking("p3", 2))
	if err == nil || err.Error() != "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1" {
		t.Errorf("over-asking pod: %v", err)
	}
	if got := r.m.ContainerDevices("p3", "app"); len(got) != 0 {
		t.Errorf("refused pod holds %v", got)
	}
	// Admitted again (agent restart): the same devices, no new call.
	if err = r.m.Allocate(ctx, one); err != nil || !cmp.Equal(r.m.ContainerDevices("p1", "app"), map[string][]string{res: {"d3"}}) {
		t.Errorf("re-admission: %v %v", err, r.m.ContainerDevices("p1", "app"))
	}

	// A plugin that must be told before a start is needed then: while it
	// is away, the container waits.
	p.srv.Stop()
	r.waitChange(t)
	err = r.m.MutateConfig(ctx, one, &one.Spec.Containers[0], &runtimeapi.ContainerConfig{})
	if err == nil || !strings.Contains(err.Error(), "endpoint not found in cache for a registered resource") {
		t.Errorf("config while a PreStartRequired plugin is away: %v", err)
	}

	// The checkpoint holds both pods; freed pods leave it.
	cp, err := checkpoint.Read(dir)
	if err != nil || len(cp.Entries()) != 3 {
		t.Fatalf("checkpoint: %v %+v", err, cp)
	}
	r.m.RemoveStale(map[types.UID]bool{"p1": true})
	if cp, _ := checkpoint.Read(dir); len(cp.Entries()) != 1 || cp.Entries()[0].PodUID != "p1" {
		t.Errorf("after p2 finished: %+v", cp.Entries())
	}
}

// After an agent restart the checkpoint's allocations stand: the
// resource is registered with no device until its plugin comes back,
// admission still counts what pods hold, and the container's config is
// built from the saved answer.
func TestRestartKeepsAllocations(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	p := &fakePlugin{devs: devs("d1", "d2"), opts: &pluginapi.DevicePluginOptions{}}
	r.plug(t, dir, p)
	one := podAsking("p1", 2)
	if err := r.m.Allocate(context.Background(), one); err != nil {
		t.Fatal(err)
	}
	r.stop()
	p.srv.Stop()

	r2 := newRig(t, dir)
	capacity, allocatable := r2.m.Capacity()
	if quantities(capacity)[res] != 0 || quantities(allocatable)[res] != 0 {
		t.Errorf("before the plugin is back: capacity %v allocatable %v, want 0", capacity, allocatable)
	}
	if got := quantities(r2.m.AdmissionAllocatable())[res]; got != 2 {
		t.Errorf("admission allocatable %d, want the 2 held", got)
	}
	if err := r2.m.Allocate(context.Background(), one); err != nil {
		t.Errorf("re-admission: %v", err)
	}
	// A container restarted before the plugin is back gets the saved
	// answer (the plugin asked for no PreStartContainer).
	cfg := &runtimeapi.ContainerConfig{}
	if err := r2.m.MutateConfig(context.Background(), one, &one.Spec.Containers[0], cfg); err != nil || len(cfg.Mounts) != 2 {
		t.Errorf("config before the plugin is back: %v %v", err, cfg.Mounts)
	}
	// Five minutes without the plugin: the resource goes.
	r2.clk.Step(stopGracePeriod)
	capacity, _ = r2.m.Capacity()
	if q, ok := capacity[res]; !ok || q.Value() != 0 {
		t.Errorf("after the grace period: %v, want reported as 0", capacity)
	}
}

// A plugin that goes leaves its devices unhealthy: allocatable 0,
// capacity kept.
func TestPluginGone(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	p := &fakePlugin{devs: devs("d1"), opts: &pluginapi.DevicePluginOptions{}}
	r.plug(t, dir, p)
	p.srv.Stop()
	r.waitChange(t)
	capacity, allocatable := r.m.Capacity()
	if quantities(capacity)[res] != 1 || quantities(allocatable)[res] != 0 {
		t.Errorf("capacity %v allocatable %v, want 1 and 0", capacity, allocatable)
	}
	err := r.m.Allocate(context.Background(), podAsking("p1", 1))
	if err == nil || err.Error() != "no healthy devices present; cannot allocate unhealthy devices example.com/dev" {
		t.Errorf("allocate without the plugin: %v", err)
	}
}

// Bad registrations get the kubelet's errors and change nothing.
func TestRegistrationRefused(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	for _, tc := range []struct {
		req  *pluginapi.RegisterRequest
		want string
	}{
		{&pluginapi.RegisterRequest{Version: "v1alpha", Endpoint: "x.sock", ResourceName: res}, `requested API version "v1alpha" is not supported by kubelet`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "gpu"}, `the ResourceName "gpu" is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "kubernetes.io/gpu"}, `the ResourceName "kubernetes.io/gpu" is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "../x.sock", ResourceName: res}, `is not a socket name`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "none.sock", ResourceName: res}, `failed to get device plugin options`},
	} {
		err := r.register(t, tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.req, err, tc.want)
		}
	}
	if capacity, _ := r.m.Capacity(); len(capacity) != 0 {
		t.Errorf("capacity after refusals: %v", capacity)
	}
}

// A pod placed right after another left gets the devices it freed: the
// allocation frees gone pods first, but never a pod restored from the
// checkpoint and not admitted again by this run.
func TestAllocationFreesGonePods(t *testing.T) {
	dir := t.TempDir()
	var mu sync.Mutex
	gone := map[types.UID]bool{}
	isGone := func(uid types.UID) bool { mu.Lock(); defer mu.Unlock(); return gone[uid] }
	r := newRigGone(t, dir, isGone)
	p := &fakePlugin{devs: devs("d1", "d2"), opts: &pluginapi.DevicePluginOptions{}}
	r.plug(t, dir, p)
	ctx := context.Background()
	if err := r.m.Allocate(ctx, podAsking("old", 2)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	gone["old"] = true
	mu.Unlock()
	if err := r.m.Allocate(ctx, podAsking("new", 2)); err != nil {
		t.Fatalf("the gone pod's devices were not freed: %v", err)
	}
	r.stop()

	// Restarted: "new" comes back from the checkpoint; Gone says yes to
	// everything, yet it keeps its devices until it is admitted again.
	mu.Lock()
	gone["new"] = true
	mu.Unlock()
	r2 := newRigGone(t, dir, isGone)
	p.srv.Stop()
	p2 := &fakePlugin{devs: devs("d1", "d2"), opts: &pluginapi.DevicePluginOptions{}}
	p2.serve(t, dir, "fake2.sock")
	if err := r2.register(t, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "fake2.sock", ResourceName: res}); err != nil {
		t.Fatal(err)
	}
	r2.waitChange(t)
	if err := r2.m.Allocate(ctx, podAsking("third", 1)); err == nil {
		t.Error("a pod restored from the checkpoint lost its devices before being admitted again")
	}
}

// An allocation that cannot be checkpointed is refused and taken back:
// a pod must not run with devices a restart would not know it holds.
func TestAllocationNotCheckpointedIsRefused(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	p := &fakePlugin{devs: devs("d1"), opts: &pluginapi.DevicePluginOptions{}}
	r.plug(t, dir, p)
	// The checkpoint's path is a directory: the write fails.
	os.Remove(filepath.Join(dir, checkpoint.FileName))
	os.Mkdir(filepath.Join(dir, checkpoint.FileName), 0o755)
	err := r.m.Allocate(context.Background(), podAsking("p1", 1))
	if err == nil || !strings.Contains(err.Error(), "failed to write checkpoint file") {
		t.Fatalf("allocation without a checkpoint: %v", err)
	}
	if got := r.m.ContainerDevices("p1", "app"); len(got) != 0 {
		t.Errorf("the refused pod holds %v", got)
	}
	os.Remove(filepath.Join(dir, checkpoint.FileName))
	if err := r.m.Allocate(context.Background(), podAsking("p2", 1)); err != nil {
		t.Errorf("the device was not given back: %v", err)
	}
}

// A device plugin that registers through plugins_registry (the plugin
// watcher hands it over) is checked and connected at its endpoint.
func TestRegisterThroughPluginWatcher(t *testing.T) {
	dir := t.TempDir()
	r := newRig(t, dir)
	if err := r.m.ValidatePlugin(res, []string{"v1alpha"}); err == nil {
		t.Error("an unsupported version was accepted")
	}
	if err := r.m.ValidatePlugin("gpu", []string{pluginapi.Version}); err == nil {
		t.Error("an invalid resource name was accepted")
	}
	if err := r.m.ValidatePlugin(res, []string{pluginapi.Version}); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	p := &fakePlugin{devs: devs("d1", "d2"), opts: &pluginapi.DevicePluginOptions{}}
	p.serve(t, elsewhere, "dp.sock")
	if err := r.m.RegisterPlugin(context.Background(), res, filepath.Join(elsewhere, "dp.sock")); err != nil {
		t.Fatal(err)
	}
	r.waitChange(t)
	if capacity, _ := r.m.Capacity(); quantities(capacity)[res] != 2 {
		t.Errorf("capacity %v", capacity)
	}
}

// ContainerDevices is a container's devices by resource, for the tests.
func (m *Manager) ContainerDevices(uid types.UID, container string) map[string][]string {
	out := map[string][]string{}
	for res, byNUMA := range m.ContainerDevicesByNUMA(uid, container) {
		ids := sets.New[string]()
		for _, l := range byNUMA {
			ids.Insert(l...)
		}
		out[res] = sets.List(ids)
	}
	return out
}
