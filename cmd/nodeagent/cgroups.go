package main

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cm"
	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/node"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// cgroupMountRoot is where the host's cgroup file systems are.
const cgroupMountRoot = "/sys/fs/cgroup"

// newPodCgroups builds the run-chain phases of the node's resources: the
// containers' QoS oom_score_adj always (as the kubelet), and with
// --cgroups-per-qos the pod cgroups (the sandbox's cgroup parent) with
// the housekeeping that removes those of gone pods. The cgroup driver is
// the runtime's when it reports one (CRI RuntimeConfig), else the flag's.
func newPodCgroups(ctx context.Context, o *options, conn runtimeapi.RuntimeServiceClient, log *zap.Logger) (func(map[pod.UID]bool), []cri.Phase, error) {
	capacity := node.Capacity(o.rootDir, int(o.MaxPods))
	phases := []cri.Phase{oomScorePhase{memoryCapacity: capacity.Memory().Value()}}
	if !*o.CgroupsPerQOS {
		log.Info("no pod cgroups and node allocatable not enforced (--cgroups-per-qos=false)")
		return func(map[pod.UID]bool) {}, phases, nil
	}
	driver := o.CgroupDriver
	d, err := cm.RuntimeDriver(ctx, conn, o.RuntimeRequestTimeout.Duration)
	if err != nil {
		log.Warn("runtime's cgroup driver unknown; using --cgroup-driver", zap.Error(err))
	}
	if d != "" {
		if d != driver {
			log.Info("cgroup driver taken from the runtime, not --cgroup-driver", zap.String("runtime", d), zap.String("flag", driver))
		}
		driver = d
	}
	limits := capacity
	if slices.Contains(o.EnforceNodeAllocatable, "pods") {
		// The kubelet's getNodeAllocatableAbsolute: reservations only,
		// eviction thresholds stay inside kubepods.
		limits = node.Allocatable(capacity, o.reserved, nil)
	}
	m, err := cm.New(cm.Config{MountRoot: cgroupMountRoot, Root: o.CgroupRoot, Driver: driver, Node: limits, PodPIDs: *o.PodPidsLimit, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("pod cgroups: %w", err)
	}
	if err := m.Start(); err != nil {
		return nil, nil, fmt.Errorf("pod cgroups under %s with the %s driver (check --cgroup-root and --cgroup-driver, or run with --cgroups-per-qos=false): %w", o.CgroupRoot, driver, err)
	}
	return m.Cleanup, append(phases, podCgroupPhase{m}), nil
}

// podCgroupPhase makes the pod cgroup before the sandbox and gives its
// path as the sandbox's cgroup parent. An adapter here, as cm may not
// import cri.
type podCgroupPhase struct{ m *cm.Manager }

func (podCgroupPhase) Name() string { return "pod-cgroups" }

func (p podCgroupPhase) MutateSandbox(_ context.Context, pd *v1.Pod, cfg *runtimeapi.PodSandboxConfig) error {
	parent, err := p.m.EnsurePod(pd)
	if err != nil {
		return err
	}
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{}
	}
	cfg.Linux.CgroupParent = parent
	return nil
}

// oomScorePhase puts the container's QoS oom_score_adj in its CRI
// resources.
type oomScorePhase struct{ memoryCapacity int64 }

func (oomScorePhase) Name() string { return "oom-score" }

func (p oomScorePhase) MutateConfig(_ context.Context, t cri.Target, cfg *runtimeapi.ContainerConfig) error {
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	if cfg.Linux.Resources == nil {
		cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{}
	}
	cfg.Linux.Resources.OomScoreAdj = cm.OOMScoreAdj(t.Pod, t.Container, p.memoryCapacity)
	return nil
}
