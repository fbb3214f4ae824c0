// Package metrics owns nodeagent's Prometheus metrics and the local HTTP
// endpoint that serves them beside /healthz (the kubelet's healthz port,
// 127.0.0.1:10248). The other packages know nothing of Prometheus: they
// take plain observer funcs (or, for CRI, gRPC interceptors passed as
// dial options), which main wires to the collectors here.
//
// Where the kubelet has a metric for the same thing, it has the kubelet's
// name, help text, labels and buckets (pkg/kubelet/metrics), so that
// dashboards and alerts written for the kubelet work unchanged:
// kubelet_pleg_relist_duration_seconds, kubelet_pleg_relist_interval_seconds,
// kubelet_pleg_last_seen_seconds, kubelet_pleg_discard_events,
// kubelet_pod_worker_duration_seconds{operation_type},
// kubelet_runtime_operations_{total,errors_total,duration_seconds}{operation_type}
// (runtime.go), kubelet_pod_start_{duration,sli_duration,total_duration}_seconds
// (podstart.go), the device plugin and pod resources API counts
// (devices.go), kubelet_running_pods and
// kubelet_running_containers{container_state}. What the kubelet has no
// metric for keeps a nodeagent_ name: nodeagent_sync_loop_iteration_duration_seconds{kind},
// nodeagent_pod_workers.
//
// Safe for concurrent use.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Metrics are the agent's collectors on their own registry.
type Metrics struct {
	Registry *prometheus.Registry
	// PodStart tracks pod start-up latencies (podstart.go).
	PodStart *PodStart
	// Devices counts device plugin registrations, allocations and pod
	// resources API calls (devices.go).
	Devices *Devices

	clock          clock.PassiveClock
	iteration      *prometheus.HistogramVec
	relist         prometheus.Histogram
	relistInterval prometheus.Histogram
	podWorker      *prometheus.HistogramVec
	ops            runtimeOps

	mu         sync.Mutex
	lastRelist time.Time // start of the last successful relist
}

// Gauges reads values that live elsewhere at scrape time; a nil func is
// not exported.
type Gauges struct {
	Workers       func() float64 // live pod workers (nodeagent_pod_workers)
	DroppedEvents func() float64 // PLEG events dropped on a full channel (kubelet_pleg_discard_events)
	// Runtime is the PLEG's last list-level view of the agent's pods and
	// when it was taken (pleg.Generic.Snapshot): kubelet_running_pods,
	// kubelet_running_containers{container_state} and
	// kubelet_pleg_last_seen_seconds.
	Runtime func() (map[pod.UID]*pod.RuntimeStatus, time.Time)
}

// New registers the collectors fed by the Observe methods, the CRI
// interceptors and PodStart, with Go and process metrics; c times the CRI
// calls and pod starts. The gauges, which read state built later, are
// added with AddGauges.
func New(c clock.PassiveClock) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		clock:    c,
		iteration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nodeagent_sync_loop_iteration_duration_seconds", Help: "Duration of one sync loop iteration, by what woke it.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"kind"}),
		relist: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubelet_pleg_relist_duration_seconds", Help: "Duration in seconds for relisting pods in PLEG.",
			Buckets: prometheus.DefBuckets,
		}),
		relistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubelet_pleg_relist_interval_seconds", Help: "Interval in seconds between relisting in PLEG.",
			Buckets: prometheus.DefBuckets,
		}),
		podWorker: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "kubelet_pod_worker_duration_seconds", Help: "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
			Buckets: prometheus.DefBuckets,
		}, []string{"operation_type"}),
		ops: newRuntimeOps(),
	}
	m.PodStart = newPodStart(c)
	m.Devices = newDevices()
	m.Registry.MustRegister(m.Devices.collectors()...)
	m.Registry.MustRegister(m.iteration, m.relist, m.relistInterval, m.podWorker,
		m.ops.total, m.ops.errors, m.ops.duration,
		m.PodStart.start, m.PodStart.sli, m.PodStart.total, m.PodStart.firstNetwork,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
	)
	return m
}

// AddGauges registers the gauges g has funcs for. Call it once.
func (m *Metrics) AddGauges(g Gauges) {
	if g.Workers != nil {
		m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nodeagent_pod_workers", Help: "Live pod workers."}, g.Workers))
	}
	if g.DroppedEvents != nil {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kubelet_pleg_discard_events", Help: "The number of discard events in PLEG."}, g.DroppedEvents))
	}
	if g.Runtime != nil {
		m.Registry.MustRegister(runtimeView{g.Runtime})
	}
}

// ObserveIteration records a sync loop iteration.
func (m *Metrics) ObserveIteration(kind string, d time.Duration) {
	m.iteration.WithLabelValues(kind).Observe(d.Seconds())
}

// ObserveRelist records a PLEG relist that began at start, as the
// kubelet: its duration whether it failed or not, and the interval since
// the last successful one's start.
func (m *Metrics) ObserveRelist(start time.Time, d time.Duration, err error) {
	m.relist.Observe(d.Seconds())
	m.mu.Lock()
	prev := m.lastRelist
	if err == nil {
		m.lastRelist = start
	}
	m.mu.Unlock()
	if !prev.IsZero() && start.After(prev) {
		m.relistInterval.Observe(start.Sub(prev).Seconds())
	}
}

// ObservePodSync records a pod worker's sync of a pod; op is the
// kubelet's operation type (create, update or sync).
func (m *Metrics) ObservePodSync(op string, d time.Duration) {
	m.podWorker.WithLabelValues(op).Observe(d.Seconds())
}

var (
	runningPodsDesc = prometheus.NewDesc("kubelet_running_pods", "Number of pods that have a running pod sandbox", nil, nil)
	runningCtrsDesc = prometheus.NewDesc("kubelet_running_containers", "Number of containers currently running", []string{"container_state"}, nil)
	plegLastSeen    = prometheus.NewDesc("kubelet_pleg_last_seen_seconds", "Timestamp in seconds when PLEG was last seen active.", nil, nil)
)

// runtimeView exports what the PLEG's last relist saw: pods with a ready
// sandbox, containers by state (every state, 0 included), and when the
// relist began (not before the first one).
type runtimeView struct {
	snapshot func() (map[pod.UID]*pod.RuntimeStatus, time.Time)
}

func (v runtimeView) Describe(ch chan<- *prometheus.Desc) {
	ch <- runningPodsDesc
	ch <- runningCtrsDesc
	ch <- plegLastSeen
}

func (v runtimeView) Collect(ch chan<- prometheus.Metric) {
	snap, taken := v.snapshot()
	pods := 0
	states := map[pod.ContainerState]int{}
	for _, st := range snap {
		if hasReadySandbox(st) {
			pods++
		}
		for _, c := range st.Containers {
			states[c.State]++
		}
	}
	ch <- prometheus.MustNewConstMetric(runningPodsDesc, prometheus.GaugeValue, float64(pods))
	for _, s := range []pod.ContainerState{pod.ContainerCreated, pod.ContainerRunning, pod.ContainerExited, pod.ContainerUnknown} {
		ch <- prometheus.MustNewConstMetric(runningCtrsDesc, prometheus.GaugeValue, float64(states[s]), s.String())
	}
	if !taken.IsZero() {
		ch <- prometheus.MustNewConstMetric(plegLastSeen, prometheus.GaugeValue, float64(taken.Unix()))
	}
}

func hasReadySandbox(st *pod.RuntimeStatus) bool {
	for _, sb := range st.Sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}

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
	// Nothing it serves is a stream: every limit applies.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 2 * time.Minute,
		IdleTimeout: 90 * time.Second, MaxHeaderBytes: 64 << 10}
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
