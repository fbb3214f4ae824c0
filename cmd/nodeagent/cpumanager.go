package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cpumanager"
	"github.com/nodeagent/nodeagent/internal/cri"
)

// newCPUManager builds the CPU manager from the options; the checkpoint
// lives in the root dir and the topology is read from /sys.
func newCPUManager(o *options, conn cpumanager.ResourceUpdater, pods cpumanager.PodSpecs, clk clock.WithTicker, log *zap.Logger) (*cpumanager.Manager, error) {
	var milli int64
	for _, l := range o.reserved { // --kube-reserved, --system-reserved
		if q, ok := l[v1.ResourceCPU]; ok {
			milli += q.MilliValue()
		}
	}
	return cpumanager.New(cpumanager.Config{
		Policy: o.CPUManagerPolicy, Options: o.CPUManagerPolicyOptions,
		SysfsRoot: "/sys", StateDir: o.rootDir,
		ReservedCPUs: o.reservedCPUSet, ReservedMilliCPU: milli,
		Updater: conn, Pods: pods, ReconcilePeriod: o.CPUManagerReconcilePeriod.Duration, CallTimeout: o.RuntimeRequestTimeout.Duration,
		Clock: clk, Logger: log,
	})
}

// cpusetPhase is the run chain's CPU pinning: it puts the container's
// CPUs (exclusive, else the shared pool) in its CRI resources before
// CreateContainer, so it never runs unpinned. An adapter here, as
// cpumanager may not import cri (see cpumanager's doc).
type cpusetPhase struct{ m *cpumanager.Manager }

func (cpusetPhase) Name() string { return "cpu-manager" }

func (p cpusetPhase) MutateConfig(_ context.Context, t cri.Target, cfg *runtimeapi.ContainerConfig) error {
	cpus, ok := p.m.ContainerCPUs(t.Pod.UID, t.Container.Name)
	if !ok {
		return nil
	}
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	if cfg.Linux.Resources == nil {
		cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{}
	}
	cfg.Linux.Resources.CpusetCpus = cpus
	return nil
}

// printCPUs shows, under the static CPU manager policy, each container's
// CPUs from the checkpoint in root: its exclusive ones, else the shared
// pool. Silent when there is no static checkpoint.
func printCPUs(root string, p *v1.Pod) {
	cp, err := cpumanager.ReadCheckpoint(root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cpu manager state: %v\n", err)
		return
	}
	if cp == nil || cp.Policy != cpumanager.PolicyStatic {
		return
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 3, ' ', 0)
	fmt.Fprintln(w, "\nCPUs (static policy):\nCONTAINER\tCPUS")
	for _, c := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		cpus := "shared: " + cp.Shared.String()
		if set, ok := cp.Assignments[string(p.UID)][c.Name]; ok && set.Size() > 0 {
			cpus = "exclusive: " + set.String()
		}
		fmt.Fprintf(w, "%s\t%s\n", c.Name, cpus)
	}
	w.Flush()
}
