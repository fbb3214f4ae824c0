package cri

import (
	"fmt"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/volume"
)

// mountsFor prepares the pod's volumes a container mounts and returns the
// CRI mounts. emptyDir lives under the pod directory; hostPath honours its
// type. A subPath (or a subPathExpr expanded with the container's env) is
// resolved beneath its volume without following a symlink out of it and
// bind-mounted under the pod directory (package volume); the runtime gets
// that bind mount, never the joined path. Other volume kinds need an API
// server or a plugin and are a CreateContainerConfigError.
func (r *Runtime) mountsFor(p *v1.Pod, c *v1.Container, env []string) ([]*runtimeapi.Mount, error) {
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
		host, err := r.volumePath(p, v)
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
			Readonly:      m.ReadOnly,
		})
	}
	return mounts, nil
}

func (r *Runtime) volumePath(p *v1.Pod, v *v1.Volume) (string, error) {
	switch {
	case v.EmptyDir != nil:
		return volume.EmptyDir(r.PodDir(string(p.UID)), v.Name)
	case v.HostPath != nil:
		return v.HostPath.Path, volume.CheckHostPath(v.HostPath)
	}
	return "", fmt.Errorf("volume type not supported without an API server (only emptyDir and hostPath)")
}
