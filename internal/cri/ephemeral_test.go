package cri_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/cri"
)

// debugTarget is an API pod (no config hash) whose container "main"
// sleeps, as kubectl debug's usual target.
var debugTarget = func() *v1.Pod {
	p := webPod.DeepCopy()
	delete(p.Annotations, "kubernetes.io/config.hash")
	p.Spec.Containers = []v1.Container{{
		Name: "main", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
		Command:                []string{"sh", "-c", "while true; do sleep 1; done"},
		TerminationMessagePath: v1.TerminationMessagePathDefault,
	}}
	return p
}()

// dbgContainer is what `kubectl debug --image=busybox:1.36 --target=main
// -c dbg -- sh -c ps` adds (with the API's defaults).
var dbgContainer = v1.EphemeralContainer{
	EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "dbg", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent,
		Command:                  []string{"sh", "-c", "ps"},
		TerminationMessagePath:   v1.TerminationMessagePathDefault,
		TerminationMessagePolicy: v1.TerminationMessageReadFile,
	},
	TargetContainerName: "main",
}

// debugged is p with the ephemeral containers ecs added, as the
// ephemeralcontainers subresource adds them.
func debugged(p *v1.Pod, ecs ...v1.EphemeralContainer) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ecs...)
	return p
}

// methodCount is how many calls of method the last sync made.
func (h *harness) methodCount(method string) int {
	n := 0
	for _, m := range h.fake.Methods() {
		if m == method {
			n++
		}
	}
	return n
}

func TestEphemeralContainerStartedOnceNeverRestarted(t *testing.T) {
	for _, exit := range []int32{0, 1} {
		t.Run(fmt.Sprintf("exit %d", exit), func(t *testing.T) {
			h := newHarness(t)
			if res := h.sync(debugTarget); res.Err != nil {
				t.Fatalf("SyncPod() = %+v", res)
			}
			mainID := h.latest("main").ID
			p := debugged(debugTarget, dbgContainer)

			res := h.sync(p)
			if res.Err != nil || len(res.Waiting) != 0 {
				t.Fatalf("SyncPod() with the ephemeral container = %+v", res)
			}
			if n, m := h.methodCount("CreateContainer"), h.methodCount("StartContainer"); n != 1 || m != 1 {
				t.Fatalf("CreateContainer × %d, StartContainer × %d, want one each: %v", n, m, h.fake.Methods())
			}
			dbg := h.latest("dbg")
			if dbg.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Fatalf("dbg state = %v, want running", dbg.State)
			}
			st := h.status(p)
			if c := st.LatestEphemeral("dbg"); c == nil || c.ID != dbg.ID || c.Init {
				t.Fatalf("runtime view of dbg = %+v, want the ephemeral instance %s", c, dbg.ID)
			}
			if c := st.Latest("dbg", false); c != nil {
				t.Errorf("Latest(dbg, app) = %+v: an ephemeral container passes for an app container", c)
			}

			// Running: nothing to do.
			h.sync(p)
			if n := h.methodCount("CreateContainer") + h.methodCount("StopContainer"); n != 0 {
				t.Fatalf("sync of a running ephemeral container made %v", h.fake.Methods())
			}

			// Exited, whatever its code, under restartPolicy Always: never again.
			if err := h.fake.ExitContainer(dbg.ID, exit, ""); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
					t.Fatalf("SyncPod() after the exit = %+v", res)
				}
				if n := h.methodCount("CreateContainer") + h.methodCount("StartContainer") + h.methodCount("StopContainer"); n != 0 {
					t.Fatalf("sync after the ephemeral container's exit made %v, want nothing started or stopped", h.fake.Methods())
				}
			}
			if got := h.latest("main"); got.ID != mainID || got.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Errorf("main = %s %v, want %s still running", got.ID, got.State, mainID)
			}
			if got := h.latest("dbg"); got.ID != dbg.ID {
				t.Errorf("dbg instance = %s, want the one instance %s", got.ID, dbg.ID)
			}
		})
	}
}

// The CRI config of an ephemeral container is a regular container's
// (command, env, volume mounts, the pod's pull secrets), marked
// ephemeral, in the target's process namespace.
func TestEphemeralContainerConfig(t *testing.T) {
	h := newAPIHarness(t)
	alice := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	h.objs.SetSecret(dockerConfigJSON("regcred", `{"auths":{"registry.example.com":{"auth":"`+alice+`"}}}`))
	h.objs.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "dbg-env"}, Data: map[string]string{"MODE": "deep"}})
	p := debugTarget.DeepCopy()
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	p.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("SyncPod() = %+v", res)
	}
	main := h.latest("main")
	ec := dbgContainer
	ec.Image, ec.ImagePullPolicy = "registry.example.com/tools/debug:1", v1.PullAlways
	ec.Args = []string{"-x"}
	ec.Env = []v1.EnvVar{{Name: "WHO", Value: "debugger"}}
	ec.EnvFrom = []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "dbg-env"}}}}
	ec.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	ec.Stdin, ec.TTY = true, true
	ec.SecurityContext = &v1.SecurityContext{Capabilities: &v1.Capabilities{Add: []v1.Capability{"SYS_PTRACE"}}}
	p = debugged(p, ec)
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() with the ephemeral container = %+v", res)
	}
	calls := h.fake.Calls()
	pulls := only[*runtimeapi.PullImageRequest](calls, "PullImage")
	if len(pulls) != 1 || pulls[0].Image.Image != ec.Image || pulls[0].Auth.GetUsername() != "alice" {
		t.Fatalf("PullImage = %+v, want %s with the pod's pull secret", pulls, ec.Image)
	}
	cfg := created(t, calls, "dbg")
	if diff := cmp.Diff([]string{"sh", "-c", "ps"}, cfg.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-x"}, cfg.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if env := envOf(cfg); !slices.Contains(env, "WHO=debugger") || !slices.Contains(env, "MODE=deep") {
		t.Errorf("env = %v, want WHO=debugger and MODE=deep", env)
	}
	if mountAt(cfg, "/scratch") == nil {
		t.Errorf("mounts = %v, want the scratch volume at /scratch", cfg.Mounts)
	}
	if !cfg.Stdin || !cfg.Tty || cfg.StdinOnce {
		t.Errorf("stdin %v tty %v stdinOnce %v, want stdin and tty", cfg.Stdin, cfg.Tty, cfg.StdinOnce)
	}
	if cfg.Metadata.Attempt != 0 || cfg.LogPath != "dbg/0.log" {
		t.Errorf("attempt %d log %q, want 0 and dbg/0.log", cfg.Metadata.Attempt, cfg.LogPath)
	}
	if cfg.Annotations[cri.AnnotationEphemeral] != "true" || cfg.Annotations[cri.AnnotationInit] != "" {
		t.Errorf("annotations = %v, want the ephemeral mark and no init one", cfg.Annotations)
	}
	if cfg.Labels[cri.LabelContainerName] != "dbg" {
		t.Errorf("labels = %v", cfg.Labels)
	}
	sc := cfg.Linux.SecurityContext
	if caps := sc.GetCapabilities().GetAddCapabilities(); !slices.Contains(caps, "SYS_PTRACE") {
		t.Errorf("capabilities added = %v, want SYS_PTRACE", caps)
	}
	want := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD,
		Pid: runtimeapi.NamespaceMode_TARGET, TargetId: main.ID}
	if diff := cmp.Diff(want, sc.NamespaceOptions, cmp.Comparer(func(a, b *runtimeapi.NamespaceOption) bool { return a.String() == b.String() })); diff != "" {
		t.Errorf("namespace options (-want +got):\n%s", diff)
	}
}

func TestEphemeralContainerPIDNamespace(t *testing.T) {
	tests := []struct {
		name       string
		mutate     func(p *v1.Pod, ec *v1.EphemeralContainer)
		wantPid    runtimeapi.NamespaceMode
		wantTarget bool
	}{
		{name: "target: the target's", wantPid: runtimeapi.NamespaceMode_TARGET, wantTarget: true},
		{name: "no target: its own, as the pod's containers", mutate: func(_ *v1.Pod, ec *v1.EphemeralContainer) { ec.TargetContainerName = "" },
			wantPid: runtimeapi.NamespaceMode_CONTAINER},
		{name: "target in a pod sharing its process namespace: the pod's", mutate: func(p *v1.Pod, _ *v1.EphemeralContainer) { p.Spec.ShareProcessNamespace = ptr.To(true) },
			wantPid: runtimeapi.NamespaceMode_POD},
		{name: "target in a hostPID pod: the host's", mutate: func(p *v1.Pod, _ *v1.EphemeralContainer) { p.Spec.HostPID = true },
			wantPid: runtimeapi.NamespaceMode_NODE},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			p, ec := debugTarget.DeepCopy(), *dbgContainer.DeepCopy()
			if tt.mutate != nil {
				tt.mutate(p, &ec)
			}
			h.sync(p)
			mainID := h.latest("main").ID
			if res := h.sync(debugged(p, ec)); res.Err != nil || len(res.Waiting) != 0 {
				t.Fatalf("SyncPod() = %+v", res)
			}
			ns := created(t, h.fake.Calls(), "dbg").Linux.SecurityContext.NamespaceOptions
			wantTarget := ""
			if tt.wantTarget {
				wantTarget = mainID
			}
			if ns.Pid != tt.wantPid || ns.TargetId != wantTarget {
				t.Errorf("pid namespace = %v target %q, want %v target %q", ns.Pid, ns.TargetId, tt.wantPid, wantTarget)
			}
		})
	}
}

// A target that does not run holds the ephemeral container back (the
// runtime could not join its namespace); once it runs again, its new
// instance is the target.
func TestEphemeralContainerWaitsForItsTarget(t *testing.T) {
	h := newHarness(t)
	h.sync(debugTarget)
	first := h.latest("main").ID
	if err := h.fake.ExitContainer(first, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	p := debugged(debugTarget, dbgContainer)
	// This sync starts the ephemeral container first (the kubelet's
	// order), then restarts main.
	res := h.sync(p)
	if w := res.Waiting["dbg"]; w.Reason != cri.ReasonCreateContainerError || w.Message != "target container main is not running" {
		t.Fatalf("Waiting[dbg] = %+v, want CreateContainerError: target not running", w)
	}
	if reqs := only[*runtimeapi.CreateContainerRequest](h.fake.Calls(), "CreateContainer"); len(reqs) != 1 || reqs[0].Config.Metadata.Name != "main" {
		t.Fatalf("CreateContainer = %v, want main's restart only", h.fake.Methods())
	}
	second := h.latest("main").ID
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() with main running = %+v", res)
	}
	if got := created(t, h.fake.Calls(), "dbg").Linux.SecurityContext.NamespaceOptions.TargetId; got != second {
		t.Errorf("target ID = %q, want main's running instance %q (not %q)", got, second, first)
	}
}

// A target named in the spec that never ran: the kubelet's message.
func TestEphemeralContainerTargetNotFound(t *testing.T) {
	h := newHarness(t)
	p := debugTarget.DeepCopy()
	p.Spec.InitContainers = []v1.Container{{Name: "setup", Image: "busybox:1.36", ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sleep", "1000"}}}
	h.sync(p) // setup runs
	ec := dbgContainer
	ec.TargetContainerName = "main" // not started until setup is done
	res := h.sync(debugged(p, ec))
	if w := res.Waiting["dbg"]; w.Reason != cri.ReasonCreateContainerConfigError || w.Message != "unable to find target container main" {
		t.Fatalf("Waiting[dbg] = %+v, want CreateContainerConfigError", w)
	}
	// Targeting the running init container works while the pod initialises.
	ec.TargetContainerName = "setup"
	if res := h.sync(debugged(p, ec)); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() targeting the init container = %+v", res)
	}
	if got, want := created(t, h.fake.Calls(), "dbg").Linux.SecurityContext.NamespaceOptions.TargetId, h.latest("setup").ID; got != want {
		t.Errorf("target ID = %q, want setup's %q", got, want)
	}
}

// Adding an ephemeral container replaces no sandbox and restarts no
// container: the static pods' content hash is an annotation the
// manifest's decoding fixed, and each container's hash covers that
// container alone.
func TestAddingEphemeralContainerChangesNoHash(t *testing.T) {
	for _, base := range []*v1.Pod{webPod, debugTarget} {
		t.Run(base.Spec.Containers[0].Name, func(t *testing.T) {
			h := newHarness(t)
			h.sync(base)
			before := h.fake.Sandboxes()
			app := h.latest(base.Spec.Containers[0].Name)
			ec := *dbgContainer.DeepCopy()
			ec.TargetContainerName = base.Spec.Containers[0].Name
			p := debugged(base, ec)
			if got := cri.HashContainer(&p.Spec.Containers[0]); got != app.Config.Annotations[cri.AnnotationAgentHash] {
				t.Fatalf("container hash with an ephemeral container %s, recorded %s", got, app.Config.Annotations[cri.AnnotationAgentHash])
			}
			if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
				t.Fatalf("SyncPod() = %+v", res)
			}
			for _, m := range []string{"RunPodSandbox", "StopPodSandbox", "StopContainer", "RemoveContainer"} {
				if n := h.methodCount(m); n != 0 {
					t.Errorf("%s × %d after adding an ephemeral container: %v", m, n, h.fake.Methods())
				}
			}
			after := h.fake.Sandboxes()
			if len(after) != 1 || after[0].ID != before[0].ID ||
				after[0].Config.Annotations[cri.AnnotationSpecHash] != before[0].Config.Annotations[cri.AnnotationSpecHash] {
				t.Errorf("sandboxes %+v → %+v, want the same one with the same spec hash", before, after)
			}
			if got := h.latest(base.Spec.Containers[0].Name); got.ID != app.ID || got.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Errorf("app container %s %v, want %s still running", got.ID, got.State, app.ID)
			}
		})
	}
}

// Ephemeral containers go with the pod: stopped with the app containers,
// in KillPod and StopPod alike.
func TestEphemeralContainerKilledWithThePod(t *testing.T) {
	for _, kill := range []string{"KillPod", "StopPod"} {
		t.Run(kill, func(t *testing.T) {
			h := newHarness(t)
			h.sync(debugTarget)
			p := debugged(debugTarget, dbgContainer)
			h.sync(p)
			ids := []string{h.latest("main").ID, h.latest("dbg").ID}
			st := h.status(p)
			h.fake.ResetCalls()
			fn := h.rt.KillPod
			if kill == "StopPod" {
				fn = h.rt.StopPod
			}
			if err := fn(context.Background(), p, st, 0); err != nil {
				t.Fatal(err)
			}
			var stopped []string
			for _, r := range only[*runtimeapi.StopContainerRequest](h.fake.Calls(), "StopContainer") {
				stopped = append(stopped, r.ContainerId)
			}
			slices.Sort(stopped)
			slices.Sort(ids)
			if diff := cmp.Diff(ids, stopped); diff != "" {
				t.Errorf("stopped containers (-want +got):\n%s", diff)
			}
		})
	}
}

// A privileged ephemeral container (kubectl debug --profile=sysadmin)
// makes the sandbox config privileged, as the kubelet's
// HasPrivilegedContainer: containerd refuses a privileged container in a
// sandbox whose config is not.
func TestPrivilegedEphemeralContainerPrivilegedSandboxConfig(t *testing.T) {
	h := newHarness(t)
	h.sync(debugTarget)
	ec := *dbgContainer.DeepCopy()
	ec.SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
	if res := h.sync(debugged(debugTarget, ec)); res.Err != nil {
		t.Fatalf("SyncPod() = %+v", res)
	}
	reqs := only[*runtimeapi.CreateContainerRequest](h.fake.Calls(), "CreateContainer")
	if len(reqs) != 1 || !reqs[0].Config.Linux.SecurityContext.Privileged || !reqs[0].SandboxConfig.Linux.SecurityContext.Privileged {
		t.Fatalf("CreateContainer = %+v, want a privileged container in a privileged sandbox config", reqs)
	}
}

// ListPods tells ephemeral containers apart from the runtime's listing
// alone, as a restarted agent sees them.
func TestListPodsMarksEphemeralContainers(t *testing.T) {
	h := newHarness(t)
	h.sync(debugTarget)
	h.sync(debugged(debugTarget, dbgContainer))
	pods, err := h.rt.ListPods(context.Background())
	if err != nil || len(pods) != 1 {
		t.Fatalf("ListPods() = %v, %v", pods, err)
	}
	kinds := map[string]bool{}
	for _, c := range pods[0].Containers {
		kinds[c.Name] = c.Ephemeral
	}
	if diff := cmp.Diff(map[string]bool{"main": false, "dbg": true}, kinds); diff != "" {
		t.Errorf("ephemeral by name (-want +got):\n%s", diff)
	}
}
