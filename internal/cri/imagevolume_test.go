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
	h.fake.SetVersion("containerd", "2.1.0")
	h.fake.AddImage("tools:1.0")
	h.sync(imageVolumePod(v1.PullIfNotPresent))
	for _, r := range only[*runtimeapi.PullImageRequest](h.fake.Calls(), "PullImage") {
		if r.Image.Image == "tools:1.0" {
			t.Errorf("present image volume pulled with IfNotPresent")
		}
	}

	h2 := newHarness(t)
	h2.fake.SetVersion("containerd", "2.1.0")
	p := imageVolumePod(v1.PullNever)
	res := h2.sync(p)
	if w := res.Waiting["app"]; w.Reason != cri.ReasonErrImageNeverPull {
		t.Errorf("Waiting[app] = %+v, want ErrImageNeverPull", w)
	}
	if slices.Contains(h2.fake.Methods(), "CreateContainer") {
		t.Errorf("container created without its image volume: %v", h2.fake.Methods())
	}
}

// A runtime known not to mount images refuses the container with a
// clear CreateContainerConfigError, never a mount without content.
func TestImageVolumeUnsupportedRuntime(t *testing.T) {
	h := newHarness(t)
	h.fake.SetVersion("containerd", "1.6.20~ds1")
	res := h.sync(imageVolumePod(v1.PullAlways))
	w := res.Waiting["app"]
	want := `volume "tools": the container runtime (containerd 1.6.20~ds1) does not support image volumes; containerd 2.1 or newer does`
	if w.Reason != cri.ReasonCreateContainerConfigError || w.Message != want {
		t.Errorf("Waiting[app] = %+v, want CreateContainerConfigError %q", w, want)
	}
	if slices.Contains(h.fake.Methods(), "CreateContainer") {
		t.Errorf("CreateContainer called: %v", h.fake.Methods())
	}
}
