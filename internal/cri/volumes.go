package cri

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// mountsFor prepares the pod's volumes a container mounts and returns the
// CRI mounts. emptyDir lives under the pod directory; hostPath honours its
// type (DirectoryOrCreate and FileOrCreate create, Directory and File must
// exist). Other volume kinds need an API server or a plugin and are a
// CreateContainerConfigError.
func (r *Runtime) mountsFor(p *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) {
	vols := map[string]*v1.Volume{}
	for i := range p.Spec.Volumes {
		vols[p.Spec.Volumes[i].Name] = &p.Spec.Volumes[i]
	}
	var mounts []*runtimeapi.Mount
	for _, m := range c.VolumeMounts {
		v := vols[m.Name]
		if v == nil {
			return nil, fmt.Errorf("volume %q not found", m.Name)
		}
		host, err := r.volumePath(p, v)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", m.Name, err)
		}
		if m.SubPath != "" {
			host = filepath.Join(host, m.SubPath)
			if err := os.MkdirAll(host, 0o755); err != nil {
				return nil, fmt.Errorf("volume %q subPath: %w", m.Name, err)
			}
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
		dir := filepath.Join(r.PodDir(string(p.UID)), "volumes", "kubernetes.io~empty-dir", v.Name)
		return dir, os.MkdirAll(dir, 0o777)
	case v.HostPath != nil:
		return v.HostPath.Path, checkHostPath(v.HostPath)
	}
	return "", fmt.Errorf("volume type not supported without an API server (only emptyDir and hostPath)")
}

func checkHostPath(h *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	info, err := os.Stat(h.Path)
	switch t {
	case v1.HostPathDirectoryOrCreate:
		if os.IsNotExist(err) {
			return os.MkdirAll(h.Path, 0o755)
		}
	case v1.HostPathFileOrCreate:
		if os.IsNotExist(err) {
			if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(h.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
	case v1.HostPathDirectory:
		if err != nil || !info.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", h.Path)
		}
	case v1.HostPathFile:
		if err != nil || !info.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", h.Path)
		}
	}
	return nil
}
