// Package metrics owns nodeagent's Prometheus metrics and the local HTTP
// endpoint that serves them beside /healthz (the kubelet's healthz port,
// 127.0.0.1:10248). The other packages know nothing of Prometheus: they
// take plain observer funcs, which main wires to the collectors here.
//
// Safe for concurrent use.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the agent's collectors on their own registry.
type Metrics struct {
	Registry  *prometheus.Registry
	iteration *prometheus.HistogramVec
	relist    prometheus.Histogram
	podSync   prometheus.Histogram
}

// Gauges reads values that live elsewhere at scrape time.
type Gauges struct {
	Workers       func() float64 // live pod workers
	DroppedEvents func() float64 // PLEG events dropped on a full channel
	RunningPods   func() float64 // pods Running (kubelet_running_pods); nil: not exported
}

// New registers the collectors.
func New(g Gauges) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		iteration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nodeagent_sync_loop_iteration_duration_seconds", Help: "Duration of one sync loop iteration, by what woke it.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"kind"}),
		relist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nodeagent_pleg_relist_duration_seconds", Help: "Duration of one PLEG relist, inspections included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		podSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nodeagent_pod_worker_sync_duration_seconds", Help: "Duration of one pod worker sync (status wait included).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
	}
	m.Registry.MustRegister(m.iteration, m.relist, m.podSync,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nodeagent_pod_workers", Help: "Live pod workers."}, g.Workers),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nodeagent_pleg_events_dropped_total", Help: "PLEG events dropped on a full channel."}, g.DroppedEvents),
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
	)
	if g.RunningPods != nil {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kubelet_running_pods", Help: "Number of pods running on the node (the kubelet's name)."}, g.RunningPods))
	}
	return m
}

// ObserveIteration records a sync loop iteration.
func (m *Metrics) ObserveIteration(kind string, d time.Duration) {
	m.iteration.WithLabelValues(kind).Observe(d.Seconds())
}

// ObserveRelist records a PLEG relist.
func (m *Metrics) ObserveRelist(d time.Duration) { m.relist.Observe(d.Seconds()) }

// ObservePodSync records a pod worker sync.
func (m *Metrics) ObservePodSync(d time.Duration) { m.podSync.Observe(d.Seconds()) }

// Handler serves /metrics and /healthz; health returns nil when the agent
// is healthy, else why not (answered with 500).
func (m *Metrics) Handler(health func() error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := health(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	})
	return mux
}

// Listen opens the endpoint's socket (before the agent reports ready, so
// a taken port is known at start).
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("healthz/metrics listener: %w", err)
	}
	return ln, nil
}

// Serve serves h on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx) //nolint:errcheck
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
