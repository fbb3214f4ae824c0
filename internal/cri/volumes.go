package cri

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
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

// mountsFor prepares the pod's volumes a container mounts and returns the
// CRI mounts. emptyDir lives under the pod directory; hostPath honours its
// type; configMap, secret, downwardAPI and projected volumes are rendered
// (renderVolume) and always mounted read-only, as the kubelet mounts
// them. A subPath (or a subPathExpr expanded with the container's env) is
// resolved beneath its volume without following a symlink out of it and
// bind-mounted under the pod directory (package volume); the runtime gets
// that bind mount, never the joined path. Other volume kinds need a
// plugin and are a CreateContainerConfigError.
func (r *Runtime) mountsFor(ctx context.Context, p *v1.Pod, c *v1.Container, env []string, podIP string) ([]*runtimeapi.Mount, error) {
	vols := map[string]*v1.Volume{}
	for i := range p.Spec.Volumes {
		vols[p.Spec.Volumes[i].Name] = &p.Spec.Volumes[i]
	}
	var mounts []*runtimeapi.Mount
	for i, m := range c.VolumeMounts {
		v := vols[m.Name]
		if v == nil {
			return nil, fmt.Errorf("volume %q not found", m.Name)
		}
		host, readOnly, err := r.volumePath(ctx, p, v, podIP)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", m.Name, err)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expand(m.SubPathExpr, envMap(env))
		}
		if sub != "" {
			// Every element is validated (volume and container names are
			// DNS labels, the UID a plain token, childDir keeps the pod
			// directory beneath its root) and volume-subpaths is never
			// mounted into a container, so no container can plant a
			// symlink on this path.
			target := filepath.Join(r.PodDir(string(p.UID)), "volume-subpaths", m.Name, c.Name, strconv.Itoa(i))
			if err := volume.BindSubPath(host, sub, target); err != nil {
				return nil, fmt.Errorf("volume %q: %w", m.Name, err)
			}
			host = target
		}
		mounts = append(mounts, &runtimeapi.Mount{
			ContainerPath: m.MountPath,
			HostPath:      host,
			Readonly:      m.ReadOnly || readOnly,
		})
	}
	return mounts, nil
}

// volumePath prepares one volume and returns its host path and whether it
// must be mounted read-only whatever the mount says.
func (r *Runtime) volumePath(ctx context.Context, p *v1.Pod, v *v1.Volume, podIP string) (string, bool, error) {
	switch {
	case v.EmptyDir != nil:
		dir, err := volume.EmptyDir(r.PodDir(string(p.UID)), v.Name)
		return dir, false, err
	case v.HostPath != nil:
		return v.HostPath.Path, false, volume.CheckHostPath(v.HostPath)
	case isRendered(v):
		dir, _, err := r.renderVolume(ctx, p, v, podIP)
		if err != nil && apiUnreachable(err) {
			// The API server does not answer (a missing object is an
			// answer, and stays an error): a container (re)started
			// meanwhile gets the volume's last content, when it has one.
			if last := r.renderedDir(p, v); last != "" && volume.HasContent(last) {
				r.log.Warn("API server unreachable; volume keeps its last content", zap.String("pod", p.Namespace+"/"+p.Name),
					zap.String("volume", v.Name), zap.Error(err))
				return last, true, nil
			}
		}
		return dir, true, err
	}
	return "", false, errors.New("volume type not supported (emptyDir, hostPath, configMap, secret, downwardAPI and projected are)")
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
// containers (refreshVolumes), so edits of a ConfigMap or Secret, label
// changes and token refreshes reach running containers; an unchanged
// volume costs a read of its files.
//
// The kubelet keeps secret and projected volumes on a tmpfs so that
// secrets never reach a disk; nodeagent writes them to the pod directory
// (0750 up to the volume, so only root on the host reads them) and
// removes them with the pod. A tmpfs would need a mount per volume that
// every removal path must unmount first; not done yet.
func (r *Runtime) renderVolume(ctx context.Context, p *v1.Pod, v *v1.Volume, podIP string) (string, bool, error) {
	plugin, files, err := r.volumeFiles(ctx, p, v, podIP)
	if err != nil {
		return "", false, err
	}
	dir := childDir(filepath.Join(r.PodDir(string(p.UID)), "volumes", plugin), v.Name)
	changed, err := volume.WriteAtomic(dir, files, r.cfg.Clock.Now())
	if err != nil {
		return "", false, fmt.Errorf("write volume: %w", err)
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
func (r *Runtime) renderedDir(p *v1.Pod, v *v1.Volume) string {
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
	return childDir(filepath.Join(r.PodDir(string(p.UID)), "volumes", plugin), v.Name)
}

// volumeFiles builds a rendered volume's content and names its plugin
// directory. Without an API server only downward API content can be
// built.
func (r *Runtime) volumeFiles(ctx context.Context, p *v1.Pod, v *v1.Volume, podIP string) (string, map[string]volume.File, error) {
	files := map[string]volume.File{}
	switch {
	case v.ConfigMap != nil:
		src := v.ConfigMap
		if r.cfg.Objects == nil {
			return "", nil, fmt.Errorf("configMap volumes need an API server: %w", errStandalone)
		}
		optional := src.Optional != nil && *src.Optional
		cm, err := r.getConfigMap(ctx, p.Namespace, src.Name, optional)
		if err == nil {
			err = configMapFiles(cm, src.Items, modeOr(src.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode), optional, files)
		}
		return pluginConfigMap, files, err
	case v.Secret != nil:
		src := v.Secret
		if r.cfg.Objects == nil {
			return "", nil, fmt.Errorf("secret volumes need an API server: %w", errStandalone)
		}
		optional := src.Optional != nil && *src.Optional
		s, err := r.getSecret(ctx, p.Namespace, src.SecretName, optional)
		if err == nil {
			err = secretFiles(s, src.Items, modeOr(src.DefaultMode, v1.SecretVolumeSourceDefaultMode), optional, files)
		}
		return pluginSecret, files, err
	case v.DownwardAPI != nil:
		src := v.DownwardAPI
		err := r.downwardFiles(p, src.Items, modeOr(src.DefaultMode, v1.DownwardAPIVolumeSourceDefaultMode), podIP, files)
		return pluginDownwardAPI, files, err
	case v.Projected != nil:
		if r.cfg.Objects == nil {
			for _, s := range v.Projected.Sources {
				if s.DownwardAPI == nil {
					return "", nil, fmt.Errorf("projected volumes with sources other than downwardAPI need an API server: %w", errStandalone)
				}
			}
		}
		files, err := r.projectedFiles(ctx, p, v.Projected, podIP)
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

// refreshVolumes re-renders the rendered volumes that running containers
// of the pod's sandbox mount, so that they see ConfigMap and Secret edits,
// new labels and fresh tokens (the kubelet's volume manager remounts
// these volumes periodically for the same reason). Errors are logged: the
// running containers keep the last content; a container about to start
// renders its volumes again and reports the error as its waiting reason.
func (r *Runtime) refreshVolumes(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, sandboxID, podIP string, log *zap.Logger) {
	mounted := map[string]bool{}
	for _, rc := range st.Containers {
		if rc.SandboxID != sandboxID || rc.State != pod.ContainerRunning {
			continue
		}
		c := findSpecContainer(p, rc.Name, rc.Init)
		if c == nil {
			continue
		}
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
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
		_, changed, err := r.renderVolume(ctx, p, v, podIP)
		if err != nil {
			log.Warn("refresh volume failed; running containers keep its last content", zap.String("volume", v.Name), zap.Error(err))
			continue
		}
		if changed {
			log.Info("volume content updated", zap.String("volume", v.Name))
		}
	}
}

// findSpecContainer finds a container (init or not) of p's spec by name.
func findSpecContainer(p *v1.Pod, name string, init bool) *v1.Container {
	cs := p.Spec.Containers
	if init {
		cs = p.Spec.InitContainers
	}
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}
