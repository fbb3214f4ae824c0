package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// podStartupBuckets are the kubelet's pod start-up buckets: roughly
// exponential, round numbers in everyday units.
var podStartupBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// PodStart observes each pod's start once, as the kubelet's
// pod_startup_latency_tracker.go, from the statuses the agent publishes
// (Status: the status manager's every change) and the image pulls made
// for it (ImagePull: the image puller's every pull):
//
//   - kubelet_pod_start_duration_seconds: from the agent first seeing
//     the pod (its first published status, at admission) to the first
//     status with phase Running;
//   - kubelet_pod_start_total_duration_seconds: from
//     the pod's creationTimestamp to the first status with every
//     container running (started), image pulls included;
//   - kubelet_pod_start_sli_duration_seconds: the
//     same less the time from the pod's first pull starting to its last
//     successful pull ending (the kubelet's firstStartedPulling →
//     lastFinishedPulling; waits for a pull slot included). Like the
//     kubelet's it does not subtract init containers' run time, whatever
//     the help text says.
//
// kubelet_first_network_pod_start_sli_duration_seconds is the SLI of the
// first pod off the host network observed (CNI start-up shows there), as
// the kubelet's gauge.
//
// Only pods first seen before they run are observed: a pod adopted from
// an earlier run, first published Running, is not. A pod without a
// creationTimestamp (a static pod: no API server made it) is measured
// from when the agent first saw it. The moment is when the agent
// publishes the status, not (as the kubelet) when the API server's watch
// shows it back: standalone there is no watch.
//
// Safe for concurrent use; its methods do not block.
type PodStart struct {
	clock        clock.PassiveClock
	start        prometheus.Histogram
	sli, total   prometheus.Histogram
	firstNetwork prometheus.Gauge

	mu   sync.Mutex
	pods map[types.UID]*podStartState
	// networkSeen: a pod off the host network was observed.
	networkSeen bool
}

type podStartState struct {
	firstSeen          time.Time
	pullStart, pullEnd time.Time
	// running, started: phase Running, every container started, observed
	// (or not to be: adopted).
	running, started bool
}

func newPodStart(c clock.PassiveClock) *PodStart {
	return &PodStart{
		clock: c,
		start: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubelet_pod_start_duration_seconds", Help: "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: podStartupBuckets,
		}),
		sli: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubelet_pod_start_sli_duration_seconds",
			Help:    "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: podStartupBuckets,
		}),
		total: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubelet_pod_start_total_duration_seconds",
			Help:    "Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: podStartupBuckets,
		}),
		firstNetwork: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubelet_first_network_pod_start_sli_duration_seconds",
			Help: "Duration in seconds to start the first network pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		}),
		pods: map[types.UID]*podStartState{},
	}
}

// Status is p's newly published status s.
func (t *PodStart) Status(p *v1.Pod, s v1.PodStatus) {
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.pods[p.UID]
	if st == nil {
		st = &podStartState{firstSeen: now}
		t.pods[p.UID] = st
		if s.Phase != v1.PodPending {
			// Running already (adopted), over, or refused: not a start.
			st.running, st.started = true, true
			return
		}
	}
	if !st.running && s.Phase == v1.PodRunning {
		st.running = true
		t.start.Observe(now.Sub(st.firstSeen).Seconds())
	}
	if st.started || !allStarted(s) {
		return
	}
	st.started = true
	created := p.CreationTimestamp.Time
	if created.IsZero() {
		created = st.firstSeen
	}
	e2e := now.Sub(created)
	var pulling time.Duration
	if !st.pullStart.IsZero() && st.pullEnd.After(st.pullStart) {
		pulling = st.pullEnd.Sub(st.pullStart)
	}
	sli := (e2e - pulling).Seconds()
	if !p.Spec.HostNetwork && !t.networkSeen {
		t.networkSeen = true
		t.firstNetwork.Set(sli)
	}
	t.sli.Observe(sli)
	t.total.Observe(e2e.Seconds())
}

// allStarted reports whether every container of s runs (the kubelet's
// hasPodStartedSLO).
func allStarted(s v1.PodStatus) bool {
	if len(s.ContainerStatuses) == 0 {
		return false
	}
	for _, cs := range s.ContainerStatuses {
		if cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
			return false
		}
	}
	return true
}

// ImagePull is a pull for pod uid that began at start and ended at end,
// with err (nil: pulled). Pulls for pods not being started are ignored.
func (t *PodStart) ImagePull(uid types.UID, start, end time.Time, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.pods[uid]
	if st == nil || st.started {
		return
	}
	if st.pullStart.IsZero() || start.Before(st.pullStart) {
		st.pullStart = start
	}
	if err == nil && end.After(st.pullEnd) {
		st.pullEnd = end
	}
}

// Removed forgets pod uid.
func (t *PodStart) Removed(uid types.UID) {
	t.mu.Lock()
	delete(t.pods, uid)
	t.mu.Unlock()
}
