package cri_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
)

// recordingPhase is every kind of phase at once; it records its calls.
type recordingPhase struct {
	name                string
	mutateErr, startErr error
	mu                  sync.Mutex
	calls               []string
}

func (r *recordingPhase) Name() string { return r.name }

func (r *recordingPhase) record(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recordingPhase) MutateConfig(_ context.Context, t cri.Target, cfg *runtimeapi.ContainerConfig) error {
	r.record("mutate " + t.Container.Name)
	cfg.Annotations["test/phase"] = r.name
	return r.mutateErr
}

func (r *recordingPhase) PostStart(_ context.Context, t cri.Target) (string, error) {
	r.record("post-start " + t.Container.Name + " " + t.ID)
	if r.startErr != nil {
		return "phase output", r.startErr
	}
	return "", nil
}

func (r *recordingPhase) PreStop(_ context.Context, t cri.Target, grace int64) {
	r.record("pre-stop " + t.Container.Name)
	if grace != 30 {
		r.record("unexpected grace")
	}
}

func withPhases(ph ...cri.Phase) func(*cri.Config) {
	return func(c *cri.Config) { c.Phases = ph }
}

// The run chain: a config mutator changes the config the runtime gets,
// a post-start phase runs after StartContainer with the new container's
// ID, a pre-stop phase before StopContainer with the grace period.
func TestRunChainPhases(t *testing.T) {
	ph := &recordingPhase{name: "pinning"}
	h := newHarness(t, withPhases(ph))
	p := webPod.DeepCopy()
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("sync: %+v", res)
	}
	c := h.latest("app")
	if got := c.Config.Annotations["test/phase"]; got != "pinning" {
		t.Fatalf("created config annotation %q: the mutator did not reach the runtime", got)
	}
	if err := h.rt.KillPod(context.Background(), p, h.status(p), -1); err != nil {
		t.Fatal(err)
	}
	want := []string{"mutate app", "post-start app " + c.ID, "pre-stop app"}
	if strings.Join(ph.calls, "|") != strings.Join(want, "|") {
		t.Fatalf("calls %q, want %q", ph.calls, want)
	}
}

func TestRunChainFailures(t *testing.T) {
	h := newHarness(t, withPhases(&recordingPhase{name: "pinning", mutateErr: errors.New("no exclusive CPUs left")}))
	res := h.sync(webPod.DeepCopy())
	w := res.Waiting["app"]
	if w.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(w.Message, "pinning: no exclusive CPUs left") {
		t.Fatalf("waiting %+v, want CreateContainerConfigError naming the phase", w)
	}
	if n := len(h.fake.Containers()); n != 0 {
		t.Fatalf("%d containers created despite the failed mutator", n)
	}

	h = newHarness(t, withPhases(&recordingPhase{name: "warm-up", startErr: errors.New("cache not warm")}))
	res = h.sync(webPod.DeepCopy())
	w = res.Waiting["app"]
	if w.Reason != cri.ReasonPostStartHookError || !strings.Contains(w.Message, "phase output") {
		t.Fatalf("waiting %+v, want PostStartHookError with the phase's output", w)
	}
	if cs := h.fake.Containers(); len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("containers %+v: the failed post-start phase must kill the container", cs)
	}
}

// cgroupPhase is a sandbox mutator that sets a cgroup parent, or fails.
type cgroupPhase struct{ err error }

func (cgroupPhase) Name() string { return "pod-cgroups" }

func (p cgroupPhase) MutateSandbox(_ context.Context, pd *v1.Pod, cfg *runtimeapi.PodSandboxConfig) error {
	cfg.Linux.CgroupParent = "/kubepods/pod" + string(pd.UID)
	return p.err
}

// A sandbox mutator's config reaches RunPodSandbox and every
// CreateContainer's SandboxConfig; its failure makes neither.
func TestSandboxMutator(t *testing.T) {
	h := newHarness(t, withPhases(cgroupPhase{}))
	p := webPod.DeepCopy()
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("sync: %+v", res)
	}
	want := "/kubepods/pod" + string(p.UID)
	sbs := h.fake.Sandboxes()
	if len(sbs) != 1 || sbs[0].Config.Linux.GetCgroupParent() != want {
		t.Fatalf("sandboxes %+v, want one with cgroup parent %q", sbs, want)
	}
	creates := 0
	for _, c := range h.fake.Calls() {
		if req, ok := c.Request.(*runtimeapi.CreateContainerRequest); ok {
			creates++
			if got := req.SandboxConfig.Linux.GetCgroupParent(); got != want {
				t.Errorf("CreateContainer's sandbox config cgroup parent %q, want %q", got, want)
			}
		}
	}
	if creates == 0 {
		t.Fatal("no CreateContainer call")
	}

	h = newHarness(t, withPhases(cgroupPhase{err: errors.New("read-only cgroup file system")}))
	res := h.sync(webPod.DeepCopy())
	if res.Err == nil || !strings.Contains(res.Err.Error(), "pod-cgroups: read-only cgroup file system") || res.RetryAfter == 0 {
		t.Fatalf("result %+v, want the phase's error and a retry", res)
	}
	if n := len(h.fake.Sandboxes()); n != 0 {
		t.Fatalf("%d sandboxes made despite the failed sandbox mutator", n)
	}
}
