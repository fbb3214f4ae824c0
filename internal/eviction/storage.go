package eviction

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodeagent/nodeagent/internal/volume"
)

// Local storage capacity isolation, as the kubelet's localStorageEviction:
// every pass, a pod that uses more local ephemeral storage than it may is
// evicted at once (no grace), whether or not the node is short of disk:
//
//	an emptyDir volume past its sizeLimit;
//	the pod past the sum of its containers' ephemeral-storage limits
//	(its containers' writable layers and logs, and its emptyDir volumes);
//	a container past its own ephemeral-storage limit (its writable layer
//	and its logs).
//
// Only pods with such a limit are measured. A memory-backed emptyDir is a
// tmpfs of its size limit: it cannot pass it, and is not measured.
// System-critical pods (priority ≥ 2000000000) are never evicted, as the
// kubelet's; unlike the kubelet, static pods are (a standalone node has
// no other kind, and the limit is the pod's own). Simpler than the
// kubelet: a writable layer counts even where the image file system is a
// dedicated one, and configMap, secret and downwardAPI volumes (small,
// and secrets on tmpfs) are not counted. One pass measures for at most
// storagePassTimeout; a volume not measured in time is judged next pass.

// The kubelet's messages (pkg/kubelet/eviction/helpers.go).
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q."
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s."
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q."
)

// PodStorage is a pod's use of local ephemeral storage, in bytes.
type PodStorage struct {
	// Containers: each container's writable layer plus its logs, by name.
	Containers map[string]int64
	// Volumes: each disk-backed emptyDir volume's content, by name.
	Volumes map[string]int64
}

// StorageReader reads pods' local ephemeral storage use.
type StorageReader interface {
	PodStorage(ctx context.Context, pods []*v1.Pod) (map[types.UID]PodStorage, error)
}

// LocalStorage is a StorageReader: writable layers from the runtime's
// container stats, logs and emptyDir volumes from their directories.
type LocalStorage struct {
	// Stats gives each container's writable layer (Usage.Disk).
	Stats Stats
	// Logs is the size of a container's logs (every rotation).
	Logs func(p *v1.Pod, container string) (int64, error)
	// PodDir is a pod's directory: its emptyDir volumes are beneath it.
	PodDir func(types.UID) string
	// MaxEntries bounds the files counted in one volume (default 1e6).
	MaxEntries int
}

// storagePassTimeout bounds one pass's measuring.
const storagePassTimeout = 30 * time.Second

// PodStorage implements StorageReader.
func (s LocalStorage) PodStorage(ctx context.Context, pods []*v1.Pod) (map[types.UID]PodStorage, error) {
	ctx, cancel := context.WithTimeout(ctx, storagePassTimeout)
	defer cancel()
	layers, err := s.Stats.PodUsage(ctx)
	if err != nil {
		return nil, fmt.Errorf("container stats: %w", err)
	}
	limit := s.MaxEntries
	if limit <= 0 {
		limit = 1_000_000
	}
	out := make(map[types.UID]PodStorage, len(pods))
	for _, p := range pods {
		ps := PodStorage{Containers: map[string]int64{}, Volumes: map[string]int64{}}
		for name, u := range layers[p.UID].Containers {
			ps.Containers[name] += u.Disk
		}
		for _, c := range p.Spec.Containers {
			if n, err := s.Logs(p, c.Name); err == nil {
				ps.Containers[c.Name] += n
			}
		}
		for _, v := range p.Spec.Volumes {
			if v.EmptyDir == nil || v.EmptyDir.Medium == v1.StorageMediumMemory {
				continue
			}
			dir := volume.EmptyDirPath(s.PodDir(p.UID), v.Name)
			n, err := volume.DiskUsage(ctx, dir, limit)
			switch {
			case errors.Is(err, volume.ErrTooManyFiles):
				ps.Volumes[v.Name] = math.MaxInt64 // past any limit: a volume too big to count is too big
			case err == nil:
				ps.Volumes[v.Name] = n
			}
		}
		out[p.UID] = ps
	}
	return out, nil
}

// storageLimited reports a pod with a local storage limit to enforce.
func storageLimited(p *v1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory && v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Sign() > 0 {
			return true
		}
	}
	_, limited := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]
	return limited
}

// storageViolation is the eviction message of a pod past a local storage
// limit, in the kubelet's order, or "".
func storageViolation(p *v1.Pod, u PodStorage) string {
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Sign() <= 0 {
			continue
		}
		if used, ok := u.Volumes[v.Name]; ok && used > v.EmptyDir.SizeLimit.Value() {
			return fmt.Sprintf(emptyDirMessageFmt, v.Name, v.EmptyDir.SizeLimit.String())
		}
	}
	if limit, ok := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok {
		var total int64
		for _, n := range u.Containers {
			total = addSat(total, n)
		}
		for _, n := range u.Volumes {
			total = addSat(total, n)
		}
		if total > limit.Value() {
			return fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String())
		}
	}
	for _, c := range p.Spec.Containers {
		limit, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if !ok || limit.IsZero() {
			continue
		}
		if used := u.Containers[c.Name]; used > limit.Value() {
			return fmt.Sprintf(containerEphemeralStorageMessageFmt, c.Name, limit.String())
		}
	}
	return ""
}

// addSat adds non-negative sizes, saturating at the largest.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// localStorageEviction evicts, with no grace, every active pod past a
// local storage limit, and returns them.
func (m *Manager) localStorageEviction(ctx context.Context) []*v1.Pod {
	if m.cfg.Storage == nil {
		return nil
	}
	var limited []*v1.Pod
	for _, p := range m.cfg.ActivePods() {
		if storageLimited(p) && priority(p) < criticalPriority {
			limited = append(limited, p)
		}
	}
	if len(limited) == 0 {
		return nil
	}
	use, err := m.cfg.Storage.PodStorage(ctx, limited)
	if err != nil {
		m.log.Warn("local storage use unknown; its limits are not enforced this pass", zap.Error(err))
		return nil
	}
	var evicted []*v1.Pod
	for _, p := range limited {
		u, ok := use[p.UID]
		if !ok {
			continue
		}
		msg := storageViolation(p, u)
		if msg == "" {
			continue
		}
		m.log.Warn("evicting pod past its local storage limit", zap.String("pod", p.Namespace+"/"+p.Name),
			zap.String("uid", string(p.UID)), zap.String("message", msg))
		m.cfg.Evict(p, 0, msg)
		evicted = append(evicted, p)
	}
	return evicted
}
