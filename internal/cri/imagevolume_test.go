package cri_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
)

// imageVolumePod mounts the image "tools:1.0" twice: whole at /tools and
// its bin directory at /bin-tools.
func imageVolumePod(policy v1.PullPolicy) *v1.Pod {
	p := webPod.DeepCopy()
	p.Spec.Volumes = []v1.Volume{{Name: "tools", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1.0", PullPolicy: policy}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "tools", MountPath: "/tools"}, {Name: "tools", MountPath: "/bin-tools", SubPath: "bin"}}
	return p
}

// An image volume is pulled by its pull policy and mounted by the
// runtime: the CRI mount names the pulled image, read-only, a subPath as
// the image sub path.
func TestImageVolumeMounted(t *testing.T) {
	h := newHarness(t)
	h.fake.SetVersion("containerd", "v2.4.2")
	res := h.sync(imageVolumePod(v1.PullAlways))
	if res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() = %+v", res)
	}
	var pulled []string
	for _, r := range only[*runtimeapi.PullImageRequest](h.fake.Calls(), "PullImage") {
		pulled = append(pulled, r.Image.Image)
	}
	if diff := cmp.Diff([]string{"nginx:latest", "tools:1.0"}, pulled); diff != "" {
		t.Errorf("pulled (-want +got):\n%s", diff)
	}
	create := only[*runtimeapi.CreateContainerRequest](h.fake.Calls(), "CreateContainer")[0]
	spec := &runtimeapi.ImageSpec{Image: critest.ImageRef("tools:1.0"), UserSpecifiedImage: "tools:1.0", Annotations: webPod.Annotations}
	want := []*runtimeapi.Mount{
		{ContainerPath: "/tools", Image: spec, Readonly: true},
		{ContainerPath: "/bin-tools", Image: spec, ImageSubPath: "bin", Readonly: true},
	}
	var got []*runtimeapi.Mount
	for _, m := range create.Config.Mounts {
		if m.Image != nil {
			got = append(got, m)
		}
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("image mounts (-want +got):\n%s", diff)
	}
}

// An image volume follows its pull policy (IfNotPresent: no pull when
// present) and a failed pull is the container's ErrImagePull, as for its
// own image.
func TestImageVolumePullPolicyAndErrors(t *testing.T) {
	h := newHarness(t)
	h.fake.SetVersion("containerd", "2.2.0")
	h.fake.AddImage("tools:1.0")
	h.sync(imageVolumePod(v1.PullIfNotPresent))
	for _, r := range only[*runtimeapi.PullImageRequest](h.fake.Calls(), "PullImage") {
		if r.Image.Image == "tools:1.0" {
			t.Errorf("present image volume pulled with IfNotPresent")
		}
	}

	h2 := newHarness(t)
	h2.fake.SetVersion("containerd", "2.2.0")
	p := imageVolumePod(v1.PullNever)
	res := h2.sync(p)
	if w := res.Waiting["app"]; w.Reason != cri.ReasonErrImageNeverPull {
		t.Errorf("Waiting[app] = %+v, want ErrImageNeverPull", w)
	}
	if slices.Contains(h2.fake.Methods(), "CreateContainer") {
		t.Errorf("container created without its image volume: %v", h2.fake.Methods())
	}
}

// A runtime known not to mount images (or not with a sub path) refuses
// the container with a clear CreateContainerConfigError, never a mount
// without content or of the wrong directory.
func TestImageVolumeUnsupportedRuntime(t *testing.T) {
	whole := func() *v1.Pod {
		p := imageVolumePod(v1.PullAlways)
		p.Spec.Containers[0].VolumeMounts = p.Spec.Containers[0].VolumeMounts[:1]
		return p
	}
	tests := []struct {
		name, runtime, version string
		pod                    *v1.Pod
		want                   string // "": runs
	}{
		{name: "containerd 1.6", runtime: "containerd", version: "1.6.20~ds1", pod: whole(),
			want: `volume "tools": the container runtime (containerd 1.6.20~ds1) does not support image volumes; containerd 2.1 or newer does`},
		{name: "containerd 2.1, whole image", runtime: "containerd", version: "v2.1.5", pod: whole()},
		{name: "containerd 2.1, sub path", runtime: "containerd", version: "v2.1.5", pod: imageVolumePod(v1.PullAlways),
			want: `volume "tools": the container runtime (containerd v2.1.5) does not support image volumes with a subPath; containerd 2.2 or newer does`},
		{name: "cri-o 1.32, sub path", runtime: "cri-o", version: "1.32.4", pod: imageVolumePod(v1.PullAlways),
			want: `volume "tools": the container runtime (cri-o 1.32.4) does not support image volumes with a subPath; cri-o 1.33 or newer does`},
		{name: "another runtime decides itself", runtime: "other", version: "0.1", pod: imageVolumePod(v1.PullAlways)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.fake.SetVersion(tt.runtime, tt.version)
			res := h.sync(tt.pod)
			w, created := res.Waiting["app"], slices.Contains(h.fake.Methods(), "CreateContainer")
			if tt.want == "" {
				if !created || w.Reason != "" {
					t.Fatalf("not run: waiting %+v, methods %v", w, h.fake.Methods())
				}
				return
			}
			if w.Reason != cri.ReasonCreateContainerConfigError || w.Message != tt.want {
				t.Errorf("Waiting[app] = %+v, want CreateContainerConfigError %q", w, tt.want)
			}
			if created {
				t.Errorf("CreateContainer called: %v", h.fake.Methods())
			}
		})
	}
}
