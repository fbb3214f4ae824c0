package podvolumes

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// The kubelet's volume plugin directories under <pod>/volumes.
const (
	pluginConfigMap   = "kubernetes.io~configmap"
	pluginSecret      = "kubernetes.io~secret"
	pluginDownwardAPI = "kubernetes.io~downward-api"
	pluginProjected   = "kubernetes.io~projected"
)

// Mounts prepares the pod's volumes a container mounts and returns the
// CRI mounts. emptyDir lives under the pod directory; hostPath honours its
// type; configMap, secret, downwardAPI and projected volumes are rendered
// (renderVolume) and always mounted read-only, as the kubelet mounts
// them. A subPath (or a subPathExpr expanded with the container's env) is
// resolved beneath its volume without following a symlink out of it and
// bind-mounted under the pod directory (package volume); the runtime gets
// that bind mount, never the joined path. Other volume kinds need a
// plugin and are an error (the caller's CreateContainerConfigError).
//
// expand expands a subPathExpr with the container's environment; podIP
// is the pod's IP for the downward API. Called before every container
// start, by the pod's worker.
func (m *Manager) Mounts(ctx context.Context, p *v1.Pod, c *v1.Container, podIP string, images map[string]*runtimeapi.ImageSpec, expand func(string) string) ([]*runtimeapi.Mount, error) {
	vols := map[string]*v1.Volume{}
	for i := range p.Spec.Volumes {
		vols[p.Spec.Volumes[i].Name] = &p.Spec.Volumes[i]
	}
	var mounts []*runtimeapi.Mount
	for i, vm := range c.VolumeMounts {
		v := vols[vm.Name]
		if v == nil {
			return nil, fmt.Errorf("volume %q not found", vm.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr)
		}
		if v.Image != nil {
			mount, err := imageMount(vm, images[vm.Name], sub)
			if err != nil {
				return nil, fmt.Errorf("volume %q: %w", vm.Name, err)
			}
			mounts = append(mounts, mount)
			continue
		}
		host, readOnly, err := m.volumePath(ctx, p, v, podIP)
		if err != nil && (ClaimName(p, v) != "" || v.CSI != nil) {
			return nil, &MountError{Volume: vm.Name, Err: err}
		}
		if err == nil {
			err = m.own(p, v, host, readOnly)
		}
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vm.Name, err)
		}
		if sub != "" {
			// Each manifest-named element goes through ChildDir (a name
			// with a separator or "..", which validation already refuses,
			// becomes a harmless hashed name beneath its parent), and
			// volume-subpaths is never mounted into a container, so no
			// container can plant a symlink on this path.
			target := filepath.Join(m.Dir(p.UID), "volume-subpaths")
			for _, elem := range []string{vm.Name, c.Name, strconv.Itoa(i)} {
				target = volume.ChildDir(target, elem)
			}
			if err := volume.BindSubPath(host, sub, target); err != nil {
				return nil, fmt.Errorf("volume %q: %w", vm.Name, err)
			}
			host = target
		}
		mounts = append(mounts, &runtimeapi.Mount{
			ContainerPath: vm.MountPath,
			HostPath:      host,
			Readonly:      vm.ReadOnly || readOnly,
		})
	}
	return mounts, nil
}

// MountError is a volume that a plugin could not make available yet (a
// claim not bound, a CSI driver not ready): the container waits in
// ContainerCreating with the kubelet's FailedMount event, and the next
// sync tries again.
type MountError struct {
	Volume string
	Err    error
}

func (e *MountError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

func (e *MountError) Unwrap() error { return e.Err }

// imageMount is the CRI mount of an image volume whose image was pulled
// as spec. The subPath (relative, without "..": validation; a
// subPathExpr is checked here once expanded) is resolved by the runtime
// within the image's read-only view.
func imageMount(vm v1.VolumeMount, spec *runtimeapi.ImageSpec, sub string) (*runtimeapi.Mount, error) {
	if spec == nil {
		return nil, errors.New("image volume not pulled")
	}
	if sub != "" && (filepath.IsAbs(sub) || slices.Contains(strings.Split(sub, "/"), "..")) {
		return nil, fmt.Errorf("subPath %q must be a relative path without '..'", sub)
	}
	return &runtimeapi.Mount{ContainerPath: vm.MountPath, Image: spec, ImageSubPath: sub, Readonly: true}, nil
}

// volumePath prepares one volume and returns its host path and whether it
// must be mounted read-only whatever the mount says.
func (m *Manager) volumePath(ctx context.Context, p *v1.Pod, v *v1.Volume, podIP string) (string, bool, error) {
	switch {
	case v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumMemory:
		size := memoryVolumeSize(p)
		if l := v.EmptyDir.SizeLimit; l != nil && l.Sign() > 0 && (size == 0 || l.Value() < size) {
			size = l.Value()
		}
		dir, err := volume.EmptyDirMemory(m.Dir(p.UID), v.Name, size)
		return dir, false, err
	case v.EmptyDir != nil:
		dir, err := volume.EmptyDir(m.Dir(p.UID), v.Name)
		return dir, false, err
	case v.HostPath != nil:
		return v.HostPath.Path, false, volume.CheckHostPath(v.HostPath)
	case isRendered(v):
		dir, _, err := m.renderVolume(ctx, p, v, podIP)
		if err != nil && apiUnreachable(err) {
			// The API server does not answer (a missing object is an
			// answer, and stays an error): a container (re)started
			// meanwhile gets the volume's last content, when it has one.
			if last := m.renderedDir(p, v); last != "" && volume.HasContent(last) {
				m.log.Warn("API server unreachable; volume keeps its last content", zap.String("pod", p.Namespace+"/"+p.Name),
					zap.String("volume", v.Name), zap.Error(err))
				return last, true, nil
			}
		}
		return dir, true, err
	case v.PersistentVolumeClaim != nil || v.Ephemeral != nil:
		return m.claimPath(ctx, p, v)
	case v.CSI != nil:
		if m.cfg.CSI == nil {
			return "", false, fmt.Errorf("CSI inline volumes (driver %s) need an API server: %w", v.CSI.Driver, errStandalone)
		}
		path, err := m.cfg.CSI.PublishInline(ctx, p, v)
		return path, false, err
	}
	return "", false, errors.New("volume type not supported (emptyDir, hostPath, configMap, secret, downwardAPI, projected, image, persistentVolumeClaim, ephemeral and csi are)")
}

// isRendered tells the volumes whose content the agent writes from API
// objects and pod fields.
func isRendered(v *v1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil
}

// renderVolume writes a configMap, secret, downwardAPI or projected
// volume into <pod>/volumes/<plugin>/<name> with volume.WriteAtomic and
// returns that directory and whether the content changed. It is called
// before every container start and on every sync of a pod with running
// containers (Refresh), so edits of a ConfigMap or Secret, label
// changes and token refreshes reach running containers; an unchanged
// volume costs a read of its files.
//
// Secret and projected volumes (service-account tokens among them) live
// on a tmpfs, as the kubelet keeps them, so that secrets never reach a
// disk: mounted before the first write (of at most the pod's memory
// limit), unmounted with the pod directory (volume.RemoveAll).
func (m *Manager) renderVolume(ctx context.Context, p *v1.Pod, v *v1.Volume, podIP string) (string, bool, error) {
	plugin, files, err := m.volumeFiles(ctx, p, v, podIP)
	if err != nil {
		return "", false, err
	}
	dir := volume.ChildDir(filepath.Join(m.Dir(p.UID), "volumes", plugin), v.Name)
	if plugin == pluginSecret || plugin == pluginProjected {
		if err := volume.EnsureTmpfs(dir, memoryVolumeSize(p), 0o755); err != nil {
			return "", false, fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	changed, err := volume.WriteAtomic(dir, files, m.cfg.Clock.Now())
	if err != nil {
		return "", false, fmt.Errorf("write volume: %w", err)
	}
	if changed {
		m.disown(p.UID, v.Name) // new files: given to the fsGroup again
	}
	return dir, changed, nil
}

// apiUnreachable reports whether err (or one of an aggregate's errors)
// is a failed request that got no answer from the API server.
func apiUnreachable(err error) bool {
	var ue *url.Error
	if errors.As(err, &ue) {
		return true
	}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		for _, e := range agg.Errors() {
			if apiUnreachable(e) {
				return true
			}
		}
	}
	return false
}

// renderedDir is where a rendered volume's content lives ("" for other
// kinds).
func (m *Manager) renderedDir(p *v1.Pod, v *v1.Volume) string {
	plugin := ""
	switch {
	case v.ConfigMap != nil:
		plugin = pluginConfigMap
	case v.Secret != nil:
		plugin = pluginSecret
	case v.Projected != nil:
		plugin = pluginProjected
	case v.DownwardAPI != nil:
		plugin = pluginDownwardAPI
	default:
		return ""
	}
	return volume.ChildDir(filepath.Join(m.Dir(p.UID), "volumes", plugin), v.Name)
}

// LocalDir is where a volume the agent keeps beneath the pod directory
// lives — emptyDir, configMap, secret, downwardAPI, projected — and
// whether it is memory-backed (a tmpfs: a memory emptyDir, secrets and
// projected volumes); "" for a volume that is not (hostPath, image).
// A persistent volume claim's (or generic ephemeral) volume is its
// volume's path once a container mounted it.
// For the stats of the pod's volumes; the directory may not exist yet.
func (m *Manager) LocalDir(p *v1.Pod, v *v1.Volume) (dir string, memory bool) {
	if ClaimName(p, v) != "" {
		m.cmu.Lock()
		defer m.cmu.Unlock()
		return m.claims[p.UID][v.Name].path, false
	}
	if v.EmptyDir != nil {
		return volume.EmptyDirPath(m.Dir(p.UID), v.Name), v.EmptyDir.Medium == v1.StorageMediumMemory
	}
	return m.renderedDir(p, v), v.Secret != nil || v.Projected != nil
}

// volumeFiles builds a rendered volume's content and names its plugin
// directory. Without an API server only downward API content can be
// built.
func (m *Manager) volumeFiles(ctx context.Context, p *v1.Pod, v *v1.Volume, podIP string) (string, map[string]volume.File, error) {
	files := map[string]volume.File{}
	switch {
	case v.ConfigMap != nil:
		src := v.ConfigMap
		if m.cfg.Objects == nil {
			return "", nil, fmt.Errorf("configMap volumes need an API server: %w", errStandalone)
		}
		optional := src.Optional != nil && *src.Optional
		cm, err := m.getConfigMap(ctx, p.Namespace, src.Name, optional)
		if err == nil {
			err = configMapFiles(cm, src.Items, modeOr(src.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode), optional, files)
		}
		return pluginConfigMap, files, err
	case v.Secret != nil:
		src := v.Secret
		if m.cfg.Objects == nil {
			return "", nil, fmt.Errorf("secret volumes need an API server: %w", errStandalone)
		}
		optional := src.Optional != nil && *src.Optional
		s, err := m.getSecret(ctx, p.Namespace, src.SecretName, optional)
		if err == nil {
			err = secretFiles(s, src.Items, modeOr(src.DefaultMode, v1.SecretVolumeSourceDefaultMode), optional, files)
		}
		return pluginSecret, files, err
	case v.DownwardAPI != nil:
		src := v.DownwardAPI
		err := m.downwardFiles(p, src.Items, modeOr(src.DefaultMode, v1.DownwardAPIVolumeSourceDefaultMode), podIP, files)
		return pluginDownwardAPI, files, err
	case v.Projected != nil:
		if m.cfg.Objects == nil {
			for _, s := range v.Projected.Sources {
				if s.DownwardAPI == nil {
					return "", nil, fmt.Errorf("projected volumes with sources other than downwardAPI need an API server: %w", errStandalone)
				}
			}
		}
		files, err := m.projectedFiles(ctx, p, v.Projected, podIP)
		return pluginProjected, files, err
	}
	return "", nil, errors.New("not a rendered volume")
}

// modeOr is a spec's default mode, or def when unset.
func modeOr(m *int32, def int32) int32 {
	if m != nil {
		return *m
	}
	return def
}

// Refresh re-renders the rendered volumes that running containers of the
// pod's sandbox (st's containers in sandboxID) mount, so that they see ConfigMap and Secret edits,
// new labels and fresh tokens (the kubelet's volume manager remounts
// these volumes periodically for the same reason). Errors are logged: the
// running containers keep the last content; a container about to start
// renders its volumes again and reports the error as its waiting reason.
// log is the pod worker's logger. Called on every sync of the pod, by its
// worker.
func (m *Manager) Refresh(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, sandboxID, podIP string, log *zap.Logger) {
	mounted := map[string]bool{}
	for _, rc := range st.Containers {
		if rc.SandboxID != sandboxID || rc.State != pod.ContainerRunning {
			continue
		}
		c := findSpecContainer(p, rc)
		if c == nil {
			continue
		}
		for _, vm := range c.VolumeMounts {
			mounted[vm.Name] = true
		}
	}
	if len(mounted) == 0 {
		return
	}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		if !mounted[v.Name] || !isRendered(v) {
			continue
		}
		dir, changed, err := m.renderVolume(ctx, p, v, podIP)
		if err == nil {
			err = m.own(p, v, dir, true) // new files are the fsGroup's too
		}
		if err != nil {
			log.Warn("refresh volume failed; running containers keep its last content", zap.String("volume", v.Name), zap.Error(err))
			continue
		}
		if changed {
			log.Info("volume content updated", zap.String("volume", v.Name))
		}
	}
}

// findSpecContainer finds the spec of a runtime container (app, init or
// ephemeral) by name.
func findSpecContainer(p *v1.Pod, rc *pod.Container) *v1.Container {
	if rc.Ephemeral {
		for i := range p.Spec.EphemeralContainers {
			if ec := &p.Spec.EphemeralContainers[i]; ec.Name == rc.Name {
				return (*v1.Container)(&ec.EphemeralContainerCommon)
			}
		}
		return nil
	}
	cs := p.Spec.Containers
	if rc.Init {
		cs = p.Spec.InitContainers
	}
	for i := range cs {
		if cs[i].Name == rc.Name {
			return &cs[i]
		}
	}
	return nil
}

// memoryVolumeSize bounds a pod's memory-backed volumes, as the kubelet
// sizes them: the pod's memory limit (pod-level, or its containers'
// sum) when every container has one, else 0 (the kernel's default).
func memoryVolumeSize(p *v1.Pod) int64 {
	lim, ok := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})[v1.ResourceMemory]
	if !ok || lim.Sign() <= 0 {
		return 0
	}
	for _, c := range p.Spec.Containers {
		if _, has := c.Resources.Limits[v1.ResourceMemory]; !has && p.Spec.Resources == nil {
			return 0 // a container without a limit: the pod has none
		}
	}
	return lim.Value()
}
