package cri

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Features is what the runtime says it can do, from its Status answer:
// the runtime's own features and its default handler's (the one pods
// without a runtimeClassName use) — what the kubelet keeps in its
// runtime state and reports in the Node's status.features and
// status.runtimeHandlers.
type Features struct {
	// SupplementalGroupsPolicy: the runtime applies
	// supplementalGroupsPolicy: Strict (containerd 2.0+).
	SupplementalGroupsPolicy bool
	// RecursiveReadOnlyMounts: the default handler makes read-only
	// mounts recursively read-only on request (containerd 2.0+, runc
	// 1.1+, Linux 5.12+).
	RecursiveReadOnlyMounts bool
	// UserNamespaces: the default handler supports user namespaces with
	// idmap mounts.
	UserNamespaces bool
	// Handlers are the runtime's handlers and their features, as the
	// Node reports them; nil when the runtime reports none (containerd
	// 1.6).
	Handlers []v1.NodeRuntimeHandler
}

// featuresCache keeps the runtime's features for a minute: a runtime
// upgraded in place is seen within it.
type featuresCache struct {
	mu  sync.Mutex
	f   Features
	at  time.Time
	set bool
}

// ReadFeatures asks the runtime for its features with one Status call.
func ReadFeatures(ctx context.Context, c Client, timeout time.Duration) (Features, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := c.Status(cctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return Features{}, fmt.Errorf("read the runtime's features: %w", translate(err))
	}
	f := Features{SupplementalGroupsPolicy: st.GetFeatures().GetSupplementalGroupsPolicy()}
	for _, h := range st.RuntimeHandlers {
		rro, userns := h.Features.GetRecursiveReadOnlyMounts(), h.Features.GetUserNamespaces()
		f.Handlers = append(f.Handlers, v1.NodeRuntimeHandler{Name: h.Name, Features: &v1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns,
		}})
		if h.Name == "" {
			f.RecursiveReadOnlyMounts, f.UserNamespaces = rro, userns
		}
	}
	return f, nil
}

// Features is the runtime's features, read at most once a minute; when
// the runtime cannot be asked, the last features it told (as the kubelet
// keeps its runtime state), or the error before it ever answered. No
// lock is held across the call.
func (r *Runtime) Features(ctx context.Context) (Features, error) {
	r.features.mu.Lock()
	f, at, set := r.features.f, r.features.at, r.features.set
	r.features.mu.Unlock()
	if set && r.cfg.Clock.Since(at) < time.Minute {
		return f, nil
	}
	nf, err := ReadFeatures(ctx, r.c, r.cfg.CallTimeout)
	if err != nil {
		if set {
			return f, nil
		}
		return Features{}, err
	}
	r.features.mu.Lock()
	r.features.f, r.features.at, r.features.set = nf, r.cfg.Clock.Now(), true
	r.features.mu.Unlock()
	return nf, nil
}

// handlerRRO is whether the runtime handler name ("" the default) makes
// recursive read-only mounts.
func (f Features) handlerRRO(name string) bool {
	if name == "" {
		return f.RecursiveReadOnlyMounts
	}
	for _, h := range f.Handlers {
		if h.Name == name && h.Features != nil && h.Features.RecursiveReadOnlyMounts != nil {
			return *h.Features.RecursiveReadOnlyMounts
		}
	}
	return false
}

// recursiveReadOnly marks the CRI mounts of a container's volume mounts
// that ask for recursiveReadOnly as the kubelet resolves them
// (resolveRecursiveReadOnly): Enabled needs a read-only mount without
// propagation and a runtime that can, or the container does not start;
// IfPossible is recursive where the runtime can. mounts are the CRI
// mounts of c.VolumeMounts, in their order.
func recursiveReadOnly(c *v1.Container, mounts []*runtimeapi.Mount, supported func() (bool, error)) error {
	for i, vm := range c.VolumeMounts {
		if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
			continue
		}
		if i >= len(mounts) || filepath.Clean(mounts[i].ContainerPath) != filepath.Clean(vm.MountPath) {
			return fmt.Errorf("failed to resolve recursive read-only mode: volume %q has no mount", vm.Name)
		}
		rro, err := resolveRecursiveReadOnly(vm, supported)
		if err != nil {
			return fmt.Errorf("failed to resolve recursive read-only mode: %w", err)
		}
		mounts[i].RecursiveReadOnly = rro
	}
	return nil
}

func resolveRecursiveReadOnly(m v1.VolumeMount, supported func() (bool, error)) (bool, error) {
	if !m.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", m.Name)
	}
	if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q", m.Name, *m.MountPropagation)
	}
	ok, err := supported()
	if err != nil {
		return false, err
	}
	switch *m.RecursiveReadOnly {
	case v1.RecursiveReadOnlyIfPossible:
		return ok, nil
	case v1.RecursiveReadOnlyEnabled:
		if !ok {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", m.Name)
		}
		return true, nil
	}
	return false, fmt.Errorf("unknown recursive read-only mode %q", *m.RecursiveReadOnly)
}

// verifyRunAsNonRoot refuses a container whose effective securityContext
// has runAsNonRoot and that would run as root, as the kubelet's
// verifyRunAsNonRoot: a runAsUser (container's, else pod's) decides;
// without one the image's user does, from the runtime's image status —
// uid 0, or no user at all (root), is refused, and so is a user by name,
// which cannot be verified. The messages are the kubelet's.
func verifyRunAsNonRoot(p *v1.Pod, c *v1.Container, image func() (*runtimeapi.Image, error)) error {
	nonRoot, uid := effectiveRunAs(p, c)
	if nonRoot == nil || !*nonRoot {
		return nil
	}
	who := fmt.Sprintf("pod: %q, container: %s", p.Name+"_"+p.Namespace+"("+string(p.UID)+")", c.Name)
	if uid != nil {
		if *uid == 0 {
			return fmt.Errorf("container's runAsUser breaks non-root policy (%s)", who)
		}
		return nil
	}
	img, err := image()
	if err != nil {
		return err
	}
	switch {
	case img.GetUid() != nil:
		if img.GetUid().GetValue() == 0 {
			return fmt.Errorf("container has runAsNonRoot and image will run as root (%s)", who)
		}
		return nil
	case img.GetUsername() != "":
		return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (%s)", img.GetUsername(), who)
	}
	return fmt.Errorf("container has runAsNonRoot and image will run as root (%s)", who)
}

// effectiveRunAs is the container's runAsNonRoot and runAsUser, the
// container's field over the pod's.
func effectiveRunAs(p *v1.Pod, c *v1.Container) (nonRoot *bool, uid *int64) {
	if psc := p.Spec.SecurityContext; psc != nil {
		nonRoot, uid = psc.RunAsNonRoot, psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			uid = csc.RunAsUser
		}
	}
	return nonRoot, uid
}

// imageStatus reads an image's status for its user.
func (r *Runtime) imageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error) {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	resp, err := r.c.ImageStatus(cctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		return nil, fmt.Errorf("read the user of image %s: %w", ref, translate(err))
	}
	if resp.Image == nil {
		return nil, errors.New("image " + ref + " is gone")
	}
	return resp.Image, nil
}
