package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/probe"
)

// maxOutput is how much of a failed probe's output its event keeps.
const maxOutput = 1024

// worker probes one probe kind of one container of one pod.
type worker struct {
	m         *Manager
	uid       pod.UID
	container string
	init      bool
	kind      pod.ProbeKind
	stop      chan struct{}
	// trigger asks for a readiness probe now: a new instance is running
	// (the kubelet's manual trigger), rather than a period later.
	trigger chan struct{}
	// ctx ends with the worker, cancelling a probe in flight.
	ctx    context.Context
	cancel context.CancelFunc

	// Guarded by Manager.mu.
	target  target
	stopped bool

	// The probe goroutine's own state.
	lastID        string
	successes     int
	failures      int
	onHold        bool // liveness/startup failed: wait for a new instance
	startupPassed bool // startup: succeeded for lastID, probing is over
}

func newWorker(m *Manager, uid pod.UID, container string, init bool, kind pod.ProbeKind) *worker {
	ctx, cancel := context.WithCancel(context.Background())
	return &worker{m: m, uid: uid, container: container, init: init, kind: kind, stop: make(chan struct{}), trigger: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// stopLocked ends the worker; Manager.mu is held.
func (w *worker) stopLocked() {
	if !w.stopped {
		w.stopped = true
		close(w.stop)
		w.cancel()
	}
}

// run probes every period until stopped. Right after the agent started,
// the first run waits a random part of the period, so that adopted pods'
// probes do not all fire at once.
func (w *worker) run() {
	period := time.Second
	if _, c, _, ok := w.m.view(w); ok {
		period = periodOf(probeOf(c, w.kind))
	}
	clk := w.m.cfg.Clock
	if clk.Since(w.m.start) < period {
		select {
		case <-w.stop:
			return
		case <-clk.After(w.m.cfg.Jitter(period)):
		}
	}
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		w.step(w.ctx)
		select {
		case <-w.stop:
			w.m.forget(w.uid, w.lastID, w.kind)
			return
		case <-t.C():
		case <-w.trigger:
		}
	}
}

func periodOf(p *v1.Probe) time.Duration {
	if p == nil || p.PeriodSeconds <= 0 {
		return 10 * time.Second
	}
	return time.Duration(p.PeriodSeconds) * time.Second
}

// step is one probe run: it probes the container's current instance
// when the probe is due (running, past the initial delay, startup done)
// and records a verdict once a threshold is reached. It returns whether it
// probed.
func (w *worker) step(ctx context.Context) bool {
	p, c, t, ok := w.m.view(w)
	if !ok {
		return false
	}
	if t.id != w.lastID {
		if w.lastID != "" {
			w.m.forget(w.uid, w.lastID, w.kind)
		}
		w.lastID, w.successes, w.failures, w.onHold, w.startupPassed = t.id, 0, 0, false, false
	}
	if t.id == "" || w.onHold || w.startupPassed {
		return false
	}
	if w.kind != pod.Startup && c.StartupProbe != nil && w.m.ProbeResult(w.uid, t.id, pod.Startup) != pod.ProbeSuccess {
		return false // the others wait for the startup probe
	}
	spec := probeOf(c, w.kind)
	if spec == nil {
		return false // removed from the spec: Sync stops this worker
	}
	if w.m.cfg.Clock.Since(t.startedAt) < time.Duration(spec.InitialDelaySeconds)*time.Second {
		return false
	}
	res, output, err := w.m.runProbe(ctx, p, c, spec, t)
	if ctx.Err() != nil {
		return false // stopped meanwhile: no verdict, no event
	}
	log := w.m.log.With(zap.String("pod", pod.FullName(p)), zap.String("container", c.Name), zap.String("probe", w.kind.String()))
	if err != nil {
		// Could not be run (the container is going away, the runtime is
		// busy): not counted.
		log.Debug("probe errored", zap.Error(err))
		w.m.event(p, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe errored: %v", w.kind, err))
		return true
	}
	if res == pod.ProbeSuccess {
		w.successes++
		w.failures = 0
	} else {
		w.failures++
		w.successes = 0
		log.Info("probe failed", zap.String("output", output))
		w.m.event(p, v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", w.kind, output))
	}
	switch {
	case res == pod.ProbeSuccess && w.successes >= threshold(spec.SuccessThreshold, 1):
		w.m.set(pod.ProbeUpdate{UID: w.uid, Container: c.Name, ContainerID: t.id, Kind: w.kind, Result: pod.ProbeSuccess})
		w.startupPassed = w.kind == pod.Startup
	case res == pod.ProbeFailure && w.failures >= threshold(spec.FailureThreshold, 3):
		w.m.set(pod.ProbeUpdate{UID: w.uid, Container: c.Name, ContainerID: t.id, Kind: w.kind, Result: pod.ProbeFailure})
		// The container will be killed: nothing to probe until the next
		// instance (the kubelet's onHold).
		w.onHold = w.kind != pod.Readiness
	}
	return true
}

func threshold(v, def int32) int {
	if v <= 0 {
		return int(def)
	}
	return int(v)
}

func (m *Manager) event(p *v1.Pod, eventType, reason, msg string) {
	if m.cfg.Recorder != nil {
		m.cfg.Recorder.Event(p, eventType, reason, msg)
	}
}

// execGrace is how much longer than an exec probe's timeout its CRI call
// may take: the runtime enforces the timeout and answers.
var execGrace = 5 * time.Second

// runtimeAnswers asks the runtime for its version, within execGrace.
func (m *Manager) runtimeAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, execGrace)
	defer cancel()
	_, err := m.cfg.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
	return err == nil
}

// runProbe runs one check. err means the check could not be run.
func (m *Manager) runProbe(ctx context.Context, p *v1.Pod, c *v1.Container, spec *v1.Probe, t target) (pod.ProbeResult, string, error) {
	timeout := time.Duration(max(spec.TimeoutSeconds, 1)) * time.Second
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host := t.podIP
	if p.Spec.HostNetwork {
		host = m.cfg.NodeIP
	}
	if host == "" && spec.Exec == nil {
		return pod.ProbeUnknown, "", errors.New("the pod has no IP yet")
	}
	fail := func(err error) (pod.ProbeResult, string, error) { return pod.ProbeFailure, trim(err.Error()), nil }
	switch {
	case spec.Exec != nil:
		// The runtime enforces the timeout; the call gets a little more.
		cctx, ccancel := context.WithTimeout(parent, timeout+execGrace)
		defer ccancel()
		resp, err := m.cfg.Runtime.ExecSync(cctx, &runtimeapi.ExecSyncRequest{ContainerId: t.id, Cmd: spec.Exec.Command, Timeout: int64(timeout / time.Second)})
		if err != nil {
			if cctx.Err() != nil && parent.Err() == nil && !m.runtimeAnswers(parent) {
				// The runtime did not answer within the command's time
				// and more, nor a Version since: the runtime is stuck, not
				// the container, which is no reason to restart it (the
				// kubelet counts it a failure). No verdict. A runtime that
				// answers was held up by the command (a process it waits
				// for): the command timed out.
				return pod.ProbeUnknown, "", fmt.Errorf("the runtime did not answer within %v: %w", timeout+execGrace, err)
			}
			if timedOut(err) {
				return pod.ProbeFailure, fmt.Sprintf("command %q timed out", strings.Join(spec.Exec.Command, " ")), nil
			}
			return pod.ProbeUnknown, "", err
		}
		out := trim(string(resp.Stdout) + string(resp.Stderr))
		if resp.ExitCode != 0 {
			if out == "" {
				out = fmt.Sprintf("command %q exited with %d", strings.Join(spec.Exec.Command, " "), resp.ExitCode)
			}
			return pod.ProbeFailure, out, nil
		}
		return pod.ProbeSuccess, out, nil
	case spec.HTTPGet != nil:
		port, err := probe.ResolvePort(spec.HTTPGet.Port, c)
		if err != nil {
			return pod.ProbeUnknown, "", err
		}
		body, err := probe.HTTPGet(ctx, spec.HTTPGet, host, port, "kube-probe/1.37")
		if err != nil {
			return fail(err)
		}
		return pod.ProbeSuccess, trim(body), nil
	case spec.TCPSocket != nil:
		port, err := probe.ResolvePort(spec.TCPSocket.Port, c)
		if err != nil {
			return pod.ProbeUnknown, "", err
		}
		if spec.TCPSocket.Host != "" {
			host = spec.TCPSocket.Host
		}
		if err := probe.TCP(ctx, host, port); err != nil {
			return fail(err)
		}
		return pod.ProbeSuccess, "", nil
	case spec.GRPC != nil:
		service := ""
		if spec.GRPC.Service != nil {
			service = *spec.GRPC.Service
		}
		if err := probe.GRPC(ctx, host, int(spec.GRPC.Port), service); err != nil {
			return fail(err)
		}
		return pod.ProbeSuccess, "", nil
	}
	return pod.ProbeUnknown, "", errors.New("probe has no action")
}

func trim(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxOutput {
		s = s[:maxOutput] + "…"
	}
	return s
}

// timedOut recognises an exec that ran out of time: the runtime reports
// it as a deadline (containerd: "timeout 1s exceeded: context deadline
// exceeded").
func timedOut(err error) bool {
	return status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(status.Convert(err).Message(), "deadline exceeded")
}
