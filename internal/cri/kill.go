package cri

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// stopPod stops the pod's running containers, each with the grace
// period (its preStop first): the app, plain init and ephemeral
// containers at once, then the sidecars one by one, last first, with
// what is left of the grace period (the kubelet's termination order);
// then every sandbox (which tears down its network). p may be nil (an
// orphan: no order, no hooks); it is only used for events and hooks.
func (r *Runtime) stopPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, grace int64, log *zap.Logger) error {
	podIP := ""
	if sb := st.LatestSandbox(); sb != nil {
		podIP = sb.IP
	}
	start := r.cfg.Clock.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		sidecars = map[string]*pod.Container{}
	)
	for _, c := range st.Containers {
		if c.State != pod.ContainerRunning && c.State != pod.ContainerCreated {
			continue
		}
		if spec := containerSpec(p, c.Name, c.Init); c.Init && spec != nil && pod.IsSidecar(spec) && sidecars[c.Name] == nil {
			sidecars[c.Name] = c
			continue
		}
		wg.Add(1)
		go func(c *pod.Container) {
			defer wg.Done()
			if err := r.killContainer(ctx, p, c, grace, podIP, "Stopping container "+c.Name, log); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(sidecars) > 0 { // only where p is known
		for i := len(p.Spec.InitContainers) - 1; i >= 0; i-- {
			c := sidecars[p.Spec.InitContainers[i].Name]
			if c == nil {
				continue
			}
			left := grace - int64(r.cfg.Clock.Since(start)/time.Second)
			if grace > 0 {
				left = max(left, minGracePeriod)
			}
			if err := r.killContainer(ctx, p, c, max(left, 0), podIP, "Stopping container "+c.Name, log); err != nil {
				return err
			}
		}
	}
	// Every sandbox, ready or not, as the kubelet: stopping releases its
	// network (IP, ports) and is idempotent.
	for _, sb := range st.Sandboxes {
		if err := r.stopSandbox(ctx, sb.ID); err != nil {
			return err
		}
	}
	return nil
}

// killContainer stops one container with a Killing event carrying
// message, running the pre-stop phases (its preStop hook) first within
// the grace period (not for a forced stop, grace 0, as the kubelet).
func (r *Runtime) killContainer(ctx context.Context, p *v1.Pod, c *pod.Container, grace int64, podIP, message string, log *zap.Logger) error {
	log.Info("killing container", zap.String("container", c.Name), zap.String("containerID", c.ID), zap.Int64("gracePeriod", grace), zap.String("why", message))
	r.event(p, v1.EventTypeNormal, "Killing", "%s", message)
	left := grace
	if spec := containerSpec(p, c.Name, c.Init); grace > 0 && c.State == pod.ContainerRunning && spec != nil {
		left = r.preStop(ctx, Target{Pod: p, Container: spec, ID: c.ID, PodIP: podIP}, grace)
	}
	return r.stopContainer(ctx, c.ID, left)
}

func (r *Runtime) stopSandbox(ctx context.Context, id string) error {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	_, err := r.c.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	return notFoundOK(err, "stop pod sandbox", id)
}

// notFoundOK translates a CRI error, treating NotFound as done: stopping
// or removing what is already gone succeeds.
func notFoundOK(err error, what, id string) error {
	if err := translate(err); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%s %s: %w", what, id, err)
	}
	return nil
}

// minGracePeriod is the shortest grace a container gets (the kubelet's
// minimumGracePeriodInSeconds).
const minGracePeriod = 2

func (r *Runtime) stopContainer(ctx context.Context, id string, grace int64) error {
	grace = max(grace, minGracePeriod)
	// The call may take the whole grace period, plus the runtime's own time.
	cctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second+r.cfg.CallTimeout)
	defer cancel()
	_, err := r.c.StopContainer(cctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace})
	return notFoundOK(err, "stop container", id)
}

// KillPod ends a pod for good: containers stopped with the grace period
// (gracePeriod < 0: the pod's own, or the one recorded on its containers
// when p is nil), sandboxes stopped and removed, and its log and pod
// directories deleted. Idempotent; NotFound is success.
func (r *Runtime) KillPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, gracePeriodOverride int64) error {
	log := r.log.With(zap.String("pod", st.Namespace+"/"+st.Name), zap.String("uid", string(st.UID)))
	if err := r.stopPod(ctx, p, st, r.killGrace(p, st, gracePeriodOverride), log); err != nil {
		return err
	}
	removed := map[string]bool{}
	for _, sb := range st.Sandboxes {
		if err := r.removeSandbox(ctx, sb.ID); err != nil {
			return err
		}
		removed[sb.ID] = true
	}
	for _, c := range st.Containers {
		if removed[c.SandboxID] {
			continue // RemovePodSandbox removed it
		}
		if err := r.RemoveContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	if st.Name != "" && st.Namespace != "" {
		if err := os.RemoveAll(r.podLogDir(st.Namespace, st.Name, st.UID)); err != nil {
			return fmt.Errorf("remove pod log directory: %w", err)
		}
	}
	// Volumes first (CSI volumes unpublished by their driver), then the
	// directory.
	if err := r.cfg.Volumes.Release(st.UID); err != nil {
		return err
	}
	if err := volume.RemoveAll(r.cfg.Volumes.Dir(st.UID)); err != nil {
		return fmt.Errorf("remove pod directory: %w", err)
	}
	log.Info("pod killed and removed", zap.Int("sandboxes", len(st.Sandboxes)), zap.Int("containers", len(st.Containers)))
	return nil
}

// StopPod stops a pod's containers and sandboxes as KillPod does, and
// removes nothing: their exit codes stay readable for a final status.
func (r *Runtime) StopPod(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, gracePeriodOverride int64) error {
	log := r.log.With(zap.String("pod", st.Namespace+"/"+st.Name), zap.String("uid", string(st.UID)))
	return r.stopPod(ctx, p, st, r.killGrace(p, st, gracePeriodOverride), log)
}

// ReleasePod tears down what a finished, stopped pod no longer needs but
// for its containers and logs (kept until the pod is removed): its
// volumes, unmounted (tmpfs, subPath binds) and removed.
func (r *Runtime) ReleasePod(_ context.Context, _ *v1.Pod, st *pod.RuntimeStatus) error {
	return r.cfg.Volumes.Release(st.UID)
}

// killGrace is the grace period of a kill: the override, else the pod's
// own, else the one recorded on its containers.
func (r *Runtime) killGrace(p *v1.Pod, st *pod.RuntimeStatus, override int64) int64 {
	if override >= 0 {
		return override
	}
	var first *pod.Container
	if len(st.Containers) > 0 {
		first = st.Containers[0]
	}
	return gracePeriod(p, first)
}

func (r *Runtime) removeSandbox(ctx context.Context, id string) error {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	_, err := r.c.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
	return notFoundOK(err, "remove pod sandbox", id)
}

// RemoveContainer removes one container; NotFound is success.
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	_, err := r.c.RemoveContainer(cctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	return notFoundOK(err, "remove container", id)
}
