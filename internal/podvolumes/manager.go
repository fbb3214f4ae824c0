package podvolumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/downward"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// Config configures a Manager.
type Config struct {
	// RootDir holds the pod directories: <RootDir>/pods/<uid>. Its
	// filesystem's size is also the node's allocatable ephemeral storage
	// that the downward API reports.
	RootDir string
	// NodeIP is status.hostIP for the downward API.
	NodeIP string
	// Objects, set in API mode, reads ConfigMaps, Secrets and service
	// account tokens; nil in standalone mode.
	Objects Objects
	// Claims, set in API mode, reads persistent volume claims and
	// volumes; nil in standalone mode.
	Claims Claims
	// CSI, set in API mode, publishes CSI persistent volumes.
	CSI CSI
	// Clock stamps volume versions and ages cached tokens.
	Clock  clock.PassiveClock
	Logger *zap.Logger
}

// Manager owns the pod directories under RootDir and what is in them.
type Manager struct {
	cfg    Config
	log    *zap.Logger
	node   downward.Node
	tokens tokenCache // service account tokens of projected volumes

	cmu    sync.Mutex
	claims map[types.UID]map[string]claimVolume // pods' claim volumes once mounted
	owned  map[types.UID]map[string]bool        // volumes given to their pod's fsGroup

	unpublishing map[types.UID]bool // gone pods whose CSI volumes are being unpublished

	// The background unpublishes: ended and waited for by Close.
	bg       sync.WaitGroup
	bgCtx    context.Context
	bgCancel context.CancelFunc
}

// New validates cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("pod volumes: RootDir, Clock and Logger are required")
	}
	// Pod directories are removed by path: work with the root as the
	// kernel sees it (symlinks resolved), so that mounts beneath it are
	// recognised as such.
	cfg.RootDir = volume.Canonical(cfg.RootDir)
	m := &Manager{
		cfg:  cfg,
		log:  cfg.Logger.Named("podvolumes"),
		node: downward.Node{IP: cfg.NodeIP, RootDir: cfg.RootDir},
	}
	m.bgCtx, m.bgCancel = context.WithCancel(context.Background())
	return m, nil
}

// Close ends the unpublishes in flight (a CSI call cancelled leaves its
// volume recorded: the next start unpublishes it) and waits for them;
// none starts after it.
func (m *Manager) Close() {
	m.cmu.Lock()
	m.bgCancel()
	m.cmu.Unlock()
	m.bg.Wait()
}

// Dir is a pod's directory, <RootDir>/pods/<uid>; always directly
// beneath <RootDir>/pods, whatever the UID (volume.ChildDir).
func (m *Manager) Dir(uid types.UID) string {
	return volume.ChildDir(filepath.Join(m.cfg.RootDir, "pods"), string(uid))
}

// Cleanup removes the pod directories whose pod UID is not in active
// (pods known to the agent or present in the runtime): what a crash or a
// removal behind the agent's back left. Nothing beneath a directory is
// deleted while something is mounted there (volume.RemoveAll). Errors
// are logged; the next call tries again. Called from housekeeping, never
// concurrently with itself.
func (m *Manager) Cleanup(active map[pod.UID]bool) {
	root := filepath.Join(m.cfg.RootDir, "pods")
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	// A gone pod's CSI volumes are unpublished off housekeeping (a
	// driver may take its time), and its directory stays until they are.
	published := map[pod.UID]bool{}
	if m.cfg.CSI != nil {
		for _, uid := range m.cfg.CSI.Pods() {
			published[pod.UID(uid)] = true
			if !active[pod.UID(uid)] {
				m.unpublishAsync(uid)
			}
		}
	}
	for _, e := range entries {
		if uid := pod.UID(e.Name()); !active[uid] && !published[uid] {
			m.removeDir(filepath.Join(root, e.Name()))
		}
	}
	m.cmu.Lock()
	for uid := range m.claims {
		if !active[pod.UID(uid)] {
			delete(m.claims, uid)
		}
	}
	for uid := range m.owned {
		if !active[pod.UID(uid)] {
			delete(m.owned, uid)
		}
	}
	m.cmu.Unlock()
}

// Release tears down a finished pod's volumes — unmounted (tmpfs,
// subPath binds) and removed, as the kubelet tears down a terminated
// pod's volumes — keeping the rest of its directory until the pod goes.
func (m *Manager) Release(uid types.UID) error {
	if err := m.unpublish(context.Background(), uid); err != nil {
		return fmt.Errorf("release volumes: %w", err)
	}
	m.cmu.Lock()
	delete(m.claims, uid)
	delete(m.owned, uid)
	m.cmu.Unlock()
	dir := m.Dir(uid)
	for _, sub := range []string{"volume-subpaths", "volumes"} {
		if err := volume.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return fmt.Errorf("release volumes: %w", err)
		}
	}
	return nil
}

func (m *Manager) removeDir(dir string) {
	if err := volume.RemoveAll(dir); err != nil {
		m.log.Warn("remove directory of a gone pod", zap.String("dir", dir), zap.Error(err))
		return
	}
	m.log.Info("removed directory of a gone pod", zap.String("dir", dir))
}

// unpublish takes back the pod's CSI volumes (none without CSI).
func (m *Manager) unpublish(ctx context.Context, uid types.UID) error {
	if m.cfg.CSI == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return m.cfg.CSI.Unpublish(ctx, uid)
}

// unpublishAsync unpublishes a gone pod's CSI volumes on a goroutine of
// its own, one at a time per pod; a failure is logged and tried again at
// the next housekeeping.
func (m *Manager) unpublishAsync(uid types.UID) {
	m.cmu.Lock()
	if m.unpublishing[uid] || m.bgCtx.Err() != nil {
		m.cmu.Unlock()
		return
	}
	if m.unpublishing == nil {
		m.unpublishing = map[types.UID]bool{}
	}
	m.unpublishing[uid] = true
	m.bg.Add(1) // under cmu: never after Close's Wait began
	m.cmu.Unlock()
	go func() {
		defer m.bg.Done()
		defer func() {
			m.cmu.Lock()
			delete(m.unpublishing, uid)
			m.cmu.Unlock()
		}()
		if err := m.unpublish(m.bgCtx, uid); err != nil {
			m.log.Warn("unpublish CSI volumes of a gone pod; retrying at the next housekeeping", zap.String("podUID", string(uid)), zap.Error(err))
		}
	}()
}
