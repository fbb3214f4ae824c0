package cni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// Sandboxes is what GC needs from the container runtime.
type Sandboxes interface {
	// Known lists the IDs of every sandbox the runtime has, in any state,
	// whichever client created it (other agents, other CRI clients). A
	// NOTREADY sandbox still known gets its CNI DEL from the runtime when
	// it is stopped or removed; and a READY one may list as NOTREADY
	// (UNKNOWN) while the runtime recovers after a restart: GC leaves
	// both alone.
	Known(ctx context.Context) ([]string, error)
	// IPs returns the pod IPs of one sandbox; none for one gone meanwhile.
	IPs(ctx context.Context, id string) ([]string, error)
}

// MonitorConfig configures a Monitor.
type MonitorConfig struct {
	ConfDir string   // the runtime's CNI config dir
	BinDirs []string // the runtime's CNI plugin dirs, searched in order
	// CacheDir is libcni's cache dir the runtime uses; "" for libcni's
	// default, /var/lib/cni (containerd has no knob for it).
	CacheDir  string
	Sandboxes Sandboxes     // nil: no GC
	GCPeriod  time.Duration // 0: no GC
	Grace     time.Duration // 0: DefaultGrace
	// CheckPeriod is how often the config file is stat'ed for changes;
	// 0: every 5 s.
	CheckPeriod time.Duration
	Clock       clock.WithTicker
	Logger      *zap.Logger
}

// Monitor watches the node's CNI config and keeps the pod network's IPs
// clean. Recheck and GC are the synchronous steps; Run drives them. Err is
// safe for concurrent use; Recheck and GC are called from one goroutine.
type Monitor struct {
	cfg MonitorConfig
	log *zap.Logger

	mu  sync.Mutex
	err error
	net Network // the last valid config

	stamp   string // the config file's identity at the last check
	lastErr string // the last error logged
}

// NewMonitor validates cfg.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	if cfg.ConfDir == "" || len(cfg.BinDirs) == 0 || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("cni monitor: ConfDir, BinDirs, Clock and Logger are required")
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = libcni.CacheDir
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.CheckPeriod <= 0 {
		cfg.CheckPeriod = 5 * time.Second
	}
	return &Monitor{cfg: cfg, log: cfg.Logger.Named("cni")}, nil
}

// Err is the current config problem, nil when the config validates. It
// is nodeagent's finding, not the runtime's word: the caller decides what
// it holds back (see the package doc).
func (m *Monitor) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// stamp identifies the config the runtime uses: the first file's name,
// size and modification time. Cheap: one directory read and one stat.
func stamp(confDir string) string {
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err != nil || len(files) == 0 {
		return "none"
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		return "none"
	}
	return fmt.Sprintf("%s %d %d", files[0], fi.Size(), fi.ModTime().UnixNano())
}

// Recheck validates the config again when its file changed, or always
// with force, and logs what changed: a config broken at run time (an
// operator's edit, a plugin removed) loudly, as an error. Nothing else
// follows from it here: running pods are untouched, and whether new ones
// wait is the runtime's NetworkReady (the runtime reads the file itself).
func (m *Monitor) Recheck(ctx context.Context, force bool) {
	s := stamp(m.cfg.ConfDir)
	first := m.stamp == ""
	if !force && s == m.stamp {
		return
	}
	changed := !first && s != m.stamp
	m.stamp = s
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := Check(cctx, m.cfg.ConfDir, m.cfg.BinDirs...)
	m.mu.Lock()
	m.err = err
	if err == nil {
		m.net = n
	}
	m.mu.Unlock()
	fields := []zap.Field{zap.String("file", n.File), zap.String("network", n.Name)}
	switch {
	case err != nil && (changed || err.Error() != m.lastErr):
		m.log.Error("CNI config is broken: new pods' sandboxes may fail to get a network (running pods are untouched); fix or restore the file",
			append(fields, zap.Bool("changed", changed), zap.Error(err))...)
	case err != nil && first:
		m.log.Warn("CNI configuration problem: new pods' sandboxes may fail to get a network until it is fixed", append(fields, zap.Error(err))...)
	case err == nil && (first || changed || m.lastErr != ""):
		m.log.Info("CNI network", append(fields, zap.String("cniVersion", n.CNIVersion), zap.Strings("plugins", n.Plugins), zap.Bool("changed", changed))...)
	}
	m.lastErr = ""
	if err != nil {
		m.lastErr = err.Error()
	}
}

// GCResult is what one GC released.
type GCResult struct {
	Attachments []string // container IDs whose cached attachment was deleted
	IPs         []string // host-local reservations released
}

// GC releases what crashes leaked on the node's network, keeping every
// attachment and IP of a sandbox the runtime knows (of any CRI client, in
// any state) and anything younger than the grace:
//
//  1. each cached attachment (libcni's result cache) of the network that no
//     known sandbox owns gets a CNI DEL, as libcni's GCNetworkList does, but
//     only once older than the grace: the runtime lists a sandbox only
//     after its ADD;
//  2. libcni's GCNetworkList sends the plugins GC (cniVersion 1.1.0 and
//     later) with the valid attachments; its own cache pass is left to
//     step 1 (it is given an empty cache, since it knows no grace);
//  3. each host-local store of the network is reconciled under the
//     plugin's lock: a reservation whose container ID no known sandbox has,
//     whose IP no known sandbox has and which is older than the grace is
//     removed. This also covers plugins that predate GC, and bridge, which
//     does not pass GC on to its IPAM.
//
// Nothing is released when the config does not validate or the runtime
// cannot list its sandboxes.
func (m *Monitor) GC(ctx context.Context) (GCResult, error) {
	var res GCResult
	m.mu.Lock()
	n, cerr := m.net, m.err
	m.mu.Unlock()
	if cerr != nil {
		return res, fmt.Errorf("no valid CNI config: %w", cerr)
	}
	if n.list == nil {
		return res, errors.New("no valid CNI config: not checked yet")
	}
	if m.cfg.Sandboxes == nil {
		return res, nil
	}
	list := n.list
	known, err := m.cfg.Sandboxes.Known(ctx)
	if err != nil {
		return res, fmt.Errorf("list sandboxes: %w", err)
	}
	knownSet := make(map[string]bool, len(known))
	for _, id := range known {
		knownSet[id] = true
	}
	now := m.cfg.Clock.Now()
	grace := m.cfg.Grace
	var errs []error

	// 1. Cached attachments.
	cached, err := cachedAttachments(m.cfg.CacheDir)
	if err != nil {
		errs = append(errs, err)
	}
	c := libcni.NewCNIConfigWithCacheDir(m.cfg.BinDirs, m.cfg.CacheDir, nil)
	for _, a := range staleAttachments(list.Name, cached, knownSet, now, grace) {
		rt := &libcni.RuntimeConf{ContainerID: a.ContainerID, NetNS: a.NetNS, IfName: a.IfName,
			Args: a.CniArgs, CapabilityArgs: a.CapabilityArgs}
		if err := c.DelNetworkList(ctx, list, rt); err != nil {
			errs = append(errs, fmt.Errorf("delete leaked attachment %s %s: %w", a.ContainerID, a.IfName, err))
			continue
		}
		m.log.Info("released leaked pod network attachment", zap.String("network", list.Name),
			zap.String("sandboxID", a.ContainerID), zap.String("ifName", a.IfName))
		res.Attachments = append(res.Attachments, a.ContainerID)
	}

	// 2. The plugins' GC.
	dirs := hostLocalDirs(list)
	var all []reservation
	for _, d := range dirs {
		rs, err := readReservations(d)
		if err != nil {
			errs = append(errs, err)
		}
		all = append(all, rs...)
	}
	cached, _ = cachedAttachments(m.cfg.CacheDir)
	valid := validAttachments(known, cached, all, now, grace)
	noCache := libcni.NewCNIConfigWithCacheDir(m.cfg.BinDirs, filepath.Join(m.cfg.CacheDir, "nodeagent-gc-no-cache"), nil)
	if err := noCache.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
		errs = append(errs, fmt.Errorf("CNI GC: %w", err))
	}

	// 3. host-local stores.
	var liveIPs map[string]bool
	for _, d := range dirs {
		released, err := m.reconcile(ctx, d, knownSet, &liveIPs, now)
		if err != nil {
			errs = append(errs, err)
		}
		res.IPs = append(res.IPs, released...)
	}
	return res, errors.Join(errs...)
}

// reconcile releases the stale reservations of one host-local store under
// its lock. The known sandboxes' IPs are asked for only when there is
// something to release.
func (m *Monitor) reconcile(ctx context.Context, dir string, known map[string]bool, liveIPs *map[string]bool, now time.Time) ([]string, error) {
	rs, err := readReservations(dir)
	if err != nil || len(staleReservations(rs, known, nil, now, m.cfg.Grace)) == 0 {
		return nil, err
	}
	if *liveIPs == nil {
		ips := map[string]bool{}
		for id := range known {
			got, err := m.cfg.Sandboxes.IPs(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("%w: sandbox %s: %w", errNoLiveIPs, id, err)
			}
			for _, ip := range got {
				ips[ip] = true
			}
		}
		*liveIPs = ips
	}
	unlock, err := lockStore(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Read again under the lock: an ADD may have run meanwhile.
	if rs, err = readReservations(dir); err != nil {
		return nil, err
	}
	var released []string
	for _, r := range staleReservations(rs, known, *liveIPs, now, m.cfg.Grace) {
		if err := os.Remove(r.path); err != nil && !os.IsNotExist(err) {
			return released, fmt.Errorf("release %s: %w", r.path, err)
		}
		m.log.Info("released leaked pod IP", zap.String("ip", r.ip), zap.String("sandboxID", r.containerID), zap.String("store", dir))
		released = append(released, r.ip)
	}
	return released, nil
}

// Run re-checks the config every CheckPeriod (a stat; a full validation
// when the file changed) and, every GCPeriod, validates it in full and
// runs GC. It returns when ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	check := m.cfg.Clock.NewTicker(m.cfg.CheckPeriod)
	defer check.Stop()
	var gc <-chan time.Time
	if m.cfg.GCPeriod > 0 && m.cfg.Sandboxes != nil {
		t := m.cfg.Clock.NewTicker(m.cfg.GCPeriod)
		defer t.Stop()
		gc = t.C()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C():
			m.Recheck(ctx, false)
		case <-gc:
			m.Recheck(ctx, true)
			if m.Err() != nil {
				continue // reported by Recheck; nothing is released meanwhile
			}
			cctx, cancel := context.WithTimeout(ctx, max(m.cfg.GCPeriod, 30*time.Second))
			res, err := m.GC(cctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				m.log.Warn("CNI garbage collection", zap.Error(err))
			}
			if len(res.Attachments)+len(res.IPs) > 0 {
				m.log.Info("CNI garbage collection released leaked addresses",
					zap.Int("attachments", len(res.Attachments)), zap.Int("ips", len(res.IPs)))
			}
		}
	}
}
