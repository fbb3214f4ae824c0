package cm

import (
	"errors"
	"fmt"
	"path"
	"sync"

	"go.uber.org/zap"
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
	// Root is the cgroup kubepods is made under (--cgroup-root, "/").
	Root string
	// Driver is the cgroup driver; only cgroupfs is supported.
	Driver string
	// Node limits kubepods: its cpu (shares) and memory (limit); node
	// allocatable when it is enforced, else capacity. Zero memory: none.
	Node   v1.ResourceList
	Logger *zap.Logger
}

// Manager keeps the pods' cgroups.
type Manager struct {
	cfg Config
	fs  *fs
	log *zap.Logger

	mu sync.Mutex
	// burstableMilli is the cpu request (millicores) of each Burstable
	// pod with a cgroup: their sum sets the burstable tier's shares.
	burstableMilli map[pod.UID]int64
	burstableSet   uint64 // the shares last written
}

// New validates cfg and finds the cgroup hierarchies; Start makes the
// QoS tiers.
func New(cfg Config) (*Manager, error) {
	if cfg.MountRoot == "" || cfg.Logger == nil {
		return nil, errors.New("cgroup manager: MountRoot and Logger are required")
	}
	switch cfg.Driver {
	case DriverCgroupfs, "":
	case DriverSystemd:
		return nil, errors.New("the systemd cgroup driver is not supported: configure the runtime for cgroupfs (containerd: SystemdCgroup = false) and use --cgroup-driver=cgroupfs, or run with --cgroups-per-qos=false")
	default:
		return nil, fmt.Errorf("cgroup driver %q: want cgroupfs or systemd", cfg.Driver)
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
	return &Manager{cfg: cfg, fs: f, log: cfg.Logger.Named("cm"), burstableMilli: map[pod.UID]int64{}}, nil
}

// rel is a cgroup's path relative to the hierarchies' roots.
func (m *Manager) rel(elems ...string) string {
	return path.Join(append([]string{m.cfg.Root, kubepods}, elems...)...)[1:]
}

// Start makes kubepods (with the node's limits) and the burstable and
// besteffort tiers (shares 2 until pods come). Idempotent.
func (m *Manager) Start() error {
	if err := m.fs.ensure(m.rel(burstable)); err != nil {
		return err
	}
	if err := m.fs.ensure(m.rel(besteffort)); err != nil {
		return err
	}
	node := NodeResources(m.cfg.Node)
	if err := m.fs.apply(m.rel(), node); err != nil {
		return fmt.Errorf("limit %s: %w", m.rel(), err)
	}
	if err := m.fs.setShares(m.rel(besteffort), minShares); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.setBurstableLocked(); err != nil {
		return err
	}
	m.log.Info("pod cgroups ready", zap.String("kubepods", "/"+m.rel()), zap.Bool("cgroupV2", m.fs.v2),
		zap.Uint64("cpuShares", node.CPUShares), zap.Int64("memoryLimit", node.Memory))
	return nil
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

// CgroupParent is p's pod cgroup as the runtime takes it with the
// cgroupfs driver: /<root>/kubepods[/<tier>]/pod<uid>.
func (m *Manager) CgroupParent(p *v1.Pod) string {
	return "/" + m.rel(qosDir(pod.QOSClass(p)), "pod"+string(p.UID))
}

// EnsurePod makes p's pod cgroup with its limits (PodResources), again
// if it exists, updates the burstable tier's shares and returns the
// cgroup parent. Safe for concurrent use.
func (m *Manager) EnsurePod(p *v1.Pod) (string, error) {
	parent := m.CgroupParent(p)
	rel := parent[1:]
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
	if err := m.fs.ensure(rel); err != nil {
		return "", err
	}
	if err := m.fs.apply(rel, PodResources(p)); err != nil {
		return "", fmt.Errorf("limit pod cgroup %s: %w", parent, err)
	}
	return parent, nil
}

// setBurstableLocked writes the burstable tier's shares when their sum
// changed.
func (m *Manager) setBurstableLocked() error {
	var milli int64
	for _, v := range m.burstableMilli {
		milli += v
	}
	shares := milliCPUToShares(milli)
	if shares == m.burstableSet {
		return nil
	}
	if err := m.fs.setShares(m.rel(burstable), shares); err != nil {
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
	for _, tier := range []string{"", burstable, besteffort} {
		for uid := range m.fs.pods(m.rel(tier)) {
			if active[pod.UID(uid)] {
				continue
			}
			rel := m.rel(tier, "pod"+uid)
			if err := m.fs.remove(rel); err != nil {
				m.log.Debug("pod cgroup not removed yet; retried at the next housekeeping", zap.String("uid", uid), zap.Error(err))
				continue
			}
			m.log.Info("removed pod cgroup", zap.String("uid", uid), zap.String("cgroup", "/"+rel))
		}
	}
	for uid := range m.burstableMilli {
		if !active[uid] {
			delete(m.burstableMilli, uid)
		}
	}
	if err := m.setBurstableLocked(); err != nil {
		m.log.Warn("update burstable tier", zap.Error(err))
	}
}
