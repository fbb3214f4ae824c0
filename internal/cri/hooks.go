package cri

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// hookHTTPGet is an httpGet handler: success is a status in [200, 400).
// HTTPS does not verify the server's certificate (as the kubelet).
func (r *Runtime) hookHTTPGet(ctx context.Context, p *v1.Pod, c *v1.Container, g *v1.HTTPGetAction, podIP string) error {
	host := g.Host
	if host == "" {
		host = podIP
		if p.Spec.HostNetwork || host == "" {
			host = r.cfg.NodeIP
		}
	}
	port, err := resolvePort(g.Port, c)
	if err != nil {
		return err
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	full := u.String() + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, full, nil)
	if err != nil {
		return fmt.Errorf("http lifecycle hook %s: %w", full, err)
	}
	req.Header.Set("User-Agent", hookHTTPUserAgent)
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's hooks and probes
		DisableKeepAlives: true,
		Proxy:             nil,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("http lifecycle hook %s: %w", full, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10)) //nolint:errcheck // drained for the connection's sake only
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: received status code %d", path, c.Name, p.Name, resp.StatusCode)
	}
	return nil
}

// resolvePort is a handler's port: a number, or the name of one of the
// container's ports.
func resolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	if port.Type == intstr.Int {
		if port.IntVal <= 0 || port.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port %d", port.IntVal)
		}
		return int(port.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(port.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port %q in container %q", port.StrVal, c.Name)
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
