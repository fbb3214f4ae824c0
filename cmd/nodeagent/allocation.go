package main

import (
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/admit"
	"github.com/nodeagent/nodeagent/internal/allocation"
	"github.com/nodeagent/nodeagent/internal/cpumanager"
)

// newAllocations builds the allocation manager (in-place resize): its
// checkpoint in the root dir; a resize fits when admission's resource
// check (over allocatable, the other pods counted by their allocation)
// admits the pod with its new resources beside the loop's active pods.
func newAllocations(o *options, allocatable v1.ResourceList, rec allocation.Recorder, active func() []*v1.Pod, clk clock.PassiveClock, log *zap.Logger) (*allocation.Manager, error) {
	fit := admit.Resources(allocatable, nil)
	return allocation.New(allocation.Config{
		StateDir: o.rootDir, Allocatable: allocatable,
		Admit: func(p *v1.Pod, others []*v1.Pod) (bool, string) {
			r := fit.Admit(&admit.Attributes{Pod: p, OtherPods: others})
			return r.Admit, r.Message
		},
		ActivePods:       active,
		StaticCPUManager: o.CPUManagerPolicy == cpumanager.PolicyStatic,
		Recorder:         rec, Clock: clk, Logger: log,
	})
}
