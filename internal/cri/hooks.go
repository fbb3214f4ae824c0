package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/probe"
)

// Reasons of failed lifecycle hooks, as the kubelet reports them.
const (
	ReasonPostStartHookError = "PostStartHookError"
	EventFailedPostStartHook = "FailedPostStartHook"
	EventFailedPreStopHook   = "FailedPreStopHook"
	maxHookOutput            = 1024 // bytes of a hook's output kept in its event
	hookHTTPUserAgent        = "kube-lifecycle/1.37"
)

// runHook runs a lifecycle handler of container c (runtime ID id) of pod
// p, as the kubelet's handler runner: exec through CRI ExecSync, an HTTP
// GET against the pod (or the handler's host), or a sleep. It returns the
// handler's output (exec) or the error's message in the kubelet's words,
// and fails after timeout.
func (r *Runtime) runHook(ctx context.Context, p *v1.Pod, c *v1.Container, id string, h *v1.LifecycleHandler, podIP string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case h.Exec != nil:
		secs := int64(timeout / time.Second)
		resp, err := r.c.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: h.Exec.Command, Timeout: max(secs, 1)})
		if err != nil {
			return "", fmt.Errorf("exec %v: %w", h.Exec.Command, translate(err))
		}
		out := trimOutput(string(resp.Stdout) + string(resp.Stderr))
		if resp.ExitCode != 0 {
			return out, fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), resp.ExitCode, out)
		}
		return out, nil
	case h.HTTPGet != nil:
		return "", r.hookHTTPGet(ctx, p, c, h.HTTPGet, podIP)
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return "", nil
		case <-ctx.Done():
			return "", fmt.Errorf("sleep %ds: %w", h.Sleep.Seconds, ctx.Err())
		}
	case h.TCPSocket != nil:
		return "", errors.New("tcpSocket lifecycle handlers are not supported (deprecated in the API)")
	}
	return "", errors.New("lifecycle handler has no action")
}

func trimOutput(s string) string {
	if len(s) > maxHookOutput {
		s = s[:maxHookOutput] + "…"
	}
	return strings.TrimSpace(s)
}

// hookHTTPGet is an httpGet handler against the pod (the node for a
// host-network pod): success is a status in [200, 400).
func (r *Runtime) hookHTTPGet(ctx context.Context, p *v1.Pod, c *v1.Container, g *v1.HTTPGetAction, podIP string) error {
	host := podIP
	if p.Spec.HostNetwork || host == "" {
		host = r.cfg.NodeIP
	}
	port, err := probe.ResolvePort(g.Port, c)
	if err != nil {
		return err
	}
	if _, err := probe.HTTPGet(ctx, g, host, port, hookHTTPUserAgent); err != nil {
		return fmt.Errorf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %w", g.Path, c.Name, p.Name, err)
	}
	return nil
}

// hookTimeout bounds a hook by the pod's grace period (at least 2 s).
func hookTimeout(p *v1.Pod) time.Duration {
	g := int64(v1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		g = *p.Spec.TerminationGracePeriodSeconds
	}
	return time.Duration(max(g, minGracePeriod)) * time.Second
}

// containerSpec finds a container of p by name (nil when p is nil or has
// none of that name).
func containerSpec(p *v1.Pod, name string, init bool) *v1.Container {
	if p == nil {
		return nil
	}
	list := p.Spec.Containers
	if init {
		list = p.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
