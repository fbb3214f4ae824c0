package cri_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/cri"
)

// TestRunAsNonRoot: a container with runAsNonRoot starts only when it is
// known not to run as root — a numeric runAsUser (container's over the
// pod's) decides, else the image's user from the runtime's image status;
// refused with the kubelet's messages as CreateContainerConfigError,
// nothing created.
func TestRunAsNonRoot(t *testing.T) {
	tests := []struct {
		name      string
		podSC     *v1.PodSecurityContext
		ctrSC     *v1.SecurityContext
		imageUID  *int64
		imageUser string
		wantErr   string
	}{
		{name: "no runAsNonRoot, root image"},
		{name: "runAsNonRoot false, root image", ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(false)}},
		{name: "root image (no user)", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			wantErr: `container has runAsNonRoot and image will run as root (pod: "web-node1_default(uid-1)", container: app)`},
		{name: "image user 0", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, imageUID: ptr.To[int64](0),
			wantErr: "container has runAsNonRoot and image will run as root"},
		{name: "image user 1000", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)}, imageUID: ptr.To[int64](1000)},
		{name: "image user by name", ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(true)}, imageUser: "nginx",
			wantErr: "container has runAsNonRoot and image has non-numeric user (nginx), cannot verify user is non-root"},
		{name: "runAsUser 1000 wins over a root image", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)}},
		{name: "container runAsUser 0 over the pod's 1000",
			podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000)}, ctrSC: &v1.SecurityContext{RunAsUser: ptr.To[int64](0)},
			wantErr: "container's runAsUser breaks non-root policy"},
		{name: "container runAsNonRoot false over the pod's true", podSC: &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			ctrSC: &v1.SecurityContext{RunAsNonRoot: ptr.To(false)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSpecHarness(t, cri.SpecConfig{})
			h.fake.AddImage("nginx:latest")
			h.fake.SetImageUser("nginx:latest", tt.imageUID, tt.imageUser)
			p := webPod.DeepCopy()
			p.Spec.SecurityContext, p.Spec.Containers[0].SecurityContext = tt.podSC, tt.ctrSC
			res := h.sync(p)
			created := len(only[*runtimeapi.CreateContainerRequest](h.fake.Calls(), "CreateContainer"))
			if tt.wantErr == "" {
				if res.Err != nil || created != 1 {
					t.Fatalf("SyncPod() = %+v, %d containers created; want one", res, created)
				}
				return
			}
			w := res.Waiting["app"]
			if w.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(w.Message, tt.wantErr) {
				t.Fatalf("waiting = %+v, want %s with %q", w, cri.ReasonCreateContainerConfigError, tt.wantErr)
			}
			if created != 0 {
				t.Fatal("container created despite runAsNonRoot")
			}
		})
	}
}

// TestRecursiveReadOnly: a mount asking for recursiveReadOnly is made so
// where the runtime's default handler can (Enabled or IfPossible), stays
// a plain read-only mount with IfPossible where it cannot, and Enabled
// where it cannot is refused (the kubelet's message) — never silently
// downgraded.
func TestRecursiveReadOnly(t *testing.T) {
	tests := []struct {
		name     string
		mode     v1.RecursiveReadOnlyMode
		readOnly bool
		runtime  *bool // nil: the runtime reports no features (containerd 1.6)
		want     bool
		wantErr  string
	}{
		{name: "Enabled, supported", mode: v1.RecursiveReadOnlyEnabled, readOnly: true, runtime: ptr.To(true), want: true},
		{name: "IfPossible, supported", mode: v1.RecursiveReadOnlyIfPossible, readOnly: true, runtime: ptr.To(true), want: true},
		{name: "IfPossible, unsupported", mode: v1.RecursiveReadOnlyIfPossible, readOnly: true, runtime: ptr.To(false)},
		{name: "Disabled", mode: v1.RecursiveReadOnlyDisabled, readOnly: true, runtime: ptr.To(true)},
		{name: "Enabled, unsupported", mode: v1.RecursiveReadOnlyEnabled, readOnly: true, runtime: ptr.To(false),
			wantErr: `failed to resolve recursive read-only mode: volume "data" requested recursive read-only mode, but it is not supported by the runtime`},
		{name: "Enabled, no features reported", mode: v1.RecursiveReadOnlyEnabled, readOnly: true,
			wantErr: "not supported by the runtime"},
		{name: "Enabled on a writable mount", mode: v1.RecursiveReadOnlyEnabled, runtime: ptr.To(true),
			wantErr: `volume "data" requested recursive read-only mode, but it is not read-only`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSpecHarness(t, cri.SpecConfig{})
			if tt.runtime != nil {
				h.fake.SetFeatures(false, *tt.runtime)
			}
			p := webPod.DeepCopy()
			p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: tt.readOnly, RecursiveReadOnly: &tt.mode}}
			res := h.sync(p)
			if tt.wantErr != "" {
				w := res.Waiting["app"]
				if w.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(w.Message, tt.wantErr) {
					t.Fatalf("waiting = %+v, want %s with %q", w, cri.ReasonCreateContainerConfigError, tt.wantErr)
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("SyncPod() = %+v", res)
			}
			var got *runtimeapi.Mount
			for _, m := range h.latest("app").Config.Mounts {
				if m.ContainerPath == "/data" {
					got = m
				}
			}
			if got == nil || got.RecursiveReadOnly != tt.want || !got.Readonly {
				t.Fatalf("mount = %v, want read-only with recursive %v", got, tt.want)
			}
		})
	}
}

// TestSupplementalGroups: the pod's fsGroup, then its supplementalGroups,
// reach the sandbox and its containers, with supplementalGroupsPolicy
// Strict passed on.
func TestSupplementalGroups(t *testing.T) {
	h := newSpecHarness(t, cri.SpecConfig{})
	h.fake.SetFeatures(true, false)
	p := webPod.DeepCopy()
	p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{3000, 4000},
		SupplementalGroupsPolicy: ptr.To(v1.SupplementalGroupsPolicyStrict)}
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("SyncPod() = %+v", res)
	}
	ctr := h.latest("app").Config.Linux.SecurityContext
	sb := h.fake.Sandboxes()[0].Config.Linux.SecurityContext
	for name, got := range map[string][]int64{"container": ctr.SupplementalGroups, "sandbox": sb.SupplementalGroups} {
		if diff := cmp.Diff([]int64{2000, 3000, 4000}, got); diff != "" {
			t.Errorf("%s supplemental groups (-want +got):\n%s", name, diff)
		}
	}
	if ctr.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict || sb.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict {
		t.Errorf("policy: container %v, sandbox %v; want Strict", ctr.SupplementalGroupsPolicy, sb.SupplementalGroupsPolicy)
	}
}

// TestReadFeatures: the runtime's and its default handler's features, and
// every handler as the Node reports it.
func TestReadFeatures(t *testing.T) {
	h := newSpecHarness(t, cri.SpecConfig{})
	f, err := cri.ReadFeatures(context.Background(), h.fake, 1e9)
	if err != nil || f.SupplementalGroupsPolicy || f.RecursiveReadOnlyMounts || f.Handlers != nil {
		t.Fatalf("no features reported: ReadFeatures() = %+v, %v; want none", f, err)
	}
	h.fake.SetFeatures(true, true)
	f, err = cri.ReadFeatures(context.Background(), h.fake, 1e9)
	want := cri.Features{SupplementalGroupsPolicy: true, RecursiveReadOnlyMounts: true, Handlers: []v1.NodeRuntimeHandler{
		{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: ptr.To(true), UserNamespaces: ptr.To(false)}}}}
	if diff := cmp.Diff(want, f); err != nil || diff != "" {
		t.Fatalf("ReadFeatures() error %v, (-want +got):\n%s", err, diff)
	}
}
