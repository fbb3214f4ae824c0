package cm

import (
	"errors"
	"fmt"
	"path"
	"sync"

	"github.com/opencontainers/cgroups"
	cgmanager "github.com/opencontainers/cgroups/manager"
	cgsystemd "github.com/opencontainers/cgroups/systemd"
	"github.com/sirupsen/logrus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zapio"
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Cgroup drivers.
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

// Names of the kubelet's hierarchy beneath the cgroup root.
const (
	kubepods   = "kubepods"
	burstable  = "burstable"
	besteffort = "besteffort"
)

// Config configures a Manager.
type Config struct {
	// MountRoot is where the cgroup file systems are mounted
	// (/sys/fs/cgroup).
	MountRoot string
	// Root is the cgroup kubepods is made under (--cgroup-root, "/"; the
	// systemd driver takes only "/").
	Root string
	// Driver is the cgroup driver: cgroupfs or systemd.
	Driver string
	// Node limits kubepods: its cpu (shares) and memory (limit); node
	// allocatable when it is enforced, else capacity. Zero memory: none.
	Node v1.ResourceList
	// PodPIDs is each pod cgroup's pids.max (--pod-max-pids); <= 0: none.
	PodPIDs int64
	Logger  *zap.Logger
	// newSystemd makes the systemd driver's cgroup managers (tests: a
	// fake); nil: opencontainers/cgroups' manager.New.
	newSystemd func(*cgroups.Cgroup) (cgroups.Manager, error)
}

// Manager keeps the pods' cgroups.
type Manager struct {
	cfg Config
	fs  *fs
	b   backend
	log *zap.Logger

	mu sync.Mutex
	// burstableMilli is the cpu request (millicores) of each Burstable
	// pod with a cgroup: their sum sets the burstable tier's shares.
	burstableMilli map[pod.UID]int64
	burstableSet   uint64 // the shares last written
	// applied are the limits last written to each pod cgroup (by its
	// parent path): an unchanged pod whose cgroup exists is not written
	// again (with systemd, two D-Bus calls per sync), as the kubelet
	// writes a pod cgroup when it makes it or resizes it.
	applied map[string]Resources
	// ensured are the pods given a cgroup since the last Cleanup: one
	// admitted while housekeeping gathered the active pods is not
	// removed under it.
	ensured map[pod.UID]bool
	// removeErr is the last error removing each cgroup (warned once).
	removeErr map[string]string
}

// New validates cfg and finds the cgroup hierarchies; Start makes the
// QoS tiers.
func New(cfg Config) (*Manager, error) {
	if cfg.MountRoot == "" || cfg.Logger == nil {
		return nil, errors.New("cgroup manager: MountRoot and Logger are required")
	}
	if cfg.Root == "" {
		cfg.Root = "/"
	}
	if !path.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("cgroup root %q: want an absolute cgroup path such as /", cfg.Root)
	}
	f, err := discover(cfg.MountRoot)
	if err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, fs: f, log: cfg.Logger.Named("cm"), burstableMilli: map[pod.UID]int64{},
		applied: map[string]Resources{}, ensured: map[pod.UID]bool{}, removeErr: map[string]string{}}
	switch cfg.Driver {
	case DriverCgroupfs, "":
		m.b = cgroupfs{f: f, root: cfg.Root}
	case DriverSystemd:
		if path.Clean(cfg.Root) != "/" {
			return nil, fmt.Errorf("cgroup root %q: the systemd cgroup driver makes kubepods.slice under the root slice; use --cgroup-root=/", cfg.Root)
		}
		mk := cfg.newSystemd
		if mk == nil {
			if !cgsystemd.IsRunningSystemd() {
				return nil, errors.New("the systemd cgroup driver needs systemd as PID 1 (its D-Bus API makes the slices): use --cgroup-driver=cgroupfs, with the runtime's cgroup driver alike (containerd: SystemdCgroup = false)")
			}
			mk = cgmanager.New
			// The library logs through logrus: into the agent's log.
			logrus.SetOutput(&zapio.Writer{Log: m.log.Named("cgroups"), Level: zapcore.WarnLevel})
			logrus.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
			logrus.SetLevel(logrus.WarnLevel)
		}
		m.b = systemdDriver{f: f, newManager: mk}
	default:
		return nil, fmt.Errorf("cgroup driver %q: want cgroupfs or systemd", cfg.Driver)
	}
	return m, nil
}

// name is a cgroup of the hierarchy beneath kubepods: kubepods itself
// with no elements.
func name(elems ...string) []string {
	out := []string{kubepods}
	for _, e := range elems {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

// Start makes kubepods (with the node's limits) and the burstable and
// besteffort tiers (shares 2 until pods come). Idempotent.
func (m *Manager) Start() error {
	node := NodeResources(m.cfg.Node)
	if err := m.b.set(name(), node); err != nil {
		return fmt.Errorf("limit kubepods: %w", err)
	}
	if err := m.b.set(name(besteffort), Resources{CPUShares: minShares}); err != nil {
		return fmt.Errorf("besteffort tier: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	shares := m.burstableShares()
	if err := m.b.set(name(burstable), Resources{CPUShares: shares}); err != nil {
		return fmt.Errorf("burstable tier: %w", err)
	}
	m.burstableSet = shares
	parent, _ := m.b.parent(name())
	m.log.Info("pod cgroups ready", zap.String("kubepods", parent), zap.String("driver", m.driver()), zap.Bool("cgroupV2", m.fs.v2),
		zap.Uint64("cpuShares", node.CPUShares), zap.Int64("memoryLimit", node.Memory))
	return nil
}

func (m *Manager) driver() string {
	if _, ok := m.b.(systemdDriver); ok {
		return DriverSystemd
	}
	return DriverCgroupfs
}

// qosDir is the tier a pod's cgroup goes in ("" for Guaranteed).
func qosDir(q v1.PodQOSClass) string {
	switch q {
	case v1.PodQOSBurstable:
		return burstable
	case v1.PodQOSBestEffort:
		return besteffort
	}
	return ""
}

// podName is p's pod cgroup.
func podName(p *v1.Pod) []string {
	return name(qosDir(pod.QOSClass(p)), "pod"+string(p.UID))
}

// EnsurePod makes p's pod cgroup with its limits (PodResources and the
// pids limit), again if it exists, updates the burstable tier's shares
// and returns the cgroup parent for the runtime (cgroupfs:
// /<root>/kubepods[/<tier>]/pod<uid>; systemd: the slice's path). Safe
// for concurrent use.
func (m *Manager) EnsurePod(p *v1.Pod) (string, error) {
	c := podName(p)
	parent, err := m.b.parent(c)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if pod.QOSClass(p) == v1.PodQOSBurstable {
		reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		m.burstableMilli[p.UID] = reqs.Cpu().MilliValue()
		// The tier grows before the pod is in it, as the kubelet's QoS
		// manager updates it before the pod cgroup.
		if err := m.setBurstableLocked(); err != nil {
			return "", err
		}
	}
	r := PodResources(p)
	r.PIDs = m.cfg.PodPIDs
	m.ensured[p.UID] = true
	if last, ok := m.applied[parent]; ok && last == r && m.b.exists(c) {
		return parent, nil
	}
	if err := m.b.set(c, r); err != nil {
		delete(m.applied, parent)
		return "", fmt.Errorf("limit pod cgroup %s: %w", parent, err)
	}
	m.applied[parent] = r
	return parent, nil
}

// burstableShares are the burstable tier's shares: its pods' cpu
// requests.
func (m *Manager) burstableShares() uint64 {
	var milli int64
	for _, v := range m.burstableMilli {
		milli += v
	}
	return milliCPUToShares(milli)
}

// setBurstableLocked writes the burstable tier's shares when their sum
// changed.
func (m *Manager) setBurstableLocked() error {
	shares := m.burstableShares()
	if shares == m.burstableSet {
		return nil
	}
	if err := m.b.setShares(name(burstable), shares); err != nil {
		return fmt.Errorf("set burstable tier's cpu shares: %w", err)
	}
	m.burstableSet = shares
	return nil
}

// Cleanup removes the pod cgroups of pods not in active (known to the
// agent or present in the runtime): gone pods and orphans of an earlier
// run. One whose processes are not gone yet stays for the next call.
func (m *Manager) Cleanup(active map[pod.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keep := map[string]bool{}
	for uid := range active {
		keep[m.b.component("pod"+string(uid))] = true
	}
	for uid := range m.ensured {
		keep[m.b.component("pod"+string(uid))] = true
	}
	for _, tier := range []string{"", burstable, besteffort} {
		for comp := range m.b.pods(name(tier)) {
			if keep[comp] {
				continue
			}
			c := name(tier, comp)
			parent, _ := m.b.parent(c)
			if err := m.b.remove(c); err != nil {
				if errors.Is(err, errBusy) {
					m.log.Debug("pod cgroup not removed yet; retried at the next housekeeping", zap.String("cgroup", parent), zap.Error(err))
				} else if m.removeErr[parent] != err.Error() {
					m.log.Warn("pod cgroup not removed; retried at every housekeeping", zap.String("cgroup", parent), zap.Error(err))
				}
				m.removeErr[parent] = err.Error()
				continue
			}
			delete(m.removeErr, parent)
			delete(m.applied, parent)
			m.log.Info("removed pod cgroup", zap.String("cgroup", parent))
		}
	}
	for uid := range m.burstableMilli {
		if !active[uid] && !m.ensured[uid] {
			delete(m.burstableMilli, uid)
		}
	}
	clear(m.ensured)
	if err := m.setBurstableLocked(); err != nil {
		m.log.Warn("update burstable tier", zap.Error(err))
	}
}
