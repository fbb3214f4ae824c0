package probe

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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// maxBody is how much of a response body is read (and kept as output).
const maxBody = 10 << 10

// httpClient is shared by every check (a transport per check would cost
// its setup each time); no keep-alives, as the kubelet's prober: each
// check is a fresh connection to the container. Redirects are followed
// only to the same host (localRedirects).
var httpClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as the kubelet's hooks and probes
	DisableKeepAlives: true,
	Proxy:             nil,
}, CheckRedirect: localRedirects}

// localRedirects follows a redirect only to the host the check began
// with, at most 10, as the kubelet's prober (RedirectChecker without
// followNonLocalRedirects): a container cannot point the node's agent at
// another host. A redirect elsewhere ends the check with the redirect
// response itself, which counts as a success (the kubelet's "Probe
// terminated redirects" warning).
func localRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// HTTPGet performs the GET of g against host (the handler's own host
// when it names one) and returns the start of the body. ua is the
// User-Agent (kube-probe/…, kube-lifecycle/…), unless a header sets one.
// HTTPS does not verify the server's certificate, as the kubelet; a
// status outside [200, 400) is an error carrying the body.
func HTTPGet(ctx context.Context, g *v1.HTTPGetAction, host string, port int, ua string) (string, error) {
	if g.Host != "" {
		host = g.Host
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
		return "", fmt.Errorf("GET %s: %w", full, err)
	}
	req.Header.Set("User-Agent", ua)
	req.Header.Set("Accept", "*/*")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "host") {
			req.Host = h.Value
			continue
		}
		req.Header.Set(h.Name, h.Value)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("Get %q: %w", full, unwrapURL(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return string(body), fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return string(body), nil
}

func unwrapURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// TCP connects to host:port and closes the connection at once.
func TCP(ctx context.Context, host string, port int) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return conn.Close()
}

// GRPC asks the gRPC health service at host:port for service (may be
// empty) and fails unless it is SERVING.
func GRPC(ctx context.Context, host string, port int, service string) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUserAgent("kube-probe/1.37"))
	if err != nil {
		return fmt.Errorf("grpc probe to %s: %w", addr, err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("failed to connect service %q within the timeout: %w", addr, err)
	}
	if resp.Status != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("service unhealthy (responded with %q)", resp.Status)
	}
	return nil
}

// ResolvePort is a handler's port: a number, or the name of one of the
// container's ports.
func ResolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
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
