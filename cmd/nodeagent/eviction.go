package main

import (
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/eviction"
	"github.com/nodeagent/nodeagent/internal/images"
	"github.com/nodeagent/nodeagent/internal/logs"
	"github.com/nodeagent/nodeagent/internal/podmanager"
	"github.com/nodeagent/nodeagent/internal/syncloop"
)

// evictionThresholds are the hard and soft thresholds the eviction
// manager knows; others (nodefs.inodesFree) only shape allocatable.
func evictionThresholds(o *options, log *zap.Logger) []eviction.Threshold {
	var out []eviction.Threshold
	add := func(signal string, th eviction.Threshold) {
		switch signal {
		case eviction.MemoryAvailable, eviction.NodeFsAvailable, eviction.ImageFsAvailable, eviction.PIDAvailable:
			out = append(out, th)
		default:
			log.Info("eviction signal not watched (it only shapes allocatable)", zap.String("signal", signal))
		}
	}
	for _, t := range o.hardThresholds {
		add(t.Signal, eviction.Threshold{Signal: t.Signal, Quantity: t.Quantity, Percent: t.Percent})
	}
	for _, t := range o.softThresholds {
		add(t.Signal, eviction.Threshold{Signal: t.Signal, Quantity: t.Quantity, Percent: t.Percent, Grace: o.softGrace[t.Signal]})
	}
	return out
}

// newEviction builds the eviction manager over the host's signals, the
// runtime's container stats and the desired pods; its decisions go to
// the loop through evictions. With localStorageCapacityIsolation (the
// default) it also enforces emptyDir size limits and ephemeral-storage
// limits, reading logs and volumes beneath podDir.
func newEviction(o *options, conn *cri.Conn, clk clock.PassiveClock, desired *podmanager.Manager, evictions *syncloop.Evictions,
	imageGC *images.GC, podDir func(types.UID) string, own cri.Ownership, log *zap.Logger) (*eviction.Manager, error) {
	stats := eviction.CRIStats{Client: conn, Selector: own.Selector, Owns: own.Owns, Timeout: o.RuntimeRequestTimeout.Duration}
	var storage eviction.StorageReader
	if o.LocalStorageCapacityIsolation == nil || *o.LocalStorageCapacityIsolation {
		storage = eviction.LocalStorage{Stats: stats, PodDir: podDir, Logs: func(p *v1.Pod, container string) (int64, error) {
			d, err := logs.OpenContainerDir(o.PodLogsDir, logs.ContainerRef{Namespace: p.Namespace, Pod: p.Name, UID: string(p.UID), Container: container})
			if err != nil {
				return 0, err
			}
			defer d.Close()
			n, _, err := d.Usage()
			return int64(n), err
		}}
	}
	return eviction.New(eviction.Config{
		Thresholds:               evictionThresholds(o, log),
		PressureTransitionPeriod: o.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriod:        int64(o.EvictionMaxPodGracePeriod),
		Observer:                 eviction.Host{ProcRoot: "/proc", RootDir: o.rootDir, ImageFs: eviction.CRIImageFs(conn, o.RuntimeRequestTimeout.Duration)},
		Stats:                    stats,
		Storage:                  storage,
		Clock:                    clk,
		Logger:                   log,
		ActivePods:               desired.ActivePods,
		Evict:                    evictions.Evict,
		Reclaim:                  imageGC.GarbageCollect,
	})
}
