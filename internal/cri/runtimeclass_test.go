package cri_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
)

// gvisorPod is webPod asking for the RuntimeClass "gvisor".
var gvisorPod = func() *v1.Pod {
	p := webPod.DeepCopy()
	p.Spec.RuntimeClassName = ptr.To("gvisor")
	return p
}()

// TestRuntimeClassHandler: the sandbox of a pod with a runtimeClassName
// runs with its RuntimeClass's handler; images stay the default
// handler's (the kubelet's RuntimeClassInImageCriAPI is alpha, off); a
// pod without one uses the default handler and asks for no RuntimeClass.
func TestRuntimeClassHandler(t *testing.T) {
	tests := []struct {
		name      string
		pod       *v1.Pod
		want      string
		wantAsked []string
	}{
		{name: "runtimeClassName", pod: func() *v1.Pod { p := twoContainerPod.DeepCopy(); p.Spec.RuntimeClassName = ptr.To("gvisor"); return p }(),
			want: "runsc", wantAsked: []string{"gvisor"}},
		{name: "no runtimeClassName", pod: twoContainerPod, want: ""},
		{name: "empty runtimeClassName", pod: func() *v1.Pod { p := webPod.DeepCopy(); p.Spec.RuntimeClassName = ptr.To(""); return p }(), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			classes := critest.NewRuntimeClasses(map[string]string{"gvisor": "runsc"})
			h, _ := newImageHarness(t, cri.Config{RuntimeClasses: classes})
			h.fake.AddRuntimeHandler("runsc")
			if res := h.sync(tt.pod); res.Err != nil {
				t.Fatalf("SyncPod() = %+v", res)
			}
			calls := h.fake.Calls()
			if got := only[*runtimeapi.RunPodSandboxRequest](calls, "RunPodSandbox")[0].RuntimeHandler; got != tt.want {
				t.Errorf("RunPodSandbox runtime handler = %q, want %q", got, tt.want)
			}
			if sbs := h.fake.Sandboxes(); len(sbs) != 1 || sbs[0].RuntimeHandler != tt.want {
				t.Errorf("sandboxes = %+v, want one with handler %q", sbs, tt.want)
			}
			for _, pull := range only[*runtimeapi.PullImageRequest](calls, "PullImage") {
				if got := pull.Image.GetRuntimeHandler(); got != "" {
					t.Errorf("PullImage(%s) runtime handler = %q, want the default", pull.Image.GetImage(), got)
				}
			}
			looked := false
			for _, st := range only[*runtimeapi.ImageStatusRequest](calls, "ImageStatus") {
				if img := st.Image.GetImage(); img == "busybox:1.36" {
					looked = true
					if got := st.Image.GetRuntimeHandler(); got != "" {
						t.Errorf("ImageStatus(%s) runtime handler = %q, want the default", img, got)
					}
				}
			}
			if !looked && len(tt.pod.Spec.Containers) > 1 {
				t.Errorf("no ImageStatus of busybox:1.36 (IfNotPresent): calls %v", h.fake.Methods())
			}
			if n := len(only[*runtimeapi.StartContainerRequest](calls, "StartContainer")); n != len(tt.pod.Spec.Containers) {
				t.Errorf("%d containers started, want %d", n, len(tt.pod.Spec.Containers))
			}
			// Asked once, for the sandbox.
			if diff := cmp.Diff(tt.wantAsked, classes.Asked()); diff != "" {
				t.Errorf("RuntimeClasses asked (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRuntimeClassSandboxErrors: a pod whose sandbox cannot get its
// runtime handler gets no sandbox — a FailedCreatePodSandBox event, the
// error in the sync result for the pod's status and a retry — never one
// on the default handler.
func TestRuntimeClassSandboxErrors(t *testing.T) {
	tests := []struct {
		name    string
		classes cri.RuntimeClasses // nil: standalone mode
		want    string
		// wantRun: RunPodSandbox was asked (and failed in the runtime).
		wantRun bool
	}{
		{
			name:    "missing RuntimeClass",
			classes: critest.NewRuntimeClasses(nil),
			want:    `RuntimeClass "gvisor" not found`,
		},
		{
			name:    "handler the runtime does not know",
			classes: critest.NewRuntimeClasses(map[string]string{"gvisor": "runsc"}),
			want:    `no runtime for "runsc" is configured`,
			wantRun: true,
		},
		{
			name: "standalone mode",
			want: `RuntimeClass "gvisor": RuntimeClasses are read from the API server and nodeagent runs without one`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ev := newImageHarness(t, cri.Config{RuntimeClasses: tt.classes})
			res := h.sync(gvisorPod)
			if !strings.Contains(res.SandboxError, tt.want) || res.Err == nil || res.RetryAfter != 10*time.Second {
				t.Errorf("SyncPod() = %+v, want SandboxError containing %q, Err and a 10s retry", res, tt.want)
			}
			if got := slices.Contains(h.fake.Methods(), "RunPodSandbox"); got != tt.wantRun {
				t.Errorf("RunPodSandbox called = %v, want %v (calls %v)", got, tt.wantRun, h.fake.Methods())
			}
			if sbs := h.fake.Sandboxes(); len(sbs) != 0 {
				t.Errorf("sandboxes = %+v, want none", sbs)
			}
			found := false
			for _, e := range ev.list() {
				found = found || strings.HasPrefix(e, "FailedCreatePodSandBox: Failed to create pod sandbox: ") && strings.Contains(e, tt.want)
			}
			if !found {
				t.Errorf("events = %q, want FailedCreatePodSandBox mentioning %q", ev.list(), tt.want)
			}
		})
	}
}

// TestRuntimeClassAppearsLater: a pod whose RuntimeClass is missing keeps
// being retried and gets its sandbox once the RuntimeClass exists.
func TestRuntimeClassAppearsLater(t *testing.T) {
	classes := critest.NewRuntimeClasses(nil)
	h, _ := newImageHarness(t, cri.Config{RuntimeClasses: classes})
	h.fake.AddRuntimeHandler("runsc")
	if res := h.sync(gvisorPod); res.SandboxError == "" || res.RetryAfter == 0 {
		t.Fatalf("SyncPod() without the RuntimeClass = %+v, want a sandbox error and a retry", res)
	}
	classes.Set("gvisor", "runsc")
	if res := h.sync(gvisorPod); res.Err != nil {
		t.Fatalf("SyncPod() once the RuntimeClass exists = %+v", res)
	}
	if sbs := h.fake.Sandboxes(); len(sbs) != 1 || sbs[0].RuntimeHandler != "runsc" {
		t.Errorf("sandboxes = %+v, want one on runsc", sbs)
	}
}

// TestSyncPodDualStackEnv: status.podIPs reaches the container's
// environment with every pod IP, for a new sandbox and for a container
// restarted in an existing one.
func TestSyncPodDualStackEnv(t *testing.T) {
	h := newHarness(t)
	h.fake.DualStack()
	p := webPod.DeepCopy()
	p.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIPs"}}},
	}
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("SyncPod() = %+v", res)
	}
	sb := h.fake.Sandboxes()[0]
	want := []string{"POD_IP=" + sb.IP, "POD_IPS=" + sb.IP + "," + sb.AdditionalIPs[0]}
	first := h.latest("app")
	if diff := cmp.Diff(want, envOf(first.Config)); diff != "" {
		t.Errorf("env of the first instance (-want +got):\n%s", diff)
	}
	if err := h.fake.ExitContainer(first.ID, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("SyncPod() restart = %+v", res)
	}
	if diff := cmp.Diff(want, envOf(h.latest("app").Config)); diff != "" {
		t.Errorf("env of the restarted instance (-want +got):\n%s", diff)
	}
}
