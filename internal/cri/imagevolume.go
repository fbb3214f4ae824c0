package cri

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageVolumes pulls the image volumes (volumes[].image) container c
// mounts, as the kubelet's getImageVolumes: each volume's reference with
// its pull policy and the pod's pull credentials, with the same events,
// waiting reasons and backoff as a container's image. It returns the
// image spec of each by volume name, for the CRI mount (Mount.Image),
// which the runtime resolves into a read-only view of the image; nil when
// c mounts none. A runtime known not to support image volumes is a
// CreateContainerConfigError naming its version, never a mount that
// silently lacks its content.
func (r *Runtime) imageVolumes(ctx context.Context, p *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig) (map[string]*runtimeapi.ImageSpec, error) {
	var out map[string]*runtimeapi.ImageSpec
	for _, vm := range c.VolumeMounts {
		v := podVolume(p, vm.Name)
		if v == nil || v.Image == nil || out[vm.Name] != nil {
			continue
		}
		if err := r.imageVolumeSupport(ctx, subPathOf(c, vm.Name)); err != nil {
			return nil, &startError{ReasonCreateContainerConfigError, fmt.Errorf("volume %q: %w", vm.Name, err)}
		}
		ref, err := r.ensure(ctx, p, v.Image.Reference, v.Image.PullPolicy, zap.String("volume", vm.Name), sandbox)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]*runtimeapi.ImageSpec{}
		}
		out[vm.Name] = &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: v.Image.Reference, Annotations: p.Annotations}
	}
	return out, nil
}

// subPathOf reports whether c mounts the volume name with a subPath.
func subPathOf(c *v1.Container, name string) bool {
	for _, vm := range c.VolumeMounts {
		if vm.Name == name && (vm.SubPath != "" || vm.SubPathExpr != "") {
			return true
		}
	}
	return false
}

func podVolume(p *v1.Pod, name string) *v1.Volume {
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].Name == name {
			return &p.Spec.Volumes[i]
		}
	}
	return nil
}

// imageVolumeSupport tells whether the runtime mounts images as volumes
// (CRI Mount.image) — with a sub path (Mount.image_sub_path) when subPath:
// containerd from 2.1 (2.2 with sub paths), CRI-O from 1.31 (1.33); an
// older one drops the fields it does not know and would mount nothing, or
// the image's root. A runtime of another name is trusted to refuse what it
// cannot do. The runtime's version is asked again after a minute (it may
// have been upgraded in place) and after an error, never under the lock.
func (r *Runtime) imageVolumeSupport(ctx context.Context, subPath bool) error {
	r.versionMu.Lock()
	v, at := r.version, r.versionAt
	r.versionMu.Unlock()
	if v == nil || r.cfg.Clock.Since(at) > time.Minute {
		cctx, cancel := r.callCtx(ctx)
		resp, err := r.c.Version(cctx, &runtimeapi.VersionRequest{})
		cancel()
		if err != nil {
			return fmt.Errorf("get runtime version: %w", translate(err))
		}
		v = resp
		r.versionMu.Lock()
		r.version, r.versionAt = v, r.cfg.Clock.Now()
		r.versionMu.Unlock()
	}
	return imageVolumesSupported(v.RuntimeName, v.RuntimeVersion, subPath)
}

// imageVolumesSupported judges a runtime's name and version (a version
// it cannot parse is given the benefit of the doubt).
func imageVolumesSupported(name, ver string, subPath bool) error {
	var need *version.Version
	what := "image volumes"
	switch {
	case name == "containerd" && subPath:
		need, what = version.MajorMinor(2, 2), "image volumes with a subPath"
	case name == "containerd":
		need = version.MajorMinor(2, 1)
	case name == "cri-o" && subPath:
		need, what = version.MajorMinor(1, 33), "image volumes with a subPath"
	case name == "cri-o":
		need = version.MajorMinor(1, 31)
	default:
		return nil
	}
	have, err := version.ParseGeneric(ver)
	if err != nil || have.AtLeast(need) {
		return nil
	}
	return fmt.Errorf("the container runtime (%s %s) does not support %s; %s %d.%d or newer does",
		name, ver, what, name, need.Major(), need.Minor())
}
