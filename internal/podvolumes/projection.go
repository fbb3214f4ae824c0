package podvolumes

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/nodeagent/nodeagent/internal/downward"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// This file builds the content of configMap, secret, downwardAPI and
// projected volumes (the kubelet's MakePayload / CollectData in
// pkg/volume/{configmap,secret,downwardapi,projected}); volumes.go
// writes it with volume.WriteAtomic.

// defaultTokenSeconds is a serviceAccountToken source's lifetime when the
// spec leaves it out (the API server's default).
const defaultTokenSeconds = 3600

// fileMode is a spec mode (an int32 such as 0644), or def when unset.
func fileMode(m *int32, def int32) os.FileMode {
	if m != nil {
		def = *m
	}
	return os.FileMode(def).Perm()
}

// configMapFiles adds a ConfigMap's keys (data and binaryData) to files:
// every key under its own name, or only items (key → path, per-item
// mode). cm nil is a missing optional ConfigMap: nothing is added. A
// missing key is skipped when optional, an error otherwise.
func configMapFiles(cm *v1.ConfigMap, items []v1.KeyToPath, defaultMode int32, optional bool, files map[string]volume.File) error {
	if cm == nil {
		return nil
	}
	if len(items) == 0 {
		for k, v := range cm.Data {
			files[k] = volume.File{Data: []byte(v), Mode: fileMode(nil, defaultMode)}
		}
		for k, v := range cm.BinaryData {
			files[k] = volume.File{Data: v, Mode: fileMode(nil, defaultMode)}
		}
		return nil
	}
	for _, it := range items {
		var data []byte
		if s, ok := cm.Data[it.Key]; ok {
			data = []byte(s)
		} else if b, ok := cm.BinaryData[it.Key]; ok {
			data = b
		} else if optional {
			continue
		} else {
			return fmt.Errorf("configmap references non-existent config key: %s", it.Key)
		}
		files[it.Path] = volume.File{Data: data, Mode: fileMode(it.Mode, defaultMode)}
	}
	return nil
}

// secretFiles is configMapFiles for a Secret's data.
func secretFiles(s *v1.Secret, items []v1.KeyToPath, defaultMode int32, optional bool, files map[string]volume.File) error {
	if s == nil {
		return nil
	}
	if len(items) == 0 {
		for k, v := range s.Data {
			files[k] = volume.File{Data: v, Mode: fileMode(nil, defaultMode)}
		}
		return nil
	}
	for _, it := range items {
		data, ok := s.Data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("references non-existent secret key: %s", it.Key)
		}
		files[it.Path] = volume.File{Data: data, Mode: fileMode(it.Mode, defaultMode)}
	}
	return nil
}

// downwardFiles adds the downward API items to files: pod fields and
// container resources.
func (m *Manager) downwardFiles(p *v1.Pod, items []v1.DownwardAPIVolumeFile, defaultMode int32, podIP string, files map[string]volume.File) error {
	var errs []error
	for _, it := range items {
		var (
			val string
			err error
		)
		switch {
		case it.FieldRef != nil:
			val, err = m.node.FieldValue(p, it.FieldRef.FieldPath, podIP)
		case it.ResourceFieldRef != nil:
			if c := downward.Container(p, it.ResourceFieldRef.ContainerName); c != nil {
				val, err = m.node.ResourceValue(p, c, it.ResourceFieldRef)
			} else {
				err = fmt.Errorf("container %s not found", it.ResourceFieldRef.ContainerName)
			}
		default:
			err = fmt.Errorf("downwardAPI item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", it.Path, err))
			continue
		}
		files[it.Path] = volume.File{Data: []byte(val), Mode: fileMode(it.Mode, defaultMode)}
	}
	return utilerrors.NewAggregate(errs)
}

// projectedFiles collects every source of a projected volume. As the
// kubelet, every source is tried and the errors are reported together;
// nothing is written unless all succeed.
func (m *Manager) projectedFiles(ctx context.Context, p *v1.Pod, pv *v1.ProjectedVolumeSource, podIP string) (map[string]volume.File, error) {
	mode := int32(v1.ProjectedVolumeSourceDefaultMode)
	if pv.DefaultMode != nil {
		mode = *pv.DefaultMode
	}
	files := map[string]volume.File{}
	var errs []error
	for _, src := range pv.Sources {
		switch {
		case src.ConfigMap != nil:
			optional := src.ConfigMap.Optional != nil && *src.ConfigMap.Optional
			cm, err := m.getConfigMap(ctx, p.Namespace, src.ConfigMap.Name, optional)
			if err == nil {
				err = configMapFiles(cm, src.ConfigMap.Items, mode, optional, files)
			}
			errs = append(errs, err)
		case src.Secret != nil:
			optional := src.Secret.Optional != nil && *src.Secret.Optional
			s, err := m.getSecret(ctx, p.Namespace, src.Secret.Name, optional)
			if err == nil {
				err = secretFiles(s, src.Secret.Items, mode, optional, files)
			}
			errs = append(errs, err)
		case src.DownwardAPI != nil:
			errs = append(errs, m.downwardFiles(p, src.DownwardAPI.Items, mode, podIP, files))
		case src.ServiceAccountToken != nil:
			tp := src.ServiceAccountToken
			seconds := int64(defaultTokenSeconds)
			if tp.ExpirationSeconds != nil {
				seconds = *tp.ExpirationSeconds
			}
			token, err := m.serviceAccountToken(ctx, p, tp.Audience, seconds)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			// The kubelet makes the token 0600 when an fsGroup or user
			// owns the volume; nodeagent applies neither (see doc.go), so
			// the default mode stands.
			files[tp.Path] = volume.File{Data: []byte(token), Mode: fileMode(nil, mode)}
		case src.ClusterTrustBundle != nil:
			errs = append(errs, fmt.Errorf("clusterTrustBundle projections are not supported by nodeagent"))
		case src.PodCertificate != nil:
			errs = append(errs, fmt.Errorf("podCertificate projections are not supported by nodeagent"))
		default:
			errs = append(errs, fmt.Errorf("projected volume source of unknown kind"))
		}
	}
	if err := utilerrors.NewAggregate(errs); err != nil {
		return nil, err
	}
	return files, nil
}
