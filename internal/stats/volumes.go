package stats

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/nodeagent/internal/podvolumes"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// Volumes is what the summary reads of the pods' volumes: a desired pod
// by UID (the pod manager's view) and where each volume the agent keeps
// beneath a pod directory lives (podvolumes.Manager.LocalDir).
type Volumes struct {
	Pod func(uid string) (*v1.Pod, bool)
	Dir func(p *v1.Pod, v *v1.Volume) (dir string, memory bool)
	// CSI, if set, gives a CSI volume's use as its driver reports it
	// (NodeGetVolumeStats); ok false: measured as the others.
	CSI func(ctx context.Context, p *v1.Pod, v *v1.Volume) (*statsapi.FsStats, bool)
	// Period is how long a pod's measure is reused (the kubelet's
	// volumeStatsAggPeriod, 1m): a volume is walked at most that often.
	Period time.Duration
	// MaxEntries bounds the files counted in one volume (default 1e6).
	MaxEntries int
}

// podVolumes is one pod's measured volumes.
type podVolumes struct {
	at        time.Time
	stats     []statsapi.VolumeStats
	ephemeral uint64 // bytes of its local ephemeral volumes
	inodes    uint64
}

// volumeCache keeps each pod's measure for Volumes.Period.
type volumeCache struct {
	mu   sync.Mutex
	pods map[string]podVolumes
}

// volumeStats is the measure of the volumes of the pod with uid, at most
// Period old, measuring it again when it is older: as the kubelet's fs
// resource analyzer, a disk-backed volume's use is counted as du does
// (bounded), with its file system's capacity; a memory-backed one is its
// tmpfs's statfs. Its local ephemeral volumes (a disk emptyDir, a
// configMap: the kubelet's IsLocalEphemeralVolume) are summed for the
// pod's ephemeral storage. ok is false when the pod manager does not
// know the pod (a refused or terminating pod it still holds is measured;
// a volume not set up is skipped).
func (p *Provider) volumeStats(ctx context.Context, uid string, now time.Time) (podVolumes, bool) {
	vs := p.cfg.Volumes
	if vs == nil {
		return podVolumes{}, false
	}
	p.vols.mu.Lock()
	cached, ok := p.vols.pods[uid]
	p.vols.mu.Unlock()
	if ok && now.Sub(cached.at) < vs.Period {
		return cached, true
	}
	pd, ok := vs.Pod(uid)
	if !ok {
		return podVolumes{}, false
	}
	limit := vs.MaxEntries
	if limit <= 0 {
		limit = 1_000_000
	}
	out := podVolumes{at: now}
	for i := range pd.Spec.Volumes {
		v := &pd.Spec.Volumes[i]
		if vs.CSI != nil {
			if fs, ok := vs.CSI(ctx, pd, v); ok {
				out.stats = append(out.stats, volumeStats(pd, v, fs))
				continue
			}
		}
		dir, memory := vs.Dir(pd, v)
		if dir == "" {
			continue
		}
		fs, err := Statfs(dir, now)
		if err != nil {
			continue // not made yet (or gone)
		}
		if !memory {
			used, inodes, err := volume.DiskUsageInodes(ctx, dir, limit)
			if err != nil && used == 0 {
				continue
			}
			u, n := uint64(used), uint64(inodes)
			fs.UsedBytes, fs.InodesUsed = &u, &n
			if (v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault) || v.ConfigMap != nil {
				out.ephemeral += u
				out.inodes += n
			}
		}
		out.stats = append(out.stats, volumeStats(pd, v, fs))
	}
	p.vols.mu.Lock()
	if p.vols.pods == nil {
		p.vols.pods = map[string]podVolumes{}
	}
	p.vols.pods[uid] = out
	p.vols.mu.Unlock()
	return out, true
}

// volumeStats is a volume's entry in the summary, with its claim's
// reference for a claim volume.
func volumeStats(p *v1.Pod, v *v1.Volume, fs *statsapi.FsStats) statsapi.VolumeStats {
	vst := statsapi.VolumeStats{Name: v.Name, FsStats: *fs}
	if claim := podvolumes.ClaimName(p, v); claim != "" {
		vst.PVCRef = &statsapi.PVCReference{Name: claim, Namespace: p.Namespace}
	}
	return vst
}

// forgetVolumes drops the measures of pods no longer in the summary.
func (p *Provider) forgetVolumes(keep map[string]bool) {
	p.vols.mu.Lock()
	defer p.vols.mu.Unlock()
	for uid := range p.vols.pods {
		if !keep[uid] {
			delete(p.vols.pods, uid)
		}
	}
}
