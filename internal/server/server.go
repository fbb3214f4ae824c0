package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"
)

// Config is what the server needs; New checks the required fields.
type Config struct {
	NodeName      string
	Authenticator *Authenticator            // required
	Authorizer    Authorizer                // required
	Pods          func() ([]*v1.Pod, error) // the node's pods, with their statuses; required
	Runtime       Runtime                   // exec, attach, port-forward, run; required
	Health        func() error              // nil: healthy
	Metrics       http.Handler              // /metrics; nil: not served
	Configz       func() any                // /configz; nil: not served
	Stats         Summarizer                // /stats/summary; nil: not served
	Resource      http.Handler              // /metrics/resource; nil: not served
	PodLogsDir    string                    // /containerLogs reads here; "": not served
	Clock         clock.WithTicker          // default real
	CallTimeout   time.Duration             // of each CRI call (default 2m)
	Logger        *zap.Logger
}

// Server is the node's HTTPS API.
type Server struct {
	cfg     Config
	log     *zap.Logger
	handler http.Handler
}

// New builds the server's handler.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("server: no node name")
	case cfg.Authenticator == nil || cfg.Authorizer == nil:
		return nil, errors.New("server: no authenticator or authorizer")
	case cfg.Pods == nil || cfg.Runtime == nil:
		return nil, errors.New("server: no pods or runtime")
	case cfg.Logger == nil:
		return nil, errors.New("server: no logger")
	}
	s := newServer(cfg)
	mux := http.NewServeMux()
	s.readOnlyRoutes(mux)
	for _, p := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
		mux.HandleFunc("GET "+p, s.exec)
		mux.HandleFunc("POST "+p, s.exec)
	}
	for _, p := range []string{"/attach/{ns}/{pod}/{container}", "/attach/{ns}/{pod}/{uid}/{container}"} {
		mux.HandleFunc("GET "+p, s.attach)
		mux.HandleFunc("POST "+p, s.attach)
	}
	for _, p := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
		mux.HandleFunc("GET "+p, s.portForward)
		mux.HandleFunc("POST "+p, s.portForward)
	}
	mux.HandleFunc("POST /run/{ns}/{pod}/{container}", s.run)
	mux.HandleFunc("POST /run/{ns}/{pod}/{uid}/{container}", s.run)
	if cfg.PodLogsDir != "" {
		mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", s.containerLogs)
	}
	if cfg.Configz != nil {
		mux.HandleFunc("GET /configz", s.configz)
	}
	s.handler = s.filter(mux)
	return s, nil
}

func newServer(cfg Config) *Server {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	return &Server{cfg: cfg, log: cfg.Logger.Named("server")}
}

// readOnlyRoutes are the endpoints that only read: those of the
// read-only port, and of the secure port beside the others.
func (s *Server) readOnlyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("GET /pods", s.pods)
	mux.HandleFunc("GET /pods/{$}", s.pods)
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.cfg.Metrics)
	}
	if s.cfg.Stats != nil {
		mux.HandleFunc("GET /stats/summary", s.summary)
		mux.HandleFunc("POST /stats/summary", s.summary)
	}
	if s.cfg.Resource != nil {
		mux.Handle("GET /metrics/resource", s.cfg.Resource)
	}
}

// ReadOnly is the kubelet's read-only port: /healthz, /pods,
// /stats/summary, /metrics and /metrics/resource over plain HTTP, with
// no authentication or authorization — only when the operator asks for
// it (--read-only-port). Logs, exec and the configuration are not on it.
// Only NodeName, Pods and Logger are required.
func ReadOnly(cfg Config) (http.Handler, error) {
	if cfg.NodeName == "" || cfg.Pods == nil || cfg.Logger == nil {
		return nil, errors.New("server: read-only port needs a node name, pods and a logger")
	}
	s := newServer(cfg)
	mux := http.NewServeMux()
	s.readOnlyRoutes(mux)
	return mux, nil
}

// Handler is the server's handler, authentication and authorization
// included.
func (s *Server) Handler() http.Handler { return s.handler }

// filter authenticates and authorizes every request (default deny), with
// the kubelet's answers: 401 Unauthorized, 403 Forbidden (user=…, verb=…,
// resource=…, subresource(s)=[…]), 500 when no decision could be made.
func (s *Server) filter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := s.cfg.Authenticator.Authenticate(r)
		if err != nil {
			if !errors.Is(err, errUnauthenticated) {
				s.log.Warn("authentication", zap.String("path", r.URL.Path), zap.Error(err))
			} else {
				s.log.Debug("unauthenticated request", zap.String("path", r.URL.Path), zap.Error(err))
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := RequestAttributes(u, r, s.cfg.NodeName)
		subs := make([]string, len(attrs))
		for i, a := range attrs {
			subs[i] = a.Subresource
		}
		for _, a := range attrs {
			ok, _, err := s.cfg.Authorizer.Authorize(r.Context(), a)
			if err != nil {
				s.log.Warn("authorization", zap.String("user", u.Name), zap.String("path", r.URL.Path), zap.Error(err))
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, a.Verb, subs), http.StatusInternalServerError)
				return
			}
			if ok {
				next.ServeHTTP(w, r)
				return
			}
		}
		s.log.Debug("forbidden", zap.String("user", u.Name), zap.String("path", r.URL.Path))
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, attrs[0].Verb, subs), http.StatusForbidden)
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if s.cfg.Health != nil {
		if err := s.cfg.Health(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	}
	fmt.Fprint(w, "ok")
}

// Summarizer gives the node's summary (internal/stats).
type Summarizer interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}

// maxSummaryForm bounds a POSTed /stats/summary form: it holds one
// field.
const maxSummaryForm = 4 << 10

// summary answers /stats/summary (GET or POST), with the kubelet's
// only_cpu_and_memory=true.
func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	// As the kubelet: the query or a url-encoded form (ParseForm, never a
	// multipart one spooled to disk), read with a bound; only a single
	// "true" means true.
	r.Body = http.MaxBytesReader(w, r.Body, maxSummaryForm)
	if err := r.ParseForm(); err != nil {
		http.Error(w, fmt.Sprintf("parse form failed: %v", err), http.StatusBadRequest)
		return
	}
	v, found := r.Form["only_cpu_and_memory"]
	only := found && len(v) == 1 && v[0] == "true"
	sum, err := s.cfg.Stats.Summary(r.Context(), only)
	if err != nil {
		s.log.Warn("stats summary", zap.Error(err))
		http.Error(w, fmt.Sprintf("Internal Error: failed to get node stats: %v", err), http.StatusInternalServerError)
		return
	}
	writeJSON(w, sum)
}

func (s *Server) configz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, s.cfg.Configz())
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b) //nolint:errcheck
}

// The node server's connection limits: a client must send its headers
// within readHeaderTimeout, in at most maxHeaderBytes; an idle
// keep-alive connection is closed after idleTimeout; a response that is
// not a stream must be written within writeTimeout.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 90 * time.Second
	writeTimeout      = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// writeDeadline gives every response but the streams (exec, attach,
// port-forward, followed logs) writeTimeout to be written: http.Server's
// own WriteTimeout would cut the streams too.
func writeDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isStream(r) {
			http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout)) //nolint:errcheck // not every writer has deadlines
		}
		next.ServeHTTP(w, r)
	})
}

// isStream reports a request whose response is a stream of unbounded
// length.
func isStream(r *http.Request) bool {
	p := r.URL.Path
	for _, prefix := range []string{"/exec/", "/attach/", "/portForward/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	follow, _ := strconv.ParseBool(r.URL.Query().Get("follow")) // as the logs handler reads it
	return strings.HasPrefix(p, "/containerLogs/") && follow
}

// Serve serves TLS on ln until ctx ends. Streams already upgraded are
// not waited for.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cfg *tls.Config) error {
	srv := &http.Server{Handler: writeDeadline(s.handler), TLSConfig: cfg,
		ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: zap.NewStdLog(s.log.Named("http"))}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
