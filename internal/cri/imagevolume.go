package cri

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
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

// imageVolumesSupported judges a runtime's name and version.
func imageVolumesSupported(name, version string, subPath bool) error {
	var major, minor int
	what := "image volumes"
	switch {
	case name == "containerd" && subPath:
		major, minor, what = 2, 2, "image volumes with a subPath"
	case name == "containerd":
		major, minor = 2, 1
	case name == "cri-o" && subPath:
		major, minor, what = 1, 33, "image volumes with a subPath"
	case name == "cri-o":
		major, minor = 1, 31
	default:
		return nil
	}
	maj, min, ok := majorMinor(version)
	if !ok || maj > major || (maj == major && min >= minor) {
		return nil
	}
	return fmt.Errorf("the container runtime (%s %s) does not support %s; %s %d.%d or newer does", name, version, what, name, major, minor)
}

// majorMinor parses "v2.4.2", "1.6.20~ds1", "1.31.0".
func majorMinor(v string) (int, int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return maj, min, err1 == nil && err2 == nil
}
