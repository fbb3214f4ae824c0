package cri

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Phase is one named step of the run chain, which the runtime calls
// around a container's life: before its sandbox is made
// (SandboxMutator), before its creation (ConfigMutator), right
// after its start (PostStarter), before its stop (PreStopper). A phase
// implements any of these; the runtime detects them by type assertion
// (as Nomad's task runner hooks). The chain is assembled in New: the
// built-in lifecycle hooks, then Config.Phases in order (the CPU
// manager's cpuset, …).
type Phase interface {
	Name() string
}

// Target is the container a phase acts on.
type Target struct {
	Pod       *v1.Pod
	Container *v1.Container
	// ID is the runtime's container ID ("" before creation).
	ID    string
	PodIP string
}

// ConfigMutator adjusts the CRI config of a container about to be
// created; an error fails the creation (CreateContainerConfigError, the
// message naming the phase).
type ConfigMutator interface {
	Phase
	MutateConfig(ctx context.Context, t Target, cfg *runtimeapi.ContainerConfig) error
}

// SandboxMutator adjusts the CRI config of a pod's sandbox each time a
// sync builds it: before RunPodSandbox, and for CreateContainer, which
// carries it too (the pod cgroup's CgroupParent). Called concurrently for
// different pods; an error fails the sync (event FailedCreatePodContainer)
// and the sync is retried.
type SandboxMutator interface {
	Phase
	MutateSandbox(ctx context.Context, p *v1.Pod, cfg *runtimeapi.PodSandboxConfig) error
}

// PostStarter runs right after StartContainer; the next container (for
// an init container, the rest of the pod) waits for it. An error kills
// the container (FailedPostStartHook, waiting reason PostStartHookError);
// output is what the event shows.
type PostStarter interface {
	Phase
	PostStart(ctx context.Context, t Target) (output string, err error)
}

// PreStopper runs before StopContainer within grace seconds (> 0) of the
// container's grace period; what it uses is taken from the stop's.
// Failures are its own to report.
type PreStopper interface {
	Phase
	PreStop(ctx context.Context, t Target, grace int64)
}

// mutateConfig runs every ConfigMutator on cfg.
func (r *Runtime) mutateConfig(ctx context.Context, t Target, cfg *runtimeapi.ContainerConfig) error {
	for _, ph := range r.phases {
		if m, ok := ph.(ConfigMutator); ok {
			if err := m.MutateConfig(ctx, t, cfg); err != nil {
				return fmt.Errorf("%s: %w", ph.Name(), err)
			}
		}
	}
	return nil
}

// mutateSandbox runs every SandboxMutator on cfg.
func (r *Runtime) mutateSandbox(ctx context.Context, p *v1.Pod, cfg *runtimeapi.PodSandboxConfig) error {
	for _, ph := range r.phases {
		if m, ok := ph.(SandboxMutator); ok {
			if err := m.MutateSandbox(ctx, p, cfg); err != nil {
				return fmt.Errorf("%s: %w", ph.Name(), err)
			}
		}
	}
	return nil
}

// postStart runs every PostStarter in order until one fails.
func (r *Runtime) postStart(ctx context.Context, t Target) (phase, output string, err error) {
	for _, ph := range r.phases {
		if ps, ok := ph.(PostStarter); ok {
			if out, err := ps.PostStart(ctx, t); err != nil {
				return ph.Name(), out, err
			}
		}
	}
	return "", "", nil
}

// preStop runs every PreStopper within grace seconds and returns what is
// left of it for the stop (at least the minimum, as the kubelet).
func (r *Runtime) preStop(ctx context.Context, t Target, grace int64) int64 {
	start := r.cfg.Clock.Now()
	used := func() int64 { return int64(r.cfg.Clock.Since(start) / time.Second) }
	for _, ph := range r.phases {
		ps, ok := ph.(PreStopper)
		if !ok {
			continue
		}
		if left := grace - used(); left > 0 {
			ps.PreStop(ctx, t, left)
		}
	}
	return max(grace-used(), minGracePeriod)
}

// lifecycleHooks is the built-in phase running the containers'
// postStart and preStop handlers.
type lifecycleHooks struct{ r *Runtime }

func (lifecycleHooks) Name() string { return "lifecycle-hooks" }

// PostStart runs the postStart handler, bounded by the pod's grace
// period.
func (h lifecycleHooks) PostStart(ctx context.Context, t Target) (string, error) {
	if t.Container.Lifecycle == nil || t.Container.Lifecycle.PostStart == nil {
		return "", nil
	}
	return h.r.runHook(ctx, t.Pod, t.Container, t.ID, t.Container.Lifecycle.PostStart, t.PodIP, hookTimeout(t.Pod))
}

// PreStop runs the preStop handler; a failure is a FailedPreStopHook
// event (not when the stop was interrupted), and the stop goes on.
func (h lifecycleHooks) PreStop(ctx context.Context, t Target, grace int64) {
	c := t.Container
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return
	}
	timeout := time.Duration(max(grace, minGracePeriod)) * time.Second
	msg, err := h.r.runHook(ctx, t.Pod, c, t.ID, c.Lifecycle.PreStop, t.PodIP, timeout)
	if err == nil || ctx.Err() != nil {
		return
	}
	if msg == "" {
		msg = err.Error()
	}
	h.r.log.Warn("preStop hook failed", zap.String("pod", t.Pod.Namespace+"/"+t.Pod.Name), zap.String("container", c.Name), zap.Error(err))
	h.r.event(t.Pod, v1.EventTypeWarning, EventFailedPreStopHook, "PreStopHook failed: %s", msg)
}
