package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podvolumes"
)

// configHashAnnotation is the static-pod content hash (podsource); a
// sandbox made for another hash is replaced.
const configHashAnnotation = "kubernetes.io/config.hash"

// retryAfterError is when a pod whose container could not be created is
// tried again (the kubelet's pod worker backoff).
const retryAfterError = 10 * time.Second

// SyncPod makes one step toward the pod's spec on the runtime, given what
// the runtime has (st, from the PLEG status cache): it never blocks on a backoff; it
// reports it in the result's Waiting and RetryAfter instead.
//
// It works on the pod as allocated (Allocations.Resize, which decides a
// resize of the spec first): containers start with their allocated
// resources, and running ones are resized to them (see resize).
func (r *Runtime) SyncPod(ctx context.Context, desired *v1.Pod, st *pod.RuntimeStatus) (res pod.SyncResult) {
	log := r.log.With(zap.String("pod", pod.FullName(desired)), zap.String("uid", string(desired.UID)))
	defer r.collectGarbage(ctx, st, log)
	p := r.alloc.Resize(desired)
	specHash := p.Annotations[configHashAnnotation]
	st = r.withActuated(p, st, log)
	a := computeActions(p, specHash, st, r.cfg.Probes)
	if a.killPod {
		log.Info("stopping pod to replace its sandbox or end it")
		if a.createSandbox {
			r.event(p, v1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		}
		if err := r.stopPod(ctx, p, st, gracePeriod(p, nil), log); err != nil {
			res.Err = err
			res.Retry(retryAfterError)
			return res
		}
	}
	if a.initFailed || (!a.createSandbox && a.sandboxID == "") {
		r.alloc.ResizeProgress(p, false, nil) // nothing runs
		return res
	}
	sbCfg := r.sandboxConfig(p, specHash, a.attempt)
	// The pod cgroup as its running containers are (a resize changes it
	// below, in order); as allocated for a new sandbox.
	cgPod := p
	if !a.createSandbox {
		cgPod = appliedPod(p, st, a.sandboxID)
	}
	if err := r.mutateSandbox(ctx, cgPod, sbCfg); err != nil {
		// As the kubelet when it cannot ensure the pod cgroup.
		r.event(p, v1.EventTypeWarning, "FailedCreatePodContainer", "unable to ensure pod container exists: %v", err)
		res.Err = err
		res.Retry(retryAfterError)
		return res
	}
	sandboxID, podIPs := a.sandboxID, []string(nil)
	if sb := st.LatestSandbox(); sb != nil && sb.ID == sandboxID {
		podIPs = sandboxPodIPs(sb)
	}
	if a.createSandbox && !p.Spec.HostNetwork && r.cfg.NetworkHealth != nil {
		if err := r.cfg.NetworkHealth(); err != nil {
			err = fmt.Errorf("network is not ready: %w", err)
			r.event(p, v1.EventTypeWarning, "NetworkNotReady", "%v", err)
			res.Err = err
			res.SandboxError = err.Error()
			res.Retry(retryAfterError)
			return res
		}
	}
	if a.createSandbox && r.cfg.DNS != nil {
		// As the kubelet: the DNS config is formed (and its warnings
		// told) when the sandbox is made.
		dnsCfg, warns, err := r.cfg.DNS.PodDNS(p)
		if err != nil {
			err = fmt.Errorf("form the pod's DNS config: %w", err)
			r.event(p, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			res.Err = err
			res.SandboxError = err.Error()
			res.Retry(retryAfterError)
			return res
		}
		for _, w := range warns {
			log.Warn("pod DNS config", zap.String("reason", w.Reason), zap.String("message", w.Message))
			r.event(p, v1.EventTypeWarning, w.Reason, "%s", w.Message)
		}
		sbCfg.DnsConfig = dnsCfg
	}
	if a.createSandbox {
		id, err := r.runSandbox(ctx, p, sbCfg)
		if err != nil {
			log.Error("create pod sandbox failed", zap.Error(err))
			r.event(p, v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: %v", err)
			res.Err = err
			res.SandboxError = err.Error()
			res.Retry(retryAfterError)
			return res
		}
		sandboxID = id
		podIPs = r.readSandboxIPs(ctx, id)
		log.Info("sandbox ready", zap.String("sandboxID", id), zap.Uint32("attempt", a.attempt), zap.String("podIP", primaryIP(podIPs)))
	}
	podIP := primaryIP(podIPs)
	log = log.With(zap.String("sandboxID", sandboxID))
	// Running containers see ConfigMap, Secret, label and token updates:
	// their rendered volumes are written again (a no-op when unchanged).
	r.cfg.Volumes.Refresh(ctx, p, st, sandboxID, podIP, log)
	for _, k := range a.kill {
		if err := r.killContainer(ctx, p, k.c, k.grace, podIP, k.message, log); err != nil {
			res.Err = err
			res.Retry(retryAfterError)
			return res
		}
	}
	// In-place resize, before any start: a container restarted for its
	// resize policy starts in the resized pod cgroup (the kubelet's
	// SyncPod step 7).
	if err := r.resize(ctx, p, st, a, sbCfg, log); err != nil {
		log.Warn("resize pod in place failed; retried at the next sync", zap.Error(err))
		r.alloc.ResizeProgress(p, true, err)
		if res.Err == nil {
			res.Err = err
		}
		res.Retry(retryAfterError)
	} else {
		r.alloc.ResizeProgress(p, false, nil)
	}
	// Ephemeral containers first, as the kubelet: an init container that
	// cannot start does not keep a debugging container out.
	for _, i := range a.startEphemeral {
		r.startOne(ctx, p, ephemeralSpec(&p.Spec.EphemeralContainers[i]), sandboxID, sbCfg, st, podIPs, log, &res)
	}
	for _, i := range a.startInit {
		r.startOne(ctx, p, initSpec(&p.Spec.InitContainers[i]), sandboxID, sbCfg, st, podIPs, log, &res)
	}
	for _, i := range a.start {
		r.startOne(ctx, p, appSpec(&p.Spec.Containers[i]), sandboxID, sbCfg, st, podIPs, log, &res)
	}
	if a.stopSandbox {
		log.Info("pod completed; stopping its sandbox")
		if err := r.stopSandbox(ctx, sandboxID); err != nil {
			res.Err = err
			res.Retry(retryAfterError)
		}
	}
	return res
}

// startOne starts one container unless its CrashLoopBackOff is running,
// recording the outcome in res. The first restart of a crashed container
// happens at once; later ones wait 10s, 20s, 40s … (the kubelet's
// doBackOff): the delay counts from the last instance's exit. An
// ephemeral container has no earlier instance (it is never restarted).
func (r *Runtime) startOne(ctx context.Context, p *v1.Pod, s startSpec, sandboxID string, sbCfg *runtimeapi.PodSandboxConfig, st *pod.RuntimeStatus, podIPs []string, log *zap.Logger, res *pod.SyncResult) {
	c := s.c
	log = log.With(zap.String("container", c.Name))
	if s.ephemeral != nil {
		log = log.With(zap.Bool("ephemeral", true))
	}
	key := string(p.UID) + "/" + c.Name + "/" + HashContainer(c)
	if prev := st.Latest(c.Name, s.init); prev != nil && prev.State == pod.ContainerExited && s.ephemeral == nil {
		if left := r.cfg.CrashLoop.Remaining(key, prev.FinishedAt); left > 0 {
			r.event(p, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s in pod %s", c.Name, pod.FullName(p))
			res.SetWaiting(c.Name, ReasonCrashLoopBackOff,
				fmt.Sprintf("back-off %s restarting failed container=%s pod=%s(%s)", r.cfg.CrashLoop.Delay(key), c.Name, p.Name, p.UID), left)
			return
		}
		r.cfg.CrashLoop.Next(key)
	}
	err := r.startContainer(ctx, p, s, sandboxID, sbCfg, st, podIPs, log)
	if err == nil {
		return
	}
	if res.Err == nil {
		res.Err = err
	}
	if ie, ok := asImageError(err); ok {
		res.SetWaiting(c.Name, ie.reason, ie.msg, ie.retry)
		return
	}
	var me *podvolumes.MountError
	if errors.As(err, &me) {
		// As the kubelet waiting for its volume manager: the pod stays
		// ContainerCreating, with a FailedMount event.
		log.Warn("volume not ready; the container waits", zap.Error(me))
		r.event(p, v1.EventTypeWarning, "FailedMount", "%v", me)
		res.SetWaiting(c.Name, "ContainerCreating", "", retryAfterError)
		return
	}
	var se *startError
	if errors.As(err, &se) {
		log.Error("start container failed", zap.String("reason", se.reason), zap.Error(err))
		r.event(p, v1.EventTypeWarning, "Failed", "Error: %v", err)
		res.SetWaiting(c.Name, se.reason, err.Error(), retryAfterError)
		return
	}
	res.SetWaiting(c.Name, ReasonCreateContainerError, err.Error(), retryAfterError)
}

// readSandboxIPs reads a sandbox's IPs, primary first; none when it cannot.
func (r *Runtime) readSandboxIPs(ctx context.Context, id string) []string {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	resp, err := r.c.PodSandboxStatus(cctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return nil
	}
	return sandboxIPs(resp.Status)
}

// gracePeriod is the pod's termination grace period in seconds; for a
// container of a pod the agent no longer has, the one recorded on it.
func gracePeriod(p *v1.Pod, c *pod.Container) int64 {
	if p != nil && p.Spec.TerminationGracePeriodSeconds != nil {
		return *p.Spec.TerminationGracePeriodSeconds
	}
	if c != nil && c.GracePeriod > 0 {
		return c.GracePeriod
	}
	return v1.DefaultTerminationGracePeriodSeconds
}
