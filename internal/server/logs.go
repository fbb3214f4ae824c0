package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/logs"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// containerLogs answers a container's log, as the kubelet's
// /containerLogs/{ns}/{pod}/{container}: follow, tailLines, sinceSeconds
// or sinceTime, timestamps, previous, limitBytes. The files are read by
// internal/logs (CRI format, rotations, no symlinks out of the pod's log
// directory).
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	p, err := s.findPod(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("container")
	opts, err := logOptions(r.URL.Query(), s.cfg.Clock.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !hasContainer(p, name) {
		s.fail(w, r, notFound("container %q not found in pod %s/%s", name, p.Namespace, p.Name))
		return
	}
	dir, err := logs.OpenContainerDir(s.cfg.PodLogsDir, logs.ContainerRef{Namespace: p.Namespace, Pod: p.Name, UID: string(p.UID), Container: name})
	if errors.Is(err, logs.ErrNotFound) {
		s.fail(w, r, notFound("container %q of pod %s/%s has no log", name, p.Namespace, p.Name))
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer dir.Close()
	opts.LatestIsPrevious = pod.LatestIsLastState(p, name)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if opts.Follow {
		id, _ := containerID(p, name)
		exited := make(chan struct{})
		opts.Exited = exited
		go s.watchExit(ctx, p, name, id, exited)
	}
	w.Header().Set("Content-Type", "text/plain")
	fw := &flushWriter{w: w}
	err = logs.Read(ctx, dir, opts, fw)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
	case errors.Is(err, logs.ErrNotFound) && !fw.wrote:
		s.fail(w, r, notFound("%v", err))
	case !fw.wrote:
		s.fail(w, r, err)
	default:
		s.log.Debug("container log read ended", zap.Error(err))
	}
}

// watchExit closes exited once the followed container is no longer the
// running instance id (per the published status), so a follow ends as the
// kubelet's does.
func (s *Server) watchExit(ctx context.Context, p *v1.Pod, name, id string, exited chan<- struct{}) {
	t := s.cfg.Clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		pods, err := s.cfg.Pods()
		if err != nil {
			continue
		}
		running := false
		for _, q := range pods {
			if q.UID != p.UID {
				continue
			}
			for _, list := range [][]v1.ContainerStatus{q.Status.ContainerStatuses, q.Status.InitContainerStatuses, q.Status.EphemeralContainerStatuses} {
				for _, cs := range list {
					if cs.Name == name {
						cid, _ := containerIDOf(cs)
						running = cs.State.Running != nil && (id == "" || cid == id)
					}
				}
			}
		}
		if !running {
			close(exited)
			return
		}
	}
}

func hasContainer(p *v1.Pod, name string) bool {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// logOptions parses the kubelet's log query parameters.
func logOptions(q url.Values, now time.Time) (logs.Options, error) {
	o := logs.Options{TailLines: -1}
	var err error
	boolean := func(k string) bool {
		if err != nil || !q.Has(k) {
			return false
		}
		v, e := strconv.ParseBool(q.Get(k))
		if e != nil {
			err = fmt.Errorf("%s %q: not a boolean", k, q.Get(k))
		}
		return v
	}
	integer := func(k string, min int64) (int64, bool) {
		if err != nil || !q.Has(k) {
			return 0, false
		}
		v, e := strconv.ParseInt(q.Get(k), 10, 64)
		if e != nil || v < min {
			err = fmt.Errorf("%s %q: want an integer >= %d", k, q.Get(k), min)
		}
		return v, e == nil
	}
	o.Follow, o.Previous, o.Timestamps = boolean("follow"), boolean("previous"), boolean("timestamps")
	if v, ok := integer("tailLines", 0); ok {
		o.TailLines = v
	}
	if v, ok := integer("limitBytes", 1); ok {
		o.LimitBytes = v
	}
	if v, ok := integer("sinceSeconds", 1); ok {
		o.SinceTime = now.Add(-time.Duration(v) * time.Second)
	}
	if q.Has("sinceTime") && err == nil {
		if q.Has("sinceSeconds") {
			return o, errors.New("give sinceSeconds or sinceTime, not both")
		}
		if o.SinceTime, err = time.Parse(time.RFC3339, q.Get("sinceTime")); err != nil {
			err = fmt.Errorf("sinceTime %q: not RFC 3339", q.Get("sinceTime"))
		}
	}
	if o.Previous {
		o.Follow = false
	}
	return o, err
}

// flushWriter flushes after each write, so a followed log streams; it
// notes whether anything was written (after which an error can no longer
// change the status).
type flushWriter struct {
	w     http.ResponseWriter
	wrote bool
}

func (f *flushWriter) Write(b []byte) (int, error) {
	f.wrote = true
	return f.w.Write(b)
}

func (f *flushWriter) Flush() {
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
}
