package cri

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

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
func (r *Runtime) downwardFiles(p *v1.Pod, items []v1.DownwardAPIVolumeFile, defaultMode int32, podIP string, files map[string]volume.File) error {
	var errs []error
	for _, it := range items {
		var (
			val string
			err error
		)
		switch {
		case it.FieldRef != nil:
			val, err = r.fieldValue(p, it.FieldRef.FieldPath, podIP)
		case it.ResourceFieldRef != nil:
			if c := findContainer(p, it.ResourceFieldRef.ContainerName); c != nil {
				val, err = r.resourceValue(p, c, it.ResourceFieldRef)
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
func (r *Runtime) projectedFiles(ctx context.Context, p *v1.Pod, pv *v1.ProjectedVolumeSource, podIP string) (map[string]volume.File, error) {
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
			cm, err := r.getConfigMap(ctx, p.Namespace, src.ConfigMap.Name, optional)
			if err == nil {
				err = configMapFiles(cm, src.ConfigMap.Items, mode, optional, files)
			}
			errs = append(errs, err)
		case src.Secret != nil:
			optional := src.Secret.Optional != nil && *src.Secret.Optional
			s, err := r.getSecret(ctx, p.Namespace, src.Secret.Name, optional)
			if err == nil {
				err = secretFiles(s, src.Secret.Items, mode, optional, files)
			}
			errs = append(errs, err)
		case src.DownwardAPI != nil:
			errs = append(errs, r.downwardFiles(p, src.DownwardAPI.Items, mode, podIP, files))
		case src.ServiceAccountToken != nil:
			tp := src.ServiceAccountToken
			seconds := int64(defaultTokenSeconds)
			if tp.ExpirationSeconds != nil {
				seconds = *tp.ExpirationSeconds
			}
			token, err := r.serviceAccountToken(ctx, p, tp.Audience, seconds)
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

// formatMap renders labels or annotations as the kubelet's downward API
// does (fieldpath.FormatMap): sorted `key="value"` lines, values quoted
// Go-style, no trailing newline.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceValue is a container's request or limit in units of the
// selector's divisor, rounded up (the kubelet's
// ExtractContainerResourceValue). A cpu, memory or
// ephemeral-storage limit the container does not set reads as the pod's
// limit, else as the node's allocatable amount, as the kubelet reports it;
// nodeagent takes the node's figures from the host (see nodeAllocatable).
func (r *Runtime) resourceValue(p *v1.Pod, c *v1.Container, fs *v1.ResourceFieldSelector) (string, error) {
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, _ := strings.Cut(fs.Resource, ".")
	rn := v1.ResourceName(name)
	switch rn {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
	default:
		if !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
			return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
		}
	}
	var q resource.Quantity
	switch kind {
	case "requests":
		q = c.Resources.Requests[rn]
	case "limits":
		q = c.Resources.Limits[rn]
		if q.IsZero() && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
			var err error
			if q, err = r.defaultLimit(p, rn); err != nil {
				return "", fmt.Errorf("%s of container %s (no limit set): %w", fs.Resource, c.Name, err)
			}
		}
	default:
		return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
	}
	if rn == v1.ResourceCPU {
		if divisor.MilliValue() <= 0 {
			return "", fmt.Errorf("invalid divisor %s for %s", divisor.String(), fs.Resource)
		}
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	if divisor.Value() <= 0 {
		return "", fmt.Errorf("invalid divisor %s for %s", divisor.String(), fs.Resource)
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// defaultLimit is what a container without a limit of rn reads: the pod's
// limit (pod-level resources) or the node's allocatable amount.
func (r *Runtime) defaultLimit(p *v1.Pod, rn v1.ResourceName) (resource.Quantity, error) {
	if p.Spec.Resources != nil {
		if q, ok := p.Spec.Resources.Limits[rn]; ok && !q.IsZero() {
			return q, nil
		}
	}
	return r.nodeAllocatable(rn)
}

// nodeAllocatable is the node's amount of rn as nodeagent knows it: the
// host's CPUs and memory (the figures admission uses) and the size of the
// filesystem of RootDir for ephemeral storage. No reservation is
// subtracted: nodeagent reserves nothing yet.
func (r *Runtime) nodeAllocatable(rn v1.ResourceName) (resource.Quantity, error) {
	switch rn {
	case v1.ResourceCPU:
		return *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI), nil
	case v1.ResourceMemory:
		var info syscall.Sysinfo_t
		if err := syscall.Sysinfo(&info); err != nil {
			return resource.Quantity{}, fmt.Errorf("read the node's memory: %w", err)
		}
		return *resource.NewQuantity(int64(info.Totalram)*int64(info.Unit), resource.BinarySI), nil
	case v1.ResourceEphemeralStorage:
		var st syscall.Statfs_t
		if err := syscall.Statfs(r.cfg.RootDir, &st); err != nil {
			return resource.Quantity{}, fmt.Errorf("read the size of %s: %w", r.cfg.RootDir, err)
		}
		return *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI), nil
	}
	return resource.Quantity{}, fmt.Errorf("the node's allocatable %s is unknown to nodeagent", rn)
}

// findContainer finds a container or init container of p by name.
func findContainer(p *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}
