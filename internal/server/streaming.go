package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
)

// Runtime is the subset of the CRI runtime service the server uses;
// cri.Conn satisfies it. Called concurrently.
type Runtime interface {
	Exec(ctx context.Context, in *runtimeapi.ExecRequest, opts ...grpc.CallOption) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, in *runtimeapi.AttachRequest, opts ...grpc.CallOption) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, in *runtimeapi.PortForwardRequest, opts ...grpc.CallOption) (*runtimeapi.PortForwardResponse, error)
	ExecSync(ctx context.Context, in *runtimeapi.ExecSyncRequest, opts ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error)
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
}

// httpError is an error with the status it is answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &httpError{code: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if errors.As(err, &he) {
		http.Error(w, he.msg, he.code)
		return
	}
	s.log.Warn("node server request", zap.String("path", r.URL.Path), zap.Error(err))
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// findPod finds the pod ns/name (of uid when given) among the node's.
func (s *Server) findPod(r *http.Request) (*v1.Pod, error) {
	ns, name, uid := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("uid")
	pods, err := s.cfg.Pods()
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	for _, p := range pods {
		if p.Namespace == ns && p.Name == name && (uid == "" || string(p.UID) == uid) {
			return p, nil
		}
	}
	return nil, notFound("pod %s/%s not found on this node", ns, name)
}

// containerID is the runtime ID of the named container of p, from its
// published status.
func containerID(p *v1.Pod, name string) (string, error) {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.Name != name {
				continue
			}
			id, ok := containerIDOf(cs)
			if !ok {
				return "", notFound("container %q of pod %s/%s has not been created", name, p.Namespace, p.Name)
			}
			return id, nil
		}
	}
	return "", notFound("container %q not found in pod %s/%s", name, p.Namespace, p.Name)
}

// containerIDOf strips the runtime prefix from a status's container ID.
func containerIDOf(cs v1.ContainerStatus) (string, bool) {
	_, id, ok := strings.Cut(cs.ContainerID, "://")
	return id, ok && id != ""
}

func (s *Server) podContainer(r *http.Request) (string, error) {
	p, err := s.findPod(r)
	if err != nil {
		return "", err
	}
	return containerID(p, r.PathValue("container"))
}

// specTTY is the tty of the pod's container (app, init or ephemeral)
// named name.
func specTTY(p *v1.Pod, name string) bool {
	for _, c := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == name {
			return c.TTY
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return c.TTY
		}
	}
	return false
}

// streamFlags are the kubelet's exec/attach query parameters.
func streamFlags(r *http.Request) (stdin, stdout, stderr, tty bool) {
	q := r.URL.Query()
	return q.Get("input") == "1", q.Get("output") == "1", q.Get("error") == "1", q.Get("tty") == "1"
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	id, err := s.podContainer(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stdin, stdout, stderr, tty := streamFlags(r)
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		http.Error(w, "no command", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
	resp, err := s.cfg.Runtime.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Stdin: stdin, Stdout: stdout, Stderr: stderr && !tty, Tty: tty})
	cancel()
	if err != nil {
		s.fail(w, r, fmt.Errorf("exec in %s: %w", id, err))
		return
	}
	s.proxy(w, r, resp.Url)
}

func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	p, err := s.findPod(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("container")
	id, err := containerID(p, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stdin, stdout, stderr, _ := streamFlags(r)
	// As the kubelet: whether the attached process has a TTY was settled
	// when it started; the container's spec says, not the request.
	tty := specTTY(p, name)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
	resp, err := s.cfg.Runtime.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Stdin: stdin, Stdout: stdout, Stderr: stderr && !tty, Tty: tty})
	cancel()
	if err != nil {
		s.fail(w, r, fmt.Errorf("attach to %s: %w", id, err))
		return
	}
	s.proxy(w, r, resp.Url)
}

func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	p, err := s.findPod(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
	defer cancel()
	sb, err := s.sandbox(ctx, string(p.UID))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Ports come in the query for websocket clients; SPDY clients name
	// them per stream, and the runtime's server reads them there.
	var ports []int32
	for _, v := range r.URL.Query()["port"] {
		var n int32
		if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 || n > 65535 {
			http.Error(w, fmt.Sprintf("invalid port %q", v), http.StatusBadRequest)
			return
		}
		ports = append(ports, n)
	}
	resp, err := s.cfg.Runtime.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: ports})
	if err != nil {
		s.fail(w, r, fmt.Errorf("port-forward to sandbox %s: %w", sb, err))
		return
	}
	cancel()
	s.proxy(w, r, resp.Url)
}

// sandbox is the pod's newest ready sandbox.
func (s *Server) sandbox(ctx context.Context, uid string) (string, error) {
	resp, err := s.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{cri.LabelPodUID: uid},
	}})
	if err != nil {
		return "", fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	items := resp.Items
	if len(items) == 0 {
		return "", notFound("pod %s has no ready sandbox", uid)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].CreatedAt > items[j].CreatedAt })
	return items[0].Id, nil
}

// run runs a command in the container and answers its output, as the
// kubelet's /run (cmd split on spaces).
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	id, err := s.podContainer(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd := strings.Fields(r.URL.Query().Get("cmd"))
	if len(cmd) == 0 {
		http.Error(w, "no cmd", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.CallTimeout)
	defer cancel()
	resp, err := s.cfg.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: int64(s.cfg.CallTimeout.Seconds())})
	if err != nil {
		s.fail(w, r, fmt.Errorf("run in %s: %w", id, err))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write(append(resp.Stdout, resp.Stderr...)) //nolint:errcheck
}

// proxy passes the request, upgrade included, to the runtime's one-time
// streaming URL, and the streams back.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request, raw string) {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		s.fail(w, r, fmt.Errorf("runtime streaming URL %q is not absolute", raw))
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			out := *u
			out.RawQuery = pr.In.URL.RawQuery
			pr.Out.URL, pr.Out.Host = &out, u.Host
			pr.Out.Header.Del("Authorization") // the node's callers' credentials stay here
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("proxy to the runtime's streaming server", zap.String("path", r.URL.Path), zap.Error(err))
			http.Error(w, "proxy to the runtime: "+err.Error(), http.StatusBadGateway)
		},
	}
	rp.ServeHTTP(w, r)
}
