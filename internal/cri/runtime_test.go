package cri_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// webPod is a static pod with one container whose image is always pulled.
var webPod = func() *v1.Pod {
	grace := int64(30)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "default", UID: "uid-1",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"kubernetes.io/config.hash": "hash-1"},
		},
		Spec: v1.PodSpec{
			NodeName:                      "node1",
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "app", Image: "nginx:latest", ImagePullPolicy: v1.PullAlways,
				Env:                    []v1.EnvVar{{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				TerminationMessagePath: v1.TerminationMessagePathDefault,
			}},
		},
	}
}()

// twoContainerPod adds a sidecar to webPod.
var twoContainerPod = func() *v1.Pod {
	p := webPod.DeepCopy()
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent})
	return p
}()

// initPod has two init containers before webPod's container.
var initPod = func() *v1.Pod {
	p := webPod.DeepCopy()
	p.Spec.InitContainers = []v1.Container{
		{Name: "init-0", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent},
		{Name: "init-1", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent},
	}
	return p
}()

type harness struct {
	t     *testing.T
	fake  *critest.Fake
	rt    *cri.Runtime
	clock *testclock.FakeClock
	logs  string
	root  string
}

func newHarness(t *testing.T, opts ...func(*cri.Config)) *harness {
	t.Helper()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &harness{t: t, fake: critest.New(clk), clock: clk, logs: t.TempDir(), root: volumeRoot(t)}
	cfg := cri.Config{
		Client:     h.fake,
		Logger:     zaptest.NewLogger(t),
		Clock:      clk,
		RootDir:    h.root,
		PodLogsDir: h.logs,
		NodeName:   "node1",
		NodeIP:     "192.168.1.10",
		// The kubelet's container GC defaults.
		ContainerGCMaxPerPodContainer: 1,
		ContainerGCMaxContainers:      -1,
	}
	for _, o := range opts {
		o(&cfg)
	}
	rt, err := cri.New(cfg)
	if err != nil {
		t.Fatalf("cri.New() error = %v", err)
	}
	h.rt = rt
	return h
}

func (h *harness) status(p *v1.Pod) *pod.RuntimeStatus {
	h.t.Helper()
	ctx := context.Background()
	pods, err := h.rt.ListPods(ctx)
	if err != nil {
		h.t.Fatalf("ListPods() error = %v", err)
	}
	for _, listed := range pods {
		if listed.UID == p.UID {
			st, err := h.rt.InspectPod(ctx, listed, nil)
			if err != nil {
				h.t.Fatalf("InspectPod() error = %v", err)
			}
			return st
		}
	}
	return &pod.RuntimeStatus{UID: p.UID}
}

// sync reads the pod's status, forgets the calls made so far and syncs
// once, so Methods() afterwards holds only the sync's calls.
func (h *harness) sync(p *v1.Pod) pod.SyncResult {
	h.t.Helper()
	st := h.status(p)
	h.fake.ResetCalls()
	return h.rt.SyncPod(context.Background(), p, st)
}

// only returns the requests of one method, in order.
func only[T any](calls []critest.Call, method string) []T {
	var out []T
	for _, c := range calls {
		if c.Method == method {
			out = append(out, c.Request.(T))
		}
	}
	return out
}

// latest returns the newest fake container named name.
func (h *harness) latest(name string) critest.Container {
	h.t.Helper()
	cs := h.fake.Containers()
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Config.GetMetadata().GetName() == name {
			return cs[i]
		}
	}
	h.t.Fatalf("no container %q", name)
	return critest.Container{}
}

func TestNewRequiresConfig(t *testing.T) {
	good := cri.Config{Client: critest.New(testclock.NewFakeClock(time.Unix(0, 0))), Logger: zaptest.NewLogger(t),
		Clock: testclock.NewFakeClock(time.Unix(0, 0)), RootDir: "/r", PodLogsDir: "/l"}
	tests := []struct {
		name   string
		mutate func(c *cri.Config)
		ok     bool
	}{
		{name: "complete", mutate: func(*cri.Config) {}, ok: true},
		{name: "no client", mutate: func(c *cri.Config) { c.Client = nil }},
		{name: "no logger", mutate: func(c *cri.Config) { c.Logger = nil }},
		{name: "no clock", mutate: func(c *cri.Config) { c.Clock = nil }},
		{name: "no root dir", mutate: func(c *cri.Config) { c.RootDir = "" }},
		{name: "no pod logs dir", mutate: func(c *cri.Config) { c.PodLogsDir = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.mutate(&cfg)
			if _, err := cri.New(cfg); (err == nil) != tt.ok {
				t.Errorf("New() error = %v, want ok = %v", err, tt.ok)
			}
		})
	}
}

func TestSyncPodNewPod(t *testing.T) {
	h := newHarness(t)
	res := h.sync(webPod)
	if diff := cmp.Diff(pod.SyncResult{}, res); diff != "" {
		t.Fatalf("SyncPod() result (-want +got):\n%s", diff)
	}
	wantMethods := []string{"RunPodSandbox", "PodSandboxStatus", "PullImage", "ImageStatus", "CreateContainer", "StartContainer"}
	if diff := cmp.Diff(wantMethods, h.fake.Methods()); diff != "" {
		t.Fatalf("CRI calls (-want +got):\n%s", diff)
	}
	calls := h.fake.Calls()

	// Sandbox.
	sbReq := only[*runtimeapi.RunPodSandboxRequest](calls, "RunPodSandbox")[0]
	logDir := filepath.Join(h.logs, "default_web-node1_uid-1")
	if got := sbReq.Config.LogDirectory; got != logDir {
		t.Errorf("sandbox LogDirectory = %q, want %q", got, logDir)
	}
	if fi, err := os.Stat(logDir); err != nil || !fi.IsDir() {
		t.Errorf("pod log directory not created: %v", err)
	}
	md := sbReq.Config.Metadata
	if md.Name != "web-node1" || md.Namespace != "default" || md.Uid != "uid-1" || md.Attempt != 0 {
		t.Errorf("sandbox metadata = %v, want web-node1/default/uid-1 attempt 0", md)
	}
	wantSbLabels := map[string]string{
		"app":                 "web",
		cri.LabelPodName:      "web-node1",
		cri.LabelPodNamespace: "default",
		cri.LabelPodUID:       "uid-1",
		cri.LabelManaged:      "true",
		cri.LabelNode:         "node1",
	}
	if diff := cmp.Diff(wantSbLabels, sbReq.Config.Labels); diff != "" {
		t.Errorf("sandbox labels (-want +got):\n%s", diff)
	}
	if got := sbReq.Config.Annotations[cri.AnnotationSpecHash]; got != "hash-1" {
		t.Errorf("sandbox spec-hash annotation = %q, want hash-1", got)
	}
	if got := sbReq.Config.Hostname; got != "web-node1" {
		t.Errorf("sandbox hostname = %q, want web-node1", got)
	}

	// Image.
	pull := only[*runtimeapi.PullImageRequest](calls, "PullImage")[0]
	if pull.Image.Image != "nginx:latest" || pull.SandboxConfig == nil {
		t.Errorf("PullImage request = %v, want nginx:latest with the sandbox config", pull)
	}

	// Container.
	sandboxID := h.fake.Sandboxes()[0].ID
	create := only[*runtimeapi.CreateContainerRequest](calls, "CreateContainer")[0]
	if create.PodSandboxId != sandboxID {
		t.Errorf("CreateContainer sandbox = %q, want %q", create.PodSandboxId, sandboxID)
	}
	cfg := create.Config
	if cfg.Metadata.Name != "app" || cfg.Metadata.Attempt != 0 {
		t.Errorf("container metadata = %v, want app attempt 0", cfg.Metadata)
	}
	if cfg.LogPath != "app/0.log" {
		t.Errorf("container LogPath = %q, want app/0.log", cfg.LogPath)
	}
	if fi, err := os.Stat(filepath.Join(logDir, "app")); err != nil || !fi.IsDir() {
		t.Errorf("container log directory not created: %v", err)
	}
	if cfg.Image.Image != critest.ImageRef("nginx:latest") || cfg.Image.UserSpecifiedImage != "nginx:latest" {
		t.Errorf("container image = %v, want the pulled ref and the user's nginx:latest", cfg.Image)
	}
	wantCLabels := map[string]string{
		cri.LabelPodName:       "web-node1",
		cri.LabelPodNamespace:  "default",
		cri.LabelPodUID:        "uid-1",
		cri.LabelContainerName: "app",
		cri.LabelManaged:       "true",
		cri.LabelNode:          "node1",
	}
	if diff := cmp.Diff(wantCLabels, cfg.Labels); diff != "" {
		t.Errorf("container labels (-want +got):\n%s", diff)
	}
	if got := cfg.Annotations[cri.AnnotationRestartCount]; got != "0" {
		t.Errorf("restartCount annotation = %q, want 0", got)
	}
	if got := cfg.Annotations[cri.AnnotationAgentHash]; got != cri.HashContainer(&webPod.Spec.Containers[0]) {
		t.Errorf("nodeagent's container hash annotation = %q, want the spec's hash", got)
	}
	if got := cfg.Annotations[cri.AnnotationContainerHash]; got != cri.KubeletHash(&webPod.Spec.Containers[0]) {
		t.Errorf("container hash annotation = %q, want the kubelet's hash", got)
	}
	sbIP := h.fake.Sandboxes()[0].IP
	var env []string
	for _, kv := range cfg.Envs {
		env = append(env, kv.Key+"="+string(kv.Value))
	}
	if diff := cmp.Diff([]string{"POD_IP=" + sbIP}, env); diff != "" {
		t.Errorf("container env (-want +got):\n%s", diff)
	}
	var termMount *runtimeapi.Mount
	for _, m := range cfg.Mounts {
		if m.ContainerPath == v1.TerminationMessagePathDefault {
			termMount = m
		}
	}
	if termMount == nil || !strings.HasPrefix(termMount.HostPath, filepath.Join(h.root, "pods", "uid-1")) {
		t.Errorf("termination message mount = %v, want a file under the pod directory", termMount)
	}
	start := only[*runtimeapi.StartContainerRequest](calls, "StartContainer")[0]
	if start.ContainerId != h.latest("app").ID {
		t.Errorf("StartContainer(%q), want the created container %q", start.ContainerId, h.latest("app").ID)
	}

	// What the runtime now reports.
	st := h.status(webPod)
	if sb := st.LatestSandbox(); sb == nil || sb.ID != sandboxID || sb.IP != sbIP || sb.SpecHash != "hash-1" ||
		sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("PodStatus sandbox = %+v, want %s ready with IP %s and hash-1", sb, sandboxID, sbIP)
	}
	if c := st.Latest("app", false); c == nil || c.State != pod.ContainerRunning || c.Hash != cri.HashContainer(&webPod.Spec.Containers[0]) {
		t.Errorf("PodStatus container = %+v, want app running with the spec hash", c)
	}

	// A second sync has nothing to do.
	if res := h.sync(webPod); res.Err != nil || len(res.Waiting) != 0 {
		t.Errorf("second SyncPod() = %+v, want nothing to report", res)
	}
	if got := h.fake.Methods(); len(got) != 0 {
		t.Errorf("second SyncPod() made CRI calls %v, want none", got)
	}
}

func TestSyncPodPullPolicies(t *testing.T) {
	tests := []struct {
		name        string
		policy      v1.PullPolicy
		present     bool
		wantMethods []string
		wantWaiting map[string]pod.Waiting
	}{
		{
			name: "IfNotPresent, image present: no pull", policy: v1.PullIfNotPresent, present: true,
			wantMethods: []string{"ImageStatus", "CreateContainer", "StartContainer"},
		},
		{
			name: "IfNotPresent, image missing: pull", policy: v1.PullIfNotPresent,
			wantMethods: []string{"ImageStatus", "PullImage", "ImageStatus", "CreateContainer", "StartContainer"},
		},
		{
			name: "Always, image present: pull anyway", policy: v1.PullAlways, present: true,
			wantMethods: []string{"PullImage", "ImageStatus", "CreateContainer", "StartContainer"},
		},
		{
			name: "Never, image present", policy: v1.PullNever, present: true,
			wantMethods: []string{"ImageStatus", "CreateContainer", "StartContainer"},
		},
		{
			name: "Never, image missing: ErrImageNeverPull", policy: v1.PullNever,
			wantMethods: []string{"ImageStatus"},
			wantWaiting: map[string]pod.Waiting{"app": {Reason: cri.ReasonErrImageNeverPull,
				Message: `Container image "nginx:latest" is not present with pull policy of Never`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			if tt.present {
				h.fake.AddImage("nginx:latest")
			}
			p := webPod.DeepCopy()
			p.Spec.Containers[0].ImagePullPolicy = tt.policy
			res := h.sync(p)
			var methods []string
			for _, m := range h.fake.Methods() {
				if m != "RunPodSandbox" && m != "PodSandboxStatus" {
					methods = append(methods, m)
				}
			}
			if diff := cmp.Diff(tt.wantMethods, methods); diff != "" {
				t.Errorf("CRI calls after the sandbox (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWaiting, res.Waiting); diff != "" {
				t.Errorf("Waiting (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSyncPodImagePullBackOff(t *testing.T) {
	h := newHarness(t)
	h.fake.SetError("PullImage", status.Error(codes.Unknown, "registry down"))

	res := h.sync(webPod)
	w := res.Waiting["app"]
	if w.Reason != cri.ReasonErrImagePull || !strings.Contains(w.Message, "registry down") {
		t.Errorf("Waiting[app] = %+v, want ErrImagePull mentioning the registry error", w)
	}
	// Back after 1s to report the backoff, not after the whole 10s.
	if res.Err == nil || res.RetryAfter != time.Second {
		t.Errorf("Err/RetryAfter = %v/%v, want an error and 1s", res.Err, res.RetryAfter)
	}
	if n := len(h.fake.Sandboxes()); n != 1 {
		t.Errorf("sandboxes = %d, want 1 (the sandbox stays for the retry)", n)
	}
	if n := len(h.fake.Containers()); n != 0 {
		t.Errorf("containers = %d, want none", n)
	}

	// Within the backoff: no pull, ImagePullBackOff.
	res = h.sync(webPod)
	if w := res.Waiting["app"]; w.Reason != cri.ReasonImagePullBackOff || w.Message != `Back-off pulling image "nginx:latest"` {
		t.Errorf("Waiting[app] = %+v, want ImagePullBackOff", w)
	}
	if res.RetryAfter != 10*time.Second {
		t.Errorf("RetryAfter = %v, want 10s", res.RetryAfter)
	}
	if slices.Contains(h.fake.Methods(), "PullImage") {
		t.Errorf("PullImage called during the backoff: %v", h.fake.Methods())
	}
	if slices.Contains(h.fake.Methods(), "RunPodSandbox") {
		t.Errorf("a new sandbox was made during the image backoff: %v", h.fake.Methods())
	}
}

func TestSyncPodImagePullBackOffExpires(t *testing.T) {
	h := newHarness(t)
	h.fake.SetError("PullImage", status.Error(codes.Unknown, "registry down"))
	h.sync(webPod) // ErrImagePull, backoff 10s

	h.clock.Step(4 * time.Second)
	res := h.sync(webPod)
	if w := res.Waiting["app"]; w.Reason != cri.ReasonImagePullBackOff || res.RetryAfter != 6*time.Second {
		t.Errorf("4s into the backoff: Waiting = %+v, RetryAfter = %v; want ImagePullBackOff and 6s", w, res.RetryAfter)
	}

	h.fake.SetError("PullImage", nil)
	h.clock.Step(7 * time.Second)
	res = h.sync(webPod)
	if !slices.Contains(h.fake.Methods(), "PullImage") {
		t.Fatalf("11s after a failed pull (backoff 10s) no new pull; calls %v, result %+v", h.fake.Methods(), res)
	}
	if res.Err != nil || len(res.Waiting) != 0 {
		t.Errorf("SyncPod() after the backoff = %+v, want the container started", res)
	}
}

func TestSyncPodCrashLoopBackOff(t *testing.T) {
	h := newHarness(t)
	h.fake.AddImage("nginx:latest")
	p := webPod.DeepCopy()
	p.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent

	if res := h.sync(p); res.Err != nil {
		t.Fatalf("first SyncPod() = %+v", res)
	}
	first := h.latest("app")

	// First crash: restarted at once.
	h.clock.Step(time.Minute)
	if err := h.fake.ExitContainer(first.ID, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	res := h.sync(p)
	if res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() after the first crash = %+v, want an immediate restart", res)
	}
	second := h.latest("app")
	if second.ID == first.ID || second.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("no new running container after the first crash: %+v", second)
	}
	if second.Config.Metadata.Attempt != 1 || second.Config.LogPath != "app/1.log" ||
		second.Config.Annotations[cri.AnnotationRestartCount] != "1" {
		t.Errorf("restarted container attempt/logPath/restartCount = %d/%q/%q, want 1/app/1.log/1",
			second.Config.Metadata.Attempt, second.Config.LogPath, second.Config.Annotations[cri.AnnotationRestartCount])
	}
	if second.SandboxID != first.SandboxID {
		t.Errorf("restart made a new sandbox %q (was %q)", second.SandboxID, first.SandboxID)
	}

	// Second crash: CrashLoopBackOff for 10s from the exit.
	h.clock.Step(time.Second)
	if err := h.fake.ExitContainer(second.ID, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	res = h.sync(p)
	w := res.Waiting["app"]
	if w.Reason != cri.ReasonCrashLoopBackOff || !strings.Contains(w.Message, "back-off 10s restarting failed container=app pod=web-node1(uid-1)") {
		t.Errorf("Waiting[app] = %+v, want CrashLoopBackOff with a 10s back-off", w)
	}
	if res.RetryAfter != 10*time.Second {
		t.Errorf("RetryAfter = %v, want 10s", res.RetryAfter)
	}
	if slices.Contains(h.fake.Methods(), "CreateContainer") {
		t.Errorf("a container was created during the backoff: %v", h.fake.Methods())
	}

	// The remaining time counts from the exit.
	h.clock.Step(4 * time.Second)
	if res := h.sync(p); res.Waiting["app"].Reason != cri.ReasonCrashLoopBackOff || res.RetryAfter != 6*time.Second {
		t.Errorf("4s later: Waiting = %+v, RetryAfter = %v; want CrashLoopBackOff and 6s", res.Waiting, res.RetryAfter)
	}

	// After the backoff: restarted.
	h.clock.Step(6*time.Second + time.Millisecond)
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() after the backoff = %+v, want a restart", res)
	}
	third := h.latest("app")
	if third.ID == second.ID || third.Config.Metadata.Attempt != 2 {
		t.Fatalf("third instance = %+v, want a new container with attempt 2", third)
	}

	// Third crash right away: the delay doubles.
	if err := h.fake.ExitContainer(third.ID, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	if res := h.sync(p); res.Waiting["app"].Reason != cri.ReasonCrashLoopBackOff || res.RetryAfter != 20*time.Second {
		t.Errorf("after the third crash: Waiting = %+v, RetryAfter = %v; want CrashLoopBackOff and 20s", res.Waiting, res.RetryAfter)
	}
}

func TestSyncPodInitContainersInOrder(t *testing.T) {
	h := newHarness(t)
	h.fake.AddImage("busybox:1.36")

	steps := []struct {
		name      string
		exit      string // container to exit (code 0) before the sync
		wantStart string // container the sync must create
	}{
		{name: "new pod", wantStart: "init-0"},
		{name: "init-0 still running", wantStart: ""},
		{name: "init-0 done", exit: "init-0", wantStart: "init-1"},
		{name: "init-1 done", exit: "init-1", wantStart: "app"},
		{name: "running", wantStart: ""},
	}
	for _, s := range steps {
		if s.exit != "" {
			if err := h.fake.ExitContainer(h.latest(s.exit).ID, 0, "Completed"); err != nil {
				t.Fatal(err)
			}
		}
		res := h.sync(initPod)
		if res.Err != nil {
			t.Fatalf("%s: SyncPod() = %+v", s.name, res)
		}
		var started []string
		for _, c := range only[*runtimeapi.CreateContainerRequest](h.fake.Calls(), "CreateContainer") {
			started = append(started, c.Config.Metadata.Name)
		}
		var want []string
		if s.wantStart != "" {
			want = []string{s.wantStart}
		}
		if diff := cmp.Diff(want, started); diff != "" {
			t.Errorf("%s: containers created (-want +got):\n%s", s.name, diff)
		}
	}
	if n := len(h.fake.Sandboxes()); n != 1 {
		t.Errorf("sandboxes = %d, want 1", n)
	}
	if got := h.latest("init-0").Config.Annotations[cri.AnnotationInit]; got != "true" {
		t.Errorf("init container annotation = %q, want true", got)
	}
	st := h.status(initPod)
	if c := st.Latest("init-1", true); c == nil || c.State != pod.ContainerExited {
		t.Errorf("PodStatus init-1 = %+v, want an exited init container", c)
	}
}

func TestSyncPodSandboxReplacedOnSpecChange(t *testing.T) {
	h := newHarness(t)
	h.sync(webPod)
	old := h.fake.Sandboxes()[0]

	changed := webPod.DeepCopy()
	changed.Annotations["kubernetes.io/config.hash"] = "hash-2"
	res := h.sync(changed)
	if res.Err != nil {
		t.Fatalf("SyncPod() = %+v", res)
	}
	wantMethods := []string{"StopContainer", "StopPodSandbox", "RunPodSandbox", "PodSandboxStatus", "PullImage", "ImageStatus", "CreateContainer", "StartContainer"}
	if diff := cmp.Diff(wantMethods, h.fake.Methods()); diff != "" {
		t.Errorf("CRI calls (-want +got):\n%s", diff)
	}
	sbs := h.fake.Sandboxes()
	if len(sbs) != 2 || sbs[0].ID != old.ID || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandboxes = %+v, want the old one stopped and a new one", sbs)
	}
	if sbs[1].Config.Metadata.Attempt != 1 || sbs[1].Config.Annotations[cri.AnnotationSpecHash] != "hash-2" {
		t.Errorf("new sandbox attempt/hash = %d/%q, want 1/hash-2", sbs[1].Config.Metadata.Attempt, sbs[1].Config.Annotations[cri.AnnotationSpecHash])
	}
}

func TestSandboxHostname(t *testing.T) {
	tests := []struct {
		name     string
		mutate   func(p *v1.Pod)
		wantHost string
	}{
		{name: "pod name", mutate: func(*v1.Pod) {}, wantHost: "web-node1"},
		{name: "spec.hostname wins", mutate: func(p *v1.Pod) { p.Spec.Hostname = "www" }, wantHost: "www"},
		{name: "host network keeps the node's", mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true }, wantHost: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			p := webPod.DeepCopy()
			tt.mutate(p)
			h.sync(p)
			if got := h.fake.Sandboxes()[0].Config.Hostname; got != tt.wantHost {
				t.Errorf("sandbox hostname = %q, want %q", got, tt.wantHost)
			}
		})
	}
}

func TestSandboxHostnameTruncated(t *testing.T) {
	h := newHarness(t)
	p := webPod.DeepCopy()
	p.Name = strings.Repeat("a", 62) + "-bcd-node1" // 72 characters; the 63rd is '-'
	h.sync(p)
	if got, want := h.fake.Sandboxes()[0].Config.Hostname, strings.Repeat("a", 62); got != want {
		t.Errorf("sandbox hostname = %q (%d characters), want %q", got, len(got), want)
	}
}

func TestSyncPodSandboxError(t *testing.T) {
	h := newHarness(t)
	h.fake.SetError("RunPodSandbox", status.Error(codes.Unknown, "cni plugin not initialized"))
	res := h.sync(webPod)
	if !strings.Contains(res.SandboxError, "cni plugin not initialized") || res.Err == nil || res.RetryAfter != 10*time.Second {
		t.Errorf("SyncPod() = %+v, want SandboxError, Err and a 10s retry", res)
	}
	if diff := cmp.Diff([]string{"RunPodSandbox"}, h.fake.Methods()); diff != "" {
		t.Errorf("CRI calls (-want +got):\n%s", diff)
	}
}

func TestSyncPodStartErrors(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		wantReason string
	}{
		{name: "create fails", method: "CreateContainer", wantReason: cri.ReasonCreateContainerError},
		// The created container is rolled back (removed).
		{name: "start fails", method: "StartContainer", wantReason: cri.ReasonRunContainerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.SetError(tt.method, status.Error(codes.Unknown, "boom"))
			res := h.sync(webPod)
			if w := res.Waiting["app"]; w.Reason != tt.wantReason || !strings.Contains(w.Message, "boom") {
				t.Errorf("Waiting[app] = %+v, want %s mentioning boom", w, tt.wantReason)
			}
			if res.Err == nil || res.RetryAfter != 10*time.Second {
				t.Errorf("Err/RetryAfter = %v/%v, want an error and 10s", res.Err, res.RetryAfter)
			}
			if left := h.fake.Containers(); len(left) != 0 {
				t.Errorf("containers left after a failed start: %+v, want none", left)
			}
		})
	}
}

// A start the runtime records as an exit (containerd: 128, StartError) is
// kept, as the kubelet keeps it: the restart policy and the restart count
// are judged on it.
func TestSyncPodStartRecordedAsExitIsKept(t *testing.T) {
	h := newHarness(t)
	h.fake.FailStarts(128)
	res := h.sync(webPod)
	if w := res.Waiting["app"]; w.Reason != cri.ReasonRunContainerError {
		t.Errorf("Waiting[app] = %+v, want RunContainerError", w)
	}
	cs := h.fake.Containers()
	if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_EXITED || cs[0].ExitCode != 128 {
		t.Fatalf("containers after a start recorded as an exit: %+v, want the exited instance kept", cs)
	}
}

func TestSyncPodConfigError(t *testing.T) {
	h := newHarness(t)
	p := webPod.DeepCopy()
	p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}}
	res := h.sync(p)
	if w := res.Waiting["app"]; w.Reason != cri.ReasonCreateContainerConfigError {
		t.Errorf("Waiting[app] = %+v, want CreateContainerConfigError", w)
	}
	if slices.Contains(h.fake.Methods(), "CreateContainer") {
		t.Errorf("CreateContainer called with a config error: %v", h.fake.Methods())
	}
}

// indexes returns the positions of method in methods.
func indexes(methods []string, method string) []int {
	var out []int
	for i, m := range methods {
		if m == method {
			out = append(out, i)
		}
	}
	return out
}

func TestKillPod(t *testing.T) {
	h := newHarness(t)
	h.sync(twoContainerPod)
	st := h.status(twoContainerPod)
	if len(st.Containers) != 2 || len(st.Sandboxes) != 1 {
		t.Fatalf("set-up: status = %+v, want 2 containers in 1 sandbox", st)
	}
	podDir := filepath.Join(h.root, "pods", "uid-1")
	logDir := filepath.Join(h.logs, "default_web-node1_uid-1")
	for _, d := range []string{podDir, logDir} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("set-up: %s missing: %v", d, err)
		}
	}

	h.fake.ResetCalls()
	if err := h.rt.KillPod(context.Background(), twoContainerPod, st, -1); err != nil {
		t.Fatalf("KillPod() error = %v", err)
	}
	methods := h.fake.Methods()
	stops := indexes(methods, "StopContainer")
	stopSb := indexes(methods, "StopPodSandbox")
	removeSb := indexes(methods, "RemovePodSandbox")
	if len(stops) != 2 || len(stopSb) != 1 || len(removeSb) != 1 {
		t.Fatalf("CRI calls %v, want 2 StopContainer, 1 StopPodSandbox, 1 RemovePodSandbox", methods)
	}
	if stops[1] > stopSb[0] || stopSb[0] > removeSb[0] {
		t.Errorf("CRI calls %v, want containers stopped, then the sandbox stopped, then removed", methods)
	}
	for _, req := range only[*runtimeapi.StopContainerRequest](h.fake.Calls(), "StopContainer") {
		if req.Timeout != 30 {
			t.Errorf("StopContainer(%s) timeout = %d, want the pod's grace 30", req.ContainerId, req.Timeout)
		}
	}
	if n, m := len(h.fake.Sandboxes()), len(h.fake.Containers()); n != 0 || m != 0 {
		t.Errorf("runtime still has %d sandboxes and %d containers", n, m)
	}
	for _, d := range []string{podDir, logDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still exists after KillPod (stat: %v)", d, err)
		}
	}

	// Idempotent: the stale status names things that are gone.
	if err := h.rt.KillPod(context.Background(), twoContainerPod, st, -1); err != nil {
		t.Errorf("second KillPod() error = %v, want nil", err)
	}
}

func TestKillPodGracePeriod(t *testing.T) {
	tests := []struct {
		name     string
		pod      *v1.Pod
		override int64
		want     int64
	}{
		{name: "pod's own", pod: webPod, override: -1, want: 30},
		{name: "override", pod: webPod, override: 5, want: 5},
		{name: "orphan: the grace recorded on the container", pod: nil, override: -1, want: 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.sync(webPod)
			st := h.status(webPod)
			h.fake.ResetCalls()
			if err := h.rt.KillPod(context.Background(), tt.pod, st, tt.override); err != nil {
				t.Fatalf("KillPod() error = %v", err)
			}
			reqs := only[*runtimeapi.StopContainerRequest](h.fake.Calls(), "StopContainer")
			if len(reqs) != 1 || reqs[0].Timeout != tt.want {
				t.Errorf("StopContainer requests = %v, want one with timeout %d", reqs, tt.want)
			}
		})
	}
}

func TestKillPodStopError(t *testing.T) {
	h := newHarness(t)
	h.sync(webPod)
	st := h.status(webPod)
	stopErr := status.Error(codes.Unknown, "stuck")
	h.fake.SetError("StopContainer", stopErr)
	h.fake.ResetCalls()

	err := h.rt.KillPod(context.Background(), webPod, st, -1)
	if err == nil || !strings.Contains(err.Error(), "stuck") {
		t.Fatalf("KillPod() error = %v, want the stop error", err)
	}
	if diff := cmp.Diff([]string{"StopContainer"}, h.fake.Methods()); diff != "" {
		t.Errorf("CRI calls (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(h.logs, "default_web-node1_uid-1")); err != nil {
		t.Errorf("pod log directory removed although the pod was not killed: %v", err)
	}

	// NotFound is success: the container is already gone.
	h.fake.SetError("StopContainer", status.Error(codes.NotFound, "no such container"))
	if err := h.rt.KillPod(context.Background(), webPod, st, -1); err != nil {
		t.Errorf("KillPod() with NotFound stops = %v, want nil", err)
	}
}

func TestPodStatusTranslatesErrors(t *testing.T) {
	tests := []struct {
		name string
		code codes.Code
		want error
	}{
		{name: "unavailable", code: codes.Unavailable, want: cri.ErrUnavailable},
		{name: "deadline", code: codes.DeadlineExceeded, want: cri.ErrUnavailable},
		{name: "not found", code: codes.NotFound, want: cri.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.SetError("ListPodSandbox", status.Error(tt.code, "x"))
			_, err := h.rt.ListPods(context.Background())
			if !errors.Is(err, tt.want) {
				t.Errorf("ListPods() error = %v, want errors.Is %v", err, tt.want)
			}
		})
	}
}

func TestListPods(t *testing.T) {
	h := newHarness(t)
	h.sync(webPod)
	other := twoContainerPod.DeepCopy()
	other.Name, other.UID = "db-node1", "uid-0"
	h.sync(other)

	got, err := h.rt.ListPods(context.Background())
	if err != nil {
		t.Fatalf("ListPods() error = %v", err)
	}
	type view struct {
		UID        pod.UID
		Name       string
		Sandboxes  int
		Containers []string
	}
	var views []view
	for _, st := range got {
		v := view{UID: st.UID, Name: st.Name, Sandboxes: len(st.Sandboxes)}
		for _, c := range st.Containers {
			v.Containers = append(v.Containers, c.Name+"/"+c.State.String())
		}
		slices.Sort(v.Containers)
		views = append(views, v)
	}
	want := []view{
		{UID: "uid-0", Name: "db-node1", Sandboxes: 1, Containers: []string{"app/running", "side/running"}},
		{UID: "uid-1", Name: "web-node1", Sandboxes: 1, Containers: []string{"app/running"}},
	}
	if diff := cmp.Diff(want, views); diff != "" {
		t.Errorf("ListPods() (-want +got):\n%s", diff)
	}
}

// InspectPod inspects only what changed since the previous view.
func TestInspectPodReusesUnchangedContainers(t *testing.T) {
	h := newHarness(t)
	h.sync(webPod)
	ctx := context.Background()
	list := func() *pod.RuntimeStatus {
		pods, err := h.rt.ListPods(ctx)
		if err != nil || len(pods) != 1 {
			t.Fatalf("ListPods = %v, %v", pods, err)
		}
		return pods[0]
	}
	first, err := h.rt.InspectPod(ctx, list(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.fake.ResetCalls()
	second, err := h.rt.InspectPod(ctx, list(), first)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h.fake.Methods() {
		if m == "ContainerStatus" || m == "PodSandboxStatus" {
			t.Fatalf("unchanged pod re-inspected: %v", h.fake.Methods())
		}
	}
	if second.LatestSandbox().IP == "" || len(second.Containers) != len(first.Containers) {
		t.Fatalf("reused view lost data: %+v", second)
	}
	c := second.Containers[0]
	if err := h.fake.ExitContainer(c.ID, 3, "Error"); err != nil {
		t.Fatal(err)
	}
	h.fake.ResetCalls()
	third, err := h.rt.InspectPod(ctx, list(), second)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range h.fake.Methods() {
		if m == "ContainerStatus" {
			n++
		}
	}
	if n != 1 || third.Containers[0].ExitCode != 3 {
		t.Fatalf("want one inspection and exit code 3, got %d calls and %+v", n, third.Containers[0])
	}
}

// Garbage collection (the kubelet's defaults) keeps the newest dead
// instance of each container, and removes older dead ones with their log
// files.
func TestSyncPodCollectsOldDeadContainers(t *testing.T) {
	h := newHarness(t)
	h.sync(webPod)
	crash := func() {
		t.Helper()
		for _, c := range h.fake.Containers() {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				if err := h.fake.ExitContainer(c.ID, 1, "Error"); err != nil {
					t.Fatal(err)
				}
			}
		}
		h.clock.Step(10 * time.Minute) // past any backoff
		h.sync(webPod)
	}
	crash() // instances 0 (dead), 1 (running)
	// The runtime writes the log files; the fake does not.
	logDir := filepath.Join(h.logs, "default_web-node1_uid-1", "app")
	for _, n := range []string{"0.log", "0.log.20261201-101500.gz", "0.log.20261201-101510", "1.log", "1.log.20261201-101500.gz", "2.log", "10.log"} {
		if err := os.WriteFile(filepath.Join(logDir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	crash() // 1 dead, 0 dead: the sync collects 0, then starts 2
	h.sync(webPod)
	var left []string
	for _, c := range h.fake.Containers() {
		left = append(left, c.Config.Annotations[cri.AnnotationRestartCount])
	}
	sort.Strings(left)
	if diff := cmp.Diff([]string{"1", "2"}, left); diff != "" {
		t.Fatalf("containers left by restart count (-want +got):\n%s", diff)
	}
	for _, n := range []string{"0.log", "0.log.20261201-101500.gz", "0.log.20261201-101510"} {
		if _, err := os.Stat(filepath.Join(logDir, n)); !os.IsNotExist(err) {
			t.Fatalf("log %s of the collected instance (or its rotation) still there: %v", n, err)
		}
	}
	for _, n := range []string{"1.log", "1.log.20261201-101500.gz", "2.log", "10.log"} {
		if _, err := os.Stat(filepath.Join(logDir, n)); err != nil {
			t.Fatalf("log %s of a kept instance removed: %v", n, err)
		}
	}
}

// The container GC policy decides, per container, which dead instances
// go: the newest ContainerGCMaxPerPodContainer stay, none younger than
// ContainerGCMinAge goes, and the newest instance always stays.
func TestContainerGCPolicy(t *testing.T) {
	tests := []struct {
		name   string
		minAge time.Duration
		max    int
		// crashes: each kills the running instance and syncs 10 minutes
		// later (a new instance starts); last: whether the newest instance
		// is killed too at the end (dead, waiting for its restart).
		crashes int
		last    bool
		want    []string // restart counts left
	}{
		{name: "kubelet default, newest running: the last dead one stays", max: 1, crashes: 3, want: []string{"2", "3"}},
		{name: "kubelet default, newest dead: only it stays", max: 1, crashes: 3, last: true, want: []string{"3"}},
		{name: "two dead kept", max: 2, crashes: 3, want: []string{"1", "2", "3"}},
		{name: "none kept but the newest instance", max: 0, crashes: 3, last: true, want: []string{"3"}},
		{name: "none kept, newest running", max: 0, crashes: 3, want: []string{"3"}},
		{name: "no limit", max: -1, crashes: 3, want: []string{"0", "1", "2", "3"}},
		{name: "minimum age: only the first instance is old enough", max: 0, minAge: 25 * time.Minute, crashes: 3, want: []string{"1", "2", "3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *cri.Config) {
				c.ContainerGCMinAge, c.ContainerGCMaxPerPodContainer = tc.minAge, tc.max
			})
			h.sync(webPod)
			kill := func() {
				t.Helper()
				for _, c := range h.fake.Containers() {
					if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
						if err := h.fake.ExitContainer(c.ID, 1, "Error"); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			for range tc.crashes {
				kill()
				h.clock.Step(10 * time.Minute) // past any backoff
				h.sync(webPod)
			}
			if tc.last {
				kill()
			}
			h.clock.Step(time.Second) // the newest instance is a second old
			h.sync(webPod)            // sees every instance: collects
			h.sync(webPod)
			var left []string
			for _, c := range h.fake.Containers() {
				left = append(left, c.Config.Annotations[cri.AnnotationRestartCount])
			}
			sort.Strings(left)
			if diff := cmp.Diff(tc.want, left); diff != "" {
				t.Fatalf("containers left by restart count (-want +got):\n%s", diff)
			}
		})
	}
}

// CleanupDirs deletes pod and log directories of this node's pods that
// are not active, and leaves other log directories alone.
func TestCleanupDirs(t *testing.T) {
	h := newHarness(t)
	for _, d := range []string{
		filepath.Join(h.root, "pods", "keep"), filepath.Join(h.root, "pods", "gone"),
		filepath.Join(h.logs, "default_a-node1_keep"), filepath.Join(h.logs, "default_b-node1_gone"), filepath.Join(h.logs, "unrelated"),
		filepath.Join(h.logs, "default_c-othernode_gone"), filepath.Join(h.logs, "kube-system_etcd_gone"),
	} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.rt.CleanupDirs(map[pod.UID]bool{"keep": true})
	for d, want := range map[string]bool{
		filepath.Join(h.root, "pods", "keep"): true, filepath.Join(h.root, "pods", "gone"): false,
		filepath.Join(h.logs, "default_a-node1_keep"): true, filepath.Join(h.logs, "default_b-node1_gone"): false,
		filepath.Join(h.logs, "unrelated"): true,
		// Not this node's: another agent's or the kubelet's.
		filepath.Join(h.logs, "default_c-othernode_gone"): true, filepath.Join(h.logs, "kube-system_etcd_gone"): true,
	} {
		_, err := os.Stat(d)
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", d, got, want)
		}
	}
}

// NetworkReady=false holds pods that need the pod network (no sandbox,
// a NetworkNotReady reason) but not host-network pods.
func TestSyncPodWaitsForTheNetwork(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	fake := critest.New(clk)
	rt, err := cri.New(cri.Config{
		Client: fake, Logger: zaptest.NewLogger(t), Clock: clk, RootDir: t.TempDir(), PodLogsDir: t.TempDir(),
		NodeName: "node1", NetworkHealth: func() error {
			return errors.New("NetworkReady=false (NetworkPluginNotReady: cni config uninitialized)")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := rt.SyncPod(context.Background(), webPod, &pod.RuntimeStatus{UID: webPod.UID})
	if res.SandboxError == "" || !strings.Contains(res.SandboxError, "network is not ready") || res.RetryAfter == 0 {
		t.Fatalf("result %+v, want a network-not-ready sandbox error with a retry", res)
	}
	if slices.Contains(fake.Methods(), "RunPodSandbox") {
		t.Fatal("a sandbox was made while the network is not ready")
	}
	host := webPod.DeepCopy()
	host.Spec.HostNetwork = true
	rt.SyncPod(context.Background(), host, &pod.RuntimeStatus{UID: host.UID})
	if !slices.Contains(fake.Methods(), "RunPodSandbox") {
		t.Fatal("a host-network pod waited for the pod network")
	}
}

// volumeRoot is a temporary root for pod directories whose tmpfs mounts
// (secret and projected volumes) are undone before it is removed.
func volumeRoot(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() { volume.UnmountUnder(dir) })
	return dir
}
