package cri_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
	"github.com/nodeagent/nodeagent/internal/pod"
)

var _ cri.Allocations = (*fakeAllocations)(nil)

// fakeAllocations allocates every spec as it is, keeps the records in
// memory and records the progress reports.
type fakeAllocations struct {
	mu       sync.Mutex
	act      map[string]pod.Actuated // by container name
	progress []string                // "in progress" / "done" / the error
}

func (f *fakeAllocations) Resize(p *v1.Pod) *v1.Pod { return p }

func (f *fakeAllocations) Actuated(_ types.UID, container, id string) (pod.Actuated, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.act[container]
	return a, ok && a.ContainerID == id
}

func (f *fakeAllocations) SetActuated(_ types.UID, container string, a pod.Actuated) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.act == nil {
		f.act = map[string]pod.Actuated{}
	}
	f.act[container] = a
	return nil
}

func (f *fakeAllocations) ResizeProgress(_ *v1.Pod, inProgress bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case err != nil:
		f.progress = append(f.progress, err.Error())
	case inProgress:
		f.progress = append(f.progress, "in progress")
	default:
		f.progress = append(f.progress, "done")
	}
}

func (f *fakeAllocations) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.progress) == 0 {
		return ""
	}
	return f.progress[len(f.progress)-1]
}

// podCgroupPhase records, for each pod cgroup write, the pod's summed cpu
// and memory limits and how many CRI calls were made before it.
type podCgroupPhase struct {
	fake *critest.Fake
	mu   sync.Mutex
	log  []cgroupWrite
}

type cgroupWrite struct {
	CPULimit, MemoryLimit string
	AfterCalls            int
}

func (*podCgroupPhase) Name() string { return "pod-cgroups" }

func (ph *podCgroupPhase) MutateSandbox(_ context.Context, p *v1.Pod, _ *runtimeapi.PodSandboxConfig) error {
	var cpu, mem resource.Quantity
	for _, c := range p.Spec.Containers {
		cpu.Add(*c.Resources.Limits.Cpu())
		mem.Add(*c.Resources.Limits.Memory())
	}
	ph.mu.Lock()
	defer ph.mu.Unlock()
	ph.log = append(ph.log, cgroupWrite{cpu.String(), mem.String(), len(ph.fake.Calls())})
	return nil
}

func (ph *podCgroupPhase) writes() []cgroupWrite {
	ph.mu.Lock()
	defer ph.mu.Unlock()
	out := ph.log
	ph.log = nil
	return out
}

func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// resizePod is an API pod with a Burstable container.
func resizePod(cpuReq, cpuLim, memReq, memLim string) *v1.Pod {
	grace := int64(5)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rs", Namespace: "default", UID: "uid-rs", Generation: 1,
			Annotations: map[string]string{"kubernetes.io/config.source": "api"}},
		Spec: v1.PodSpec{
			NodeName: "node1", RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "app", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
				Resources: v1.ResourceRequirements{Requests: rl("cpu", cpuReq, "memory", memReq), Limits: rl("cpu", cpuLim, "memory", memLim)},
			}},
		},
	}
}

type resizeHarness struct {
	*harness
	alloc *fakeAllocations
	cg    *podCgroupPhase
}

func newResizeHarness(t *testing.T) *resizeHarness {
	alloc := &fakeAllocations{}
	cg := &podCgroupPhase{}
	h := newHarness(t, func(c *cri.Config) {
		c.Allocations = alloc
		c.Phases = []cri.Phase{cg}
	})
	cg.fake = h.fake
	return &resizeHarness{harness: h, alloc: alloc, cg: cg}
}

// start runs p until its container runs and returns its ID.
func (h *resizeHarness) start(p *v1.Pod) string {
	h.t.Helper()
	if res := h.sync(p); res.Err != nil {
		h.t.Fatalf("first sync: %v", res.Err)
	}
	c := h.latest("app")
	if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		h.t.Fatalf("container %s is %s", c.ID, c.State)
	}
	h.cg.writes()
	return c.ID
}

// TestResizeInPlace: a cpu and memory increase reaches the running
// container through UpdateContainerResources, the pod cgroup raised
// before and set after; no container is stopped or created, and the
// next sync does nothing more.
func TestResizeInPlace(t *testing.T) {
	h := newResizeHarness(t)
	id := h.start(resizePod("100m", "200m", "64Mi", "128Mi"))
	if got := h.latest("app").Config.Annotations[cri.AnnotationContainerResources]; got != `{"limits":{"cpu":"200m","memory":"128Mi"},"requests":{"cpu":"100m","memory":"64Mi"}}` {
		t.Errorf("resources annotation = %s", got)
	}

	bigger := resizePod("200m", "400m", "64Mi", "256Mi")
	if res := h.sync(bigger); res.Err != nil {
		t.Fatalf("resize sync: %v", res.Err)
	}
	want := []string{"UpdateContainerResources"}
	if diff := cmp.Diff(want, filterMethods(h.fake.Methods(), "UpdateContainerResources", "StopContainer", "CreateContainer", "StartContainer", "RemoveContainer")); diff != "" {
		t.Fatalf("CRI calls (-want +got):\n%s", diff)
	}
	upd := only[*runtimeapi.UpdateContainerResourcesRequest](h.fake.Calls(), "UpdateContainerResources")[0]
	if upd.ContainerId != id {
		t.Errorf("updated container %s, want %s", upd.ContainerId, id)
	}
	wantRes := &runtimeapi.LinuxContainerResources{CpuShares: 204, CpuPeriod: 100000, CpuQuota: 40000, MemoryLimitInBytes: 256 << 20}
	if diff := cmp.Diff(wantRes, upd.Linux, protocmp.Transform()); diff != "" {
		t.Errorf("UpdateContainerResources resources (-want +got):\n%s", diff)
	}
	if got := h.latest("app"); got.ID != id || got.Resources.CpuQuota != 40000 || got.Resources.MemoryLimitInBytes != 256<<20 {
		t.Errorf("container after resize: %s quota %d memory %d", got.ID, got.Resources.CpuQuota, got.Resources.MemoryLimitInBytes)
	}
	// The pod cgroup as it was, raised before the update, as allocated
	// after it.
	writes := h.cg.writes()
	updateAt := indexOf(h.fake.Methods(), "UpdateContainerResources")
	if len(writes) != 3 || writes[0].CPULimit != "200m" || writes[1].CPULimit != "400m" || writes[1].MemoryLimit != "256Mi" ||
		writes[1].AfterCalls > updateAt || writes[2].CPULimit != "400m" || writes[2].AfterCalls <= updateAt {
		t.Errorf("pod cgroup writes %+v (update at call %d): want as running, raised before the update, as allocated after", writes, updateAt)
	}
	if got := h.alloc.last(); got != "done" {
		t.Errorf("progress = %q, want done", got)
	}
	if a, ok := h.alloc.Actuated("uid-rs", "app", id); !ok || a.Resources.Limits.Cpu().String() != "400m" {
		t.Errorf("actuated record = %+v, %v", a, ok)
	}

	// Applied: the next sync changes nothing.
	h.sync(bigger)
	if n := len(filterMethods(h.fake.Methods(), "UpdateContainerResources", "StopContainer", "CreateContainer")); n != 0 {
		t.Errorf("second sync made %v", h.fake.Methods())
	}
	if w := h.cg.writes(); len(w) != 1 || w[0].CPULimit != "400m" {
		t.Errorf("pod cgroup on the next sync %+v, want as resized", w)
	}
}

// TestResizeDecreaseLowersThePodCgroupLast: a shrink leaves the pod
// cgroup as it was until the container has shrunk.
func TestResizeDecreaseLowersThePodCgroupLast(t *testing.T) {
	h := newResizeHarness(t)
	h.start(resizePod("200m", "400m", "64Mi", "256Mi"))
	if res := h.sync(resizePod("100m", "200m", "64Mi", "128Mi")); res.Err != nil {
		t.Fatalf("resize sync: %v", res.Err)
	}
	writes := h.cg.writes()
	updateAt := indexOf(h.fake.Methods(), "UpdateContainerResources")
	if updateAt < 0 || len(writes) != 3 || writes[1].CPULimit != "400m" || writes[1].MemoryLimit != "256Mi" ||
		writes[2].CPULimit != "200m" || writes[2].MemoryLimit != "128Mi" || writes[2].AfterCalls <= updateAt {
		t.Errorf("pod cgroup writes %+v (update at call %d): want kept until the container shrank, lowered after", writes, updateAt)
	}
}

// TestResizeRestartPolicy: a changed resource whose resizePolicy says
// RestartContainer restarts the container with the new resources; a
// change of another resource alone is applied in place.
func TestResizeRestartPolicy(t *testing.T) {
	withPolicy := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{
			{ResourceName: v1.ResourceCPU, RestartPolicy: v1.NotRequired},
			{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer},
		}
		return p
	}
	h := newResizeHarness(t)
	id := h.start(withPolicy(resizePod("100m", "200m", "64Mi", "128Mi")))

	// cpu only: in place.
	h.sync(withPolicy(resizePod("150m", "300m", "64Mi", "128Mi")))
	if got := filterMethods(h.fake.Methods(), "UpdateContainerResources", "StopContainer", "CreateContainer"); !cmp.Equal(got, []string{"UpdateContainerResources"}) {
		t.Fatalf("cpu resize made %v, want an in-place update", got)
	}

	// memory: restarted, with the new limit.
	res := h.sync(withPolicy(resizePod("150m", "300m", "64Mi", "256Mi")))
	if res.Err != nil {
		t.Fatalf("sync: %v", res.Err)
	}
	if got := filterMethods(h.fake.Methods(), "UpdateContainerResources", "StopContainer", "CreateContainer", "StartContainer"); !cmp.Equal(got, []string{"StopContainer", "CreateContainer", "StartContainer"}) {
		t.Fatalf("memory resize made %v, want a restart", got)
	}
	c := h.latest("app")
	if c.ID == id || c.Resources.MemoryLimitInBytes != 256<<20 || c.Resources.CpuQuota != 30000 {
		t.Errorf("restarted container %s: memory %d quota %d", c.ID, c.Resources.MemoryLimitInBytes, c.Resources.CpuQuota)
	}
	if c.Config.Metadata.Attempt != 1 {
		t.Errorf("restart count %d, want 1", c.Config.Metadata.Attempt)
	}
}

// TestResizeMemoryBelowUsage: a memory limit below what the container
// (and the pod) use now is not applied, as the kubelet refuses it; the
// error is the resize's progress; once usage is low, it is applied.
func TestResizeMemoryBelowUsage(t *testing.T) {
	h := newResizeHarness(t)
	id := h.start(resizePod("100m", "200m", "64Mi", "256Mi"))
	sbID := h.fake.Sandboxes()[0].ID
	if err := h.fake.SetMemoryUsage(id, 200<<20); err != nil {
		t.Fatal(err)
	}
	h.fake.SetSandboxMemoryUsage(sbID, 201<<20)

	smaller := resizePod("100m", "200m", "64Mi", "128Mi")
	res := h.sync(smaller)
	if res.Err == nil || res.RetryAfter == 0 {
		t.Errorf("result %+v, want the refusal and a retry", res)
	}
	if got := filterMethods(h.fake.Methods(), "UpdateContainerResources", "StopContainer", "CreateContainer"); len(got) != 0 {
		t.Fatalf("refused resize made %v", got)
	}
	want := fmt.Sprintf(`cannot decrease memory limits: [attempting to set pod memory limit (%d) below current usage (%d), attempting to set container "app" memory limit (%d) below current usage (%d)]`,
		128<<20, 201<<20, 128<<20, 200<<20)
	if got := h.alloc.last(); got != want {
		t.Errorf("progress\n got %s\nwant %s", got, want)
	}
	if w := h.cg.writes(); len(w) != 1 || w[0].MemoryLimit != "256Mi" {
		t.Errorf("pod cgroup writes %+v, want only the running one", w)
	}

	if err := h.fake.SetMemoryUsage(id, 100<<20); err != nil {
		t.Fatal(err)
	}
	h.fake.SetSandboxMemoryUsage(sbID, 101<<20)
	if res := h.sync(smaller); res.Err != nil {
		t.Fatalf("sync: %v", res.Err)
	}
	if got := h.latest("app"); got.ID != id || got.Resources.MemoryLimitInBytes != 128<<20 {
		t.Errorf("container %s memory %d, want %s resized to 128Mi", got.ID, got.Resources.MemoryLimitInBytes, id)
	}
	if got := h.alloc.last(); got != "done" {
		t.Errorf("progress = %q, want done", got)
	}
}

// legacyHash is the container hash of the agents before in-place resize:
// md5 of the whole spec's JSON, its first 8 bytes in hex.
func legacyHash(c *v1.Container) string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:8])
}

// asOldAgent makes the running container look made by an agent before
// in-place resize: its whole-spec hash, no resources annotation.
func asOldAgent(t *testing.T, f *critest.Fake, id string, spec *v1.Container) {
	t.Helper()
	madeBy(t, f, id, legacyHash(spec))
}

// madeBy makes the running container look made by another agent: hash
// in io.kubernetes.container.hash, no nodeagent hash, no resources
// annotation.
func madeBy(t *testing.T, f *critest.Fake, id, hash string) {
	t.Helper()
	for k, v := range map[string]string{cri.AnnotationContainerHash: hash, cri.AnnotationAgentHash: "", cri.AnnotationContainerResources: ""} {
		if err := f.SetAnnotation(id, k, v); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKeepsTheKubeletsContainers: a container the kubelet made carries
// the kubelet's hash (name and image). Taken over, it is kept as it runs
// and adopted; one whose image differs from the spec is replaced.
func TestKeepsTheKubeletsContainers(t *testing.T) {
	h := newResizeHarness(t)
	p := resizePod("100m", "200m", "64Mi", "128Mi")
	id := h.start(p)
	madeBy(t, h.fake, id, cri.KubeletHash(&p.Spec.Containers[0]))
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("sync after the takeover: %v", res.Err)
	}
	if got := filterMethods(h.fake.Methods(), "StopContainer", "CreateContainer"); len(got) != 0 {
		t.Fatalf("the takeover made %v: the kubelet's container must be kept", got)
	}
	if a, ok := h.alloc.Actuated(p.UID, "app", id); !ok || a.Hash != cri.HashContainer(&p.Spec.Containers[0]) {
		t.Fatalf("adoption record %+v, %v", a, ok)
	}

	q := resizePod("100m", "200m", "64Mi", "128Mi")
	q.UID = "other-uid"
	id = h.start(q)
	other := q.Spec.Containers[0]
	other.Image = "example.com/other:1"
	madeBy(t, h.fake, id, cri.KubeletHash(&other))
	h.sync(q)
	if got := filterMethods(h.fake.Methods(), "StopContainer", "CreateContainer"); !cmp.Equal(got, []string{"StopContainer", "CreateContainer"}) {
		t.Fatalf("a kubelet's container of another image: %v, want it replaced", got)
	}
}

// TestUpgradeKeepsOldAgentsContainers: a container an agent before
// in-place resize made carries a hash of its whole spec. It is not
// restarted by the upgrade, it is adopted (recorded with the new hash and
// its resources), and a later resize is applied to it in place.
func TestUpgradeKeepsOldAgentsContainers(t *testing.T) {
	h := newResizeHarness(t)
	p := resizePod("100m", "200m", "64Mi", "128Mi")
	id := h.start(p)
	asOldAgent(t, h.fake, id, &p.Spec.Containers[0])
	if st := h.status(p); st.Latest("app", false).Resources != nil {
		t.Fatal("the old container still has a resources annotation")
	}

	res := h.sync(p)
	if res.Err != nil {
		t.Fatalf("sync after the upgrade: %v", res.Err)
	}
	if got := filterMethods(h.fake.Methods(), "StopContainer", "CreateContainer", "UpdateContainerResources"); len(got) != 0 {
		t.Fatalf("the upgrade made %v: the old container must be kept as it is", got)
	}
	a, ok := h.alloc.Actuated(p.UID, "app", id)
	if !ok || a.Hash != cri.HashContainer(&p.Spec.Containers[0]) || a.Resources.Limits.Memory().String() != "128Mi" {
		t.Fatalf("adoption record %+v, %v", a, ok)
	}

	// Resized later: in place, same container.
	h.sync(resizePod("200m", "400m", "64Mi", "128Mi"))
	if got := filterMethods(h.fake.Methods(), "StopContainer", "CreateContainer", "UpdateContainerResources"); !cmp.Equal(got, []string{"UpdateContainerResources"}) {
		t.Fatalf("resize of the adopted container made %v", got)
	}
	if a, _ := h.alloc.Actuated(p.UID, "app", id); a.Hash == "" {
		t.Error("the resize dropped the adopted hash")
	}
	h.sync(resizePod("200m", "400m", "64Mi", "128Mi"))
	if got := filterMethods(h.fake.Methods(), "StopContainer", "CreateContainer", "UpdateContainerResources"); len(got) != 0 {
		t.Fatalf("sync after the resize made %v", got)
	}
}

// An old agent's container whose whole-spec hash does not match the spec
// (edited while the agent was away) is restarted, as before.
func TestUpgradeRestartsChangedOldContainer(t *testing.T) {
	h := newResizeHarness(t)
	p := resizePod("100m", "200m", "64Mi", "128Mi")
	id := h.start(p)
	old := p.DeepCopy()
	old.Spec.Containers[0].Image = "busybox:1.35"
	asOldAgent(t, h.fake, id, &old.Spec.Containers[0])
	h.sync(p)
	if got := filterMethods(h.fake.Methods(), "StopContainer", "CreateContainer"); !cmp.Equal(got, []string{"StopContainer", "CreateContainer"}) {
		t.Fatalf("changed old container: %v, want a restart", got)
	}
}

func filterMethods(methods []string, keep ...string) []string {
	var out []string
	for _, m := range methods {
		for _, k := range keep {
			if m == k {
				out = append(out, m)
			}
		}
	}
	return out
}

func indexOf(methods []string, m string) int {
	for i, x := range methods {
		if x == m {
			return i
		}
	}
	return -1
}

// TestResizeToEquivalentValues: a cpu resize below the kernel's minimum
// shares and quota (2m/10m to 1m/5m) changes nothing in the container
// and is done at once: the record shows the new values (the status
// reports them), as the kubelet marks such a resize actuated.
func TestResizeToEquivalentValues(t *testing.T) {
	h := newResizeHarness(t)
	id := h.start(resizePod("2m", "10m", "64Mi", "128Mi"))
	if res := h.sync(resizePod("1m", "5m", "64Mi", "128Mi")); res.Err != nil {
		t.Fatalf("resize sync: %v", res.Err)
	}
	if n := len(filterMethods(h.fake.Methods(), "UpdateContainerResources", "StopContainer", "CreateContainer")); n != 0 {
		t.Errorf("an equivalent resize made %v", h.fake.Methods())
	}
	if a, ok := h.alloc.Actuated("uid-rs", "app", id); !ok || a.Resources.Requests.Cpu().String() != "1m" || a.Resources.Limits.Cpu().String() != "5m" {
		t.Errorf("actuated record = %+v, %v; want the new 1m/5m", a, ok)
	}
}
