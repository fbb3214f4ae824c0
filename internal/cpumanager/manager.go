package cpumanager

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Policy names.
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// OptionFullPCPUsOnly makes the static policy allocate whole physical
// cores only (the kubelet's full-pcpus-only).
const OptionFullPCPUsOnly = "full-pcpus-only"

// ResourceUpdater changes a running container's resources: the CRI
// runtime client's UpdateContainerResources (the kubelet's
// runtimeService). Called from the reconcile goroutine only.
type ResourceUpdater interface {
	UpdateContainerResources(ctx context.Context, in *runtimeapi.UpdateContainerResourcesRequest, opts ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error)
}

// PodStatuses is the runtime's view of this agent's pods (the PLEG), given
// to Run:
// Snapshot lists them (IDs, names, states), GetNewerThan gives one pod's
// inspected status (exit codes) as of a time after min. Both are called
// from the reconcile goroutine and must be safe beside the sync loop.
type PodStatuses interface {
	Snapshot() (map[pod.UID]*pod.RuntimeStatus, time.Time)
	GetNewerThan(ctx context.Context, uid pod.UID, min time.Time) (*pod.RuntimeStatus, error)
}

// PodSpecs are the desired pods (the pod manager's Reader): the spec of a
// pod holding CPUs tells whether a container that ended runs again. Safe
// for concurrent use.
type PodSpecs interface {
	GetPodByUID(uid pod.UID) (*v1.Pod, bool)
}

// Config configures a Manager.
type Config struct {
	// Policy is "none" (or "") or "static".
	Policy string
	// Options are the policy's options (--cpu-manager-policy-options):
	// full-pcpus-only=true|false. Static policy only.
	Options map[string]string
	// SysfsRoot is where the topology is read (/sys).
	SysfsRoot string
	// StateDir holds the checkpoint, <StateDir>/cpu_manager_state (the
	// agent's root dir).
	StateDir string
	// ReservedCPUs (--reserved-cpus) are kept out of exclusive
	// allocation. When empty, ReservedMilliCPU (kube + system reserved
	// cpu) rounded up gives how many, taken from the lowest CPUs
	// topology-aware.
	ReservedCPUs     cpuset.CPUSet
	ReservedMilliCPU int64
	// Updater and Pods are needed by the static policy.
	Updater ResourceUpdater
	Pods    PodSpecs
	// ReconcilePeriod is how often the shared pool is re-pushed (10s).
	ReconcilePeriod time.Duration
	// CallTimeout bounds each UpdateContainerResources (2m).
	CallTimeout time.Duration
	Clock       clock.WithTicker
	Logger      *zap.Logger
}

// Manager is the CPU manager: it decides which CPUs each container may
// use (policy), remembers it (state, checkpointed), and keeps running
// containers on them (reconcile).
//
// Allocate and RemoveStale are called by the sync loop's admission and
// its housekeeping rounds, never at once; ContainerCPUs by pod workers at
// container creation;
// Reconcile from Run's goroutine. All are safe for concurrent use.
type Manager struct {
	cfg      Config
	log      *zap.Logger
	topo     *Topology
	path     string
	static   bool
	fullPCPU bool
	reserved cpuset.CPUSet

	mu sync.Mutex
	st *state

	// pushed is the cpuset last set on each running container; only the
	// reconcile goroutine touches it.
	pushed  map[string]string
	changed chan struct{}
}

// podInfo is what release needs of a pod's spec.
type podInfo struct {
	restart v1.RestartPolicy
	init    map[string]bool // init containers, by name
	sidecar map[string]bool // restartable init containers
}

func infoOf(p *v1.Pod) podInfo {
	info := podInfo{restart: p.Spec.RestartPolicy, init: map[string]bool{}, sidecar: map[string]bool{}}
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		info.init[c.Name] = true
		info.sidecar[c.Name] = pod.IsSidecar(c)
	}
	return info
}

// New reads the topology, checks the configuration and restores the
// checkpoint. A checkpoint that is corrupt, belongs to another policy
// with exclusive assignments, or does not match the node's CPUs is an
// error that says what to do.
func New(cfg Config) (*Manager, error) {
	if cfg.Policy == "" {
		cfg.Policy = PolicyNone
	}
	if cfg.Policy != PolicyNone && cfg.Policy != PolicyStatic {
		return nil, fmt.Errorf("cpu manager policy %q: want none or static", cfg.Policy)
	}
	if cfg.StateDir == "" || cfg.Logger == nil {
		return nil, errors.New("cpu manager: StateDir and Logger are required")
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.Named("cpumanager"), path: filepath.Join(cfg.StateDir, StateFile),
		static: cfg.Policy == PolicyStatic, pushed: map[string]string{},
		changed: make(chan struct{}, 1)}
	for k, v := range cfg.Options {
		if k != OptionFullPCPUsOnly {
			return nil, fmt.Errorf("cpu manager policy option %q: unknown (known: %s)", k, OptionFullPCPUsOnly)
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("cpu manager policy option %s=%q: want true or false", k, v)
		}
		m.fullPCPU = b
	}
	if len(cfg.Options) > 0 && !m.static {
		return nil, errors.New("cpu manager policy options need --cpu-manager-policy=static")
	}
	if m.static {
		if cfg.SysfsRoot == "" || cfg.Updater == nil || cfg.Pods == nil || cfg.Clock == nil {
			return nil, errors.New("cpu manager (static): SysfsRoot, Updater, Pods and Clock are required")
		}
		if m.cfg.ReconcilePeriod <= 0 {
			m.cfg.ReconcilePeriod = 10 * time.Second
		}
		if m.cfg.CallTimeout <= 0 {
			m.cfg.CallTimeout = 2 * time.Minute
		}
		topo, err := Discover(cfg.SysfsRoot)
		if err != nil {
			return nil, err
		}
		m.topo = topo
		if err := m.reserve(); err != nil {
			return nil, err
		}
	}
	if err := m.restore(); err != nil {
		return nil, err
	}
	if m.static {
		m.log.Info("cpu manager started", zap.String("policy", cfg.Policy), zap.Stringer("cpus", m.topo.All()),
			zap.Int("sockets", m.topo.NumSockets()), zap.Int("numaNodes", m.topo.NumNUMANodes()),
			zap.Int("cpusPerCore", m.topo.CPUsPerCore()), zap.Stringer("reserved", m.reserved),
			zap.Bool(OptionFullPCPUsOnly, m.fullPCPU), zap.Stringer("shared", m.st.defaultSet))
	}
	return m, nil
}

// reserve settles the reserved CPUs (the kubelet's NewStaticPolicy).
func (m *Manager) reserve() error {
	all := m.topo.All()
	if m.cfg.ReservedCPUs.Size() > 0 {
		if !m.cfg.ReservedCPUs.IsSubsetOf(all) {
			return fmt.Errorf("--reserved-cpus %s: not all are CPUs of this node (%s)", m.cfg.ReservedCPUs, all)
		}
		m.reserved = m.cfg.ReservedCPUs
		return nil
	}
	n := int((m.cfg.ReservedMilliCPU + 999) / 1000)
	if n == 0 {
		return errors.New("the static CPU manager policy needs CPUs reserved for the system: give --reserved-cpus, or cpu in --kube-reserved or --system-reserved")
	}
	reserved, err := m.topo.take(all, n)
	if err != nil {
		return fmt.Errorf("reserve %d CPUs (kube and system reserved cpu) of %s: %w", n, all, err)
	}
	m.reserved = reserved
	return nil
}

// restore loads the checkpoint, or starts a fresh state, and writes it.
func (m *Manager) restore() error {
	fresh := func() *state {
		if m.static {
			return newState(m.cfg.Policy, m.topo.All())
		}
		return newState(m.cfg.Policy, cpuset.New())
	}
	st, err := readState(m.path)
	var bad *corruptError
	switch {
	case errors.As(err, &bad):
		return fmt.Errorf("cpu manager state %s is corrupt (%s): its CPU assignments cannot be trusted. "+
			"Stop this node's Guaranteed pods (or drain the node), delete %s, and start nodeagent again", m.path, bad.why, m.path)
	case err != nil:
		return err
	case st == nil:
		st = fresh()
	case st.policy != m.cfg.Policy:
		if pinned := pinnedList(st); pinned != "" {
			return fmt.Errorf("cpu manager state %s was written by policy %q and pins containers to exclusive CPUs (%s), "+
				"but the configured policy is %q: start nodeagent with --cpu-manager-policy=%s, or stop those pods (or drain the node), "+
				"delete %s, and start nodeagent again", m.path, st.policy, pinned, m.cfg.Policy, st.policy, m.path)
		}
		m.log.Info("cpu manager policy changed; no container had exclusive CPUs, starting afresh",
			zap.String("from", st.policy), zap.String("to", m.cfg.Policy))
		st = fresh()
	case m.static:
		if err := m.validate(st); err != nil {
			return err
		}
	}
	m.st = st
	return writeState(m.path, st)
}

// validate checks a restored static state against the node (the
// kubelet's validateState).
func (m *Manager) validate(st *state) error {
	all := m.topo.All()
	assigned := st.assigned()
	if !st.defaultSet.Union(assigned).Equals(all) {
		return fmt.Errorf("cpu manager state %s covers CPUs %s, but this node's CPUs are %s: "+
			"stop this node's Guaranteed pods (or drain the node), delete %s, and start nodeagent again",
			m.path, st.defaultSet.Union(assigned), all, m.path)
	}
	if x := st.defaultSet.Intersection(assigned); x.Size() > 0 {
		return fmt.Errorf("cpu manager state %s is corrupt (CPUs %s are both shared and exclusive): "+
			"stop this node's Guaranteed pods (or drain the node), delete %s, and start nodeagent again", m.path, x, m.path)
	}
	if !m.reserved.IsSubsetOf(st.defaultSet) {
		return fmt.Errorf("reserved CPUs %s are assigned exclusively in cpu manager state %s (%s): "+
			"give the former --reserved-cpus, or stop this node's Guaranteed pods (or drain the node), delete %s, and start nodeagent again",
			m.reserved, m.path, pinnedList(st), m.path)
	}
	return nil
}

// pinnedList names the exclusive assignments, "" when there are none.
func pinnedList(st *state) string {
	var out []string
	for uid, cs := range st.assignments {
		for name, set := range cs {
			if set.Size() > 0 {
				out = append(out, fmt.Sprintf("pod %s container %s: %s", uid, name, set))
			}
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// Policy is the policy in force.
func (m *Manager) Policy() string { return m.cfg.Policy }

// ContainerCPUs is the cpuset a container is created with: its exclusive
// CPUs, else the shared pool. ok is false under the none policy (no
// cpuset is set). Safe for concurrent use.
func (m *Manager) ContainerCPUs(uid pod.UID, container string) (cpus string, ok bool) {
	if !m.static {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if set, ok := m.st.get(string(uid), container); ok && set.Size() > 0 {
		return set.String(), true
	}
	return m.st.defaultSet.String(), true
}

// SharedCPUs is the shared pool (every CPU not held exclusively,
// reserved ones included); empty under the none policy.
func (m *Manager) SharedCPUs() cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.defaultSet
}

// AllocatableCPUs is what exclusive allocation draws from: every CPU
// but the reserved ones under the static policy, none under none (the
// kubelet's GetAllocatableCPUs, for the pod resources API).
func (m *Manager) AllocatableCPUs() cpuset.CPUSet {
	if !m.static {
		return cpuset.New()
	}
	return m.topo.All().Difference(m.reserved)
}

// Assignments returns a copy of the exclusive assignments: pod UID →
// container → CPUs.
func (m *Manager) Assignments() map[string]map[string]cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[string]cpuset.CPUSet{}
	for uid, cs := range m.st.assignments {
		for name, set := range cs {
			if set.Size() == 0 {
				continue
			}
			if out[uid] == nil {
				out[uid] = map[string]cpuset.CPUSet{}
			}
			out[uid][name] = set
		}
	}
	return out
}

// commit checkpoints the state and wakes the reconcile goroutine. m.mu
// is held.
func (m *Manager) commit() error {
	if err := writeState(m.path, m.st); err != nil {
		return err
	}
	select {
	case m.changed <- struct{}{}:
	default:
	}
	return nil
}
