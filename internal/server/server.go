package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
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
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	s := &Server{cfg: cfg, log: cfg.Logger.Named("server")}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", s.healthz)
	mux.HandleFunc("GET /pods", s.pods)
	mux.HandleFunc("GET /pods/{$}", s.pods)
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
	if cfg.Metrics != nil {
		mux.Handle("GET /metrics", cfg.Metrics)
	}
	if cfg.Configz != nil {
		mux.HandleFunc("GET /configz", s.configz)
	}
	s.handler = s.filter(mux)
	return s, nil
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

// Serve serves TLS on ln until ctx ends. Streams already upgraded are
// not waited for.
func (s *Server) Serve(ctx context.Context, ln net.Listener, cfg *tls.Config) error {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, TLSConfig: cfg,
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
