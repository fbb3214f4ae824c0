package prober

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Execer runs a command in a container (CRI ExecSync); Version tells a
// runtime that answers from one that does not.
type Execer interface {
	ExecSync(ctx context.Context, in *runtimeapi.ExecSyncRequest, opts ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error)
	Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
}

// Recorder receives the Unhealthy events.
type Recorder interface {
	Event(p *v1.Pod, eventType, reason, message string)
}

// Config wires a Manager.
type Config struct {
	Runtime  Execer
	Clock    clock.WithTicker
	Logger   *zap.Logger
	Recorder Recorder // optional
	// NodeIP is probed for host-network pods.
	NodeIP string
	// Jitter returns a random duration in [0, d); default math/rand.
	Jitter func(d time.Duration) time.Duration
}

// Manager owns every probe worker and their verdicts.
type Manager struct {
	cfg     Config
	log     *zap.Logger
	start   time.Time
	updates chan pod.ProbeUpdate
	done    chan struct{}

	mu   sync.Mutex
	pods map[pod.UID]*podProbes
	wg   sync.WaitGroup

	rmu     sync.RWMutex
	results map[resultKey]pod.ProbeResult
}

type resultKey struct {
	uid         pod.UID
	containerID string
	kind        pod.ProbeKind
}

// podProbes is one pod's newest spec and its workers. Guarded by
// Manager.mu.
type podProbes struct {
	pod     *v1.Pod
	workers map[workerKey]*worker
}

type workerKey struct {
	container string
	kind      pod.ProbeKind
}

// target is the container instance a worker probes.
type target struct {
	id        string
	startedAt time.Time
	podIP     string
}

// New validates cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Runtime == nil || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("prober: Runtime, Clock and Logger are required")
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func(d time.Duration) time.Duration {
			if d <= 0 {
				return 0
			}
			return rand.N(d)
		}
	}
	return &Manager{
		cfg: cfg, log: cfg.Logger.Named("prober"), start: cfg.Clock.Now(),
		updates: make(chan pod.ProbeUpdate, 128), done: make(chan struct{}),
		pods: map[pod.UID]*podProbes{}, results: map[resultKey]pod.ProbeResult{},
	}, nil
}

// Updates carries every changed verdict.
func (m *Manager) Updates() <-chan pod.ProbeUpdate { return m.updates }

// ProbeResult is the verdict of one probe of one container instance.
func (m *Manager) ProbeResult(uid pod.UID, containerID string, kind pod.ProbeKind) pod.ProbeResult {
	m.rmu.RLock()
	defer m.rmu.RUnlock()
	return m.results[resultKey{uid, containerID, kind}]
}

// probedContainers are the containers that may have probes: the regular
// ones and the restartable init containers (sidecars).
func probedContainers(p *v1.Pod) []probed {
	var out []probed
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		if pod.IsSidecar(c) {
			out = append(out, probed{c, true})
		}
	}
	for i := range p.Spec.Containers {
		out = append(out, probed{&p.Spec.Containers[i], false})
	}
	return out
}

type probed struct {
	c    *v1.Container
	init bool
}

func probeOf(c *v1.Container, kind pod.ProbeKind) *v1.Probe {
	switch kind {
	case pod.Liveness:
		return c.LivenessProbe
	case pod.Readiness:
		return c.ReadinessProbe
	}
	return c.StartupProbe
}

// Sync starts the workers p's probes need and points them at the
// containers' current instances in st (the newest sandbox's running ones);
// workers of probes no longer in the spec stop.
func (m *Manager) Sync(p *v1.Pod, st *pod.RuntimeStatus) {
	sb := st.LatestSandbox()
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.done:
		return
	default:
	}
	pp := m.pods[p.UID]
	if pp == nil {
		pp = &podProbes{workers: map[workerKey]*worker{}}
	}
	pp.pod = p
	wanted := map[workerKey]bool{}
	for _, pc := range probedContainers(p) {
		var t target
		if rc := st.Latest(pc.c.Name, pc.init); rc != nil && sb != nil && rc.SandboxID == sb.ID && rc.State == pod.ContainerRunning {
			t = target{id: rc.ID, startedAt: rc.StartedAt, podIP: sb.IP}
		}
		for _, kind := range []pod.ProbeKind{pod.Startup, pod.Liveness, pod.Readiness} {
			spec := probeOf(pc.c, kind)
			if spec == nil {
				continue
			}
			k := workerKey{pc.c.Name, kind}
			wanted[k] = true
			w := pp.workers[k]
			if w == nil {
				w = newWorker(m, p.UID, pc.c.Name, pc.init, kind)
				pp.workers[k] = w
				m.wg.Add(1)
				go func() {
					defer m.wg.Done()
					w.run()
				}()
			}
			// As the kubelet: only readiness is probed at once on a new
			// instance (liveness and startup wait a period, or a starting
			// server would be killed before it listens).
			if kind == pod.Readiness && t.id != "" && t.id != w.target.id {
				select {
				case w.trigger <- struct{}{}:
				default:
				}
			}
			w.target = t
		}
	}
	for k, w := range pp.workers {
		if !wanted[k] {
			w.stopLocked()
			delete(pp.workers, k)
		}
	}
	if len(pp.workers) == 0 {
		delete(m.pods, p.UID)
		return
	}
	m.pods[p.UID] = pp
}

// RemovePod stops uid's workers and forgets its verdicts.
func (m *Manager) RemovePod(uid pod.UID) {
	m.mu.Lock()
	if pp := m.pods[uid]; pp != nil {
		for _, w := range pp.workers {
			w.stopLocked()
		}
		delete(m.pods, uid)
	}
	m.mu.Unlock()
	m.rmu.Lock()
	for k := range m.results {
		if k.uid == uid {
			delete(m.results, k)
		}
	}
	m.rmu.Unlock()
}

// Stop ends every worker and waits for them.
func (m *Manager) Stop() {
	m.mu.Lock()
	select {
	case <-m.done:
	default:
		close(m.done)
	}
	for _, pp := range m.pods {
		for _, w := range pp.workers {
			w.stopLocked()
		}
	}
	m.pods = map[pod.UID]*podProbes{}
	m.mu.Unlock()
	m.wg.Wait()
}

// Workers is the number of running probe workers.
func (m *Manager) Workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, pp := range m.pods {
		n += len(pp.workers)
	}
	return n
}

// set records a verdict and reports a change on Updates.
func (m *Manager) set(u pod.ProbeUpdate) {
	k := resultKey{u.UID, u.ContainerID, u.Kind}
	m.rmu.Lock()
	prev := m.results[k]
	m.results[k] = u.Result
	m.rmu.Unlock()
	if prev == u.Result {
		return
	}
	select {
	case m.updates <- u:
	case <-m.done:
	}
}

// forget drops the verdicts of a container instance that is gone.
func (m *Manager) forget(uid pod.UID, containerID string, kind pod.ProbeKind) {
	m.rmu.Lock()
	delete(m.results, resultKey{uid, containerID, kind})
	m.rmu.Unlock()
}

// view is what a worker reads under Manager.mu for one probe run.
func (m *Manager) view(w *worker) (p *v1.Pod, c *v1.Container, t target, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[w.uid]
	if pp == nil || w.stopped {
		return nil, nil, target{}, false
	}
	for _, pc := range probedContainers(pp.pod) {
		if pc.c.Name == w.container && pc.init == w.init {
			return pp.pod, pc.c, w.target, true
		}
	}
	return nil, nil, target{}, false
}
