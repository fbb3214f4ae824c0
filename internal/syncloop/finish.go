package syncloop

import (
	"context"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// The kubelet's reason and message for a pod that outlived its
// activeDeadlineSeconds (pkg/kubelet/active_deadline.go).
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// finishing is why a pod is over: empty when it ran to its end (or its
// source shows it terminal), else the agent's reason for ending it.
type finishing struct {
	reason, message string
}

func isTerminal(ph v1.PodPhase) bool { return ph == v1.PodSucceeded || ph == v1.PodFailed }

// finish makes the pod finished: it is never run again. The first reason
// stands.
func (w *worker) finish(reason, message string) {
	w.apply(event{kind: evFinish, reason: reason, message: message})
}

// finished is the step of a finished pod, as the kubelet ends a terminal
// pod (syncTerminatingPod, then syncTerminatedPod, its containers kept
// for logs until the pod is deleted): its probes end, whatever still runs
// is stopped with the pod's grace period (preStop hooks, sidecars last,
// then the sandboxes, which frees the IP), and, from a view taken after
// that, its volumes are released (ReleasePod: tmpfs unmounted) and its
// final status is published. The pod then waits for its source to drop
// it; nothing is synced.
func (w *worker) finished(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, f finishing) bool {
	l := w.loop
	if l.cfg.Prober != nil {
		l.cfg.Prober.RemovePod(w.uid)
	}
	if st.Running() {
		if err := l.rt.StopPod(ctx, p, st, -1); err != nil {
			if ctx.Err() == nil {
				w.log.Error("stop finished pod failed; retrying", zap.Error(err))
				l.queue.Enqueue(w.uid, l.cfg.ErrorRetry)
			}
			return false // else a removal or shutdown came: the next step acts on it
		}
		w.poke() // the final status from a view after the stop
		return false
	}
	if !w.released {
		if err := l.rt.ReleasePod(ctx, p, st); err != nil {
			if ctx.Err() == nil {
				w.log.Warn("release finished pod's volumes failed; retrying", zap.Error(err))
				l.queue.Enqueue(w.uid, l.cfg.ErrorRetry)
			}
			return false
		}
		w.released = true
	}
	if l.status != nil {
		l.status.Finished(p, st, f.reason, f.message)
	}
	l.queue.Forget(w.uid)
	if !w.finLogged {
		w.finLogged = true
		w.log.Info("pod finished; its containers are kept until it is removed", zap.String("reason", f.reason))
	}
	return false
}

// activeDeadline is how long p may still be active on the node under its
// activeDeadlineSeconds (0: no deadline), and whether that has passed,
// counted from its start here: the worker's start, or the API's
// startTime or its oldest sandbox's creation when older (an agent
// restart).
func (w *worker) activeDeadline(p *v1.Pod, st *pod.RuntimeStatus) (left time.Duration, exceeded bool) {
	ads := p.Spec.ActiveDeadlineSeconds
	if ads == nil {
		return 0, false
	}
	start := w.created
	if t := p.Status.StartTime; t != nil && t.Time.Before(start) {
		start = t.Time // the API's, kept across agent restarts
	}
	if st != nil && len(st.Sandboxes) > 0 {
		if first := st.Sandboxes[len(st.Sandboxes)-1].CreatedAt; !first.IsZero() && first.Before(start) {
			start = first
		}
	}
	left = time.Duration(*ads)*time.Second - w.loop.clock.Since(start)
	if left <= 0 {
		return 0, true
	}
	return left, false
}
