package main

import (
	"context"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/eviction"
	"github.com/nodeagent/nodeagent/internal/images"
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
// runtime's container stats and the loop.
func newEviction(o *options, conn *cri.Conn, clk clock.PassiveClock, loop *syncloop.Loop, imageGC *images.GC, nodeName string, log *zap.Logger) (*eviction.Manager, error) {
	return eviction.New(eviction.Config{
		Thresholds:               evictionThresholds(o, log),
		PressureTransitionPeriod: o.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriod:        int64(o.EvictionMaxPodGracePeriod),
		Observer: eviction.Host{ProcRoot: "/proc", RootDir: o.rootDir, ImageFs: func(ctx context.Context) (string, error) {
			cctx, cancel := context.WithTimeout(ctx, o.RuntimeRequestTimeout.Duration)
			defer cancel()
			info, err := conn.ImageFsInfo(cctx, &runtimeapi.ImageFsInfoRequest{})
			if err != nil || len(info.ImageFilesystems) == 0 {
				return "", err
			}
			return info.ImageFilesystems[0].GetFsId().GetMountpoint(), nil
		}},
		Stats:      criStats{conn: conn, node: nodeName, timeout: o.RuntimeRequestTimeout.Duration},
		Clock:      clk,
		Logger:     log,
		ActivePods: loop.ActivePods,
		Evict:      loop.Evict,
		Reclaim:    imageGC.GarbageCollect,
	})
}

// criStats reads this agent's containers' usage from CRI
// ListContainerStats: memory working set and writable layer.
type criStats struct {
	conn    *cri.Conn
	node    string
	timeout time.Duration
}

func (s criStats) PodUsage(ctx context.Context) (map[types.UID]eviction.Usage, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.conn.ListContainerStats(cctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{
		LabelSelector: map[string]string{cri.LabelManaged: "true", cri.LabelNode: s.node}}})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]eviction.Usage{}
	for _, st := range resp.Stats {
		labels := st.GetAttributes().GetLabels()
		uid := types.UID(labels[cri.LabelPodUID])
		var cu eviction.Usage
		cu.Memory = int64(st.GetMemory().GetWorkingSetBytes().GetValue())
		cu.Disk = int64(st.GetWritableLayer().GetUsedBytes().GetValue())
		u := out[uid]
		u.Memory += cu.Memory
		u.Disk += cu.Disk
		if u.Containers == nil {
			u.Containers = map[string]eviction.Usage{}
		}
		name := labels[cri.LabelContainerName]
		prev := u.Containers[name]
		u.Containers[name] = eviction.Usage{Memory: prev.Memory + cu.Memory, Disk: prev.Disk + cu.Disk}
		out[uid] = u
	}
	return out, nil
}
