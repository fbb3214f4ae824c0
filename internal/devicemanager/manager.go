package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/devicemanager/checkpoint"
)

const (
	// SocketName is the registration socket in the plugin directory.
	SocketName = "kubelet.sock"
	// stopGracePeriod is how long a resource whose plugin went stays in
	// the node's capacity (all its devices unhealthy) before it goes (the
	// kubelet's endpointStopGracePeriod).
	stopGracePeriod = 5 * time.Minute
	// noTopology is the NUMA node a device without topology is filed
	// under in the checkpoint (the kubelet's nodeWithoutTopology).
	noTopology = -1
)

// Config wires a Manager.
type Config struct {
	// Dir is the device plugin directory, <root-dir>/device-plugins: the
	// registration socket, the plugins' sockets and the checkpoint.
	Dir string
	// CallTimeout bounds each call to a plugin but ListAndWatch (10s);
	// PreStartContainer has the kubelet's 30s.
	CallTimeout time.Duration
	// Gone, if set, tells whether a pod has finished or left the node
	// (the pod manager's view): an allocation then frees such pods'
	// devices first, as the kubelet's frees those of inactive pods, so a
	// pod placed right after another was deleted gets its devices without
	// waiting for housekeeping. Only pods this run has seen admitted are
	// asked about: one restored from the checkpoint may not have been
	// admitted again yet.
	Gone func(uid types.UID) bool
	// OnRegister and OnAllocate, if set, observe each registration
	// request and how long each plugin's Allocate took (the kubelet's
	// device plugin metrics).
	OnRegister func(resource string)
	OnAllocate func(resource string, took time.Duration)
	// OnChange, if set, is called (without the manager's lock) when a
	// resource's devices or health change: the node's capacity did.
	OnChange func()
	Clock    clock.Clock
	Logger   *zap.Logger
}

// Manager is the node's device manager: the plugins registered, their
// devices and health, and the devices allocated to each container,
// checkpointed in the kubelet's file.
type Manager struct {
	cfg Config
	log *zap.Logger

	mu        sync.Mutex
	plugins   map[string]*endpoint                       // resource → its plugin (none: never registered, or gone)
	devices   map[string]map[string]*pluginapi.Device    // resource → ID → device, as last listed
	stoppedAt map[string]time.Time                       // resource → when its plugin went
	removed   sets.Set[string]                           // resources gone past the grace period: reported as 0
	pods      map[types.UID]map[string]map[string]*alloc // pod → container → resource
	admitted  sets.Set[types.UID]                        // pods admitted by this run holding devices (Gone may free them)
	lastOpts  map[string]*pluginapi.DevicePluginOptions  // resource → its plugin's options when last registered
	stopped   bool                                       // Run ended: no plugin is taken any more
	server    *grpc.Server
	// wmu orders checkpoint writes: each writes a snapshot taken under it.
	wmu sync.Mutex
}

// alloc is one container's devices of one resource and the plugin's
// answer to their Allocate (nil while the call is in flight).
type alloc struct {
	ids  checkpoint.DevicesPerNUMA
	resp *pluginapi.ContainerAllocateResponse
}

func (a *alloc) set() sets.Set[string] {
	s := sets.New[string]()
	for _, ids := range a.ids {
		s.Insert(ids...)
	}
	return s
}

// New returns a Manager with the allocations of its checkpoint (a
// checkpoint that does not read is logged and set aside: allocations of
// running containers are then unknown, as with the kubelet). The
// resources it names are registered with no device until their plugins
// register again.
func New(cfg Config) (*Manager, error) {
	if cfg.Dir == "" || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("devicemanager: Dir, Clock and Logger are required")
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	m := &Manager{
		cfg: cfg, log: cfg.Logger.Named("devicemanager"),
		plugins: map[string]*endpoint{}, devices: map[string]map[string]*pluginapi.Device{},
		stoppedAt: map[string]time.Time{}, removed: sets.New[string](), lastOpts: map[string]*pluginapi.DevicePluginOptions{},
		pods: map[types.UID]map[string]map[string]*alloc{}, admitted: sets.New[types.UID](),
	}
	cp, err := checkpoint.Read(cfg.Dir)
	if err != nil {
		m.log.Error("device allocations not restored; continuing without them", zap.Error(err))
		return m, nil
	}
	if cp == nil {
		return m, nil
	}
	for _, e := range cp.Entries() {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			m.log.Warn("device allocation in the checkpoint does not decode; dropped", zap.String("podUID", e.PodUID),
				zap.String("container", e.ContainerName), zap.String("resource", e.ResourceName), zap.Error(err))
			continue
		}
		m.entry(types.UID(e.PodUID), e.ContainerName, true)[e.ResourceName] = &alloc{ids: e.DeviceIDs, resp: resp}
	}
	for res := range cp.Registered() {
		m.devices[res] = map[string]*pluginapi.Device{}
		m.stoppedAt[res] = cfg.Clock.Now()
	}
	m.log.Info("device allocations restored", zap.Int("entries", len(cp.Entries())), zap.Int("resources", len(cp.Registered())))
	return m, nil
}

// entry is the container's allocations by resource, made when create.
func (m *Manager) entry(uid types.UID, container string, create bool) map[string]*alloc {
	cs := m.pods[uid]
	if cs == nil {
		if !create {
			return nil
		}
		cs = map[string]map[string]*alloc{}
		m.pods[uid] = cs
	}
	rs := cs[container]
	if rs == nil && create {
		rs = map[string]*alloc{}
		cs[container] = rs
	}
	return rs
}

// Run serves the registration socket until ctx ends; plugin sockets left
// in the directory by a previous run are removed first (their plugins
// see the new registration socket and register again), the checkpoint
// kept.
func (m *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(m.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("device plugin directory: %w", err)
	}
	m.removeSockets()
	ln, err := listenUnix(filepath.Join(m.cfg.Dir, SocketName))
	if err != nil {
		return fmt.Errorf("device plugin registration socket: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registration{m: m})
	m.mu.Lock()
	m.server = srv
	m.mu.Unlock()
	m.log.Info("device plugin registration serving", zap.String("socket", filepath.Join(m.cfg.Dir, SocketName)))
	stop := context.AfterFunc(ctx, srv.Stop)
	defer stop()
	err = srv.Serve(ln)
	m.mu.Lock()
	m.stopped = true
	for res, ep := range m.plugins {
		ep.close()
		delete(m.plugins, res)
	}
	m.mu.Unlock()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// removeSockets removes the sockets in the plugin directory.
func (m *Manager) removeSockets() {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(m.cfg.Dir, e.Name())); err != nil {
			m.log.Warn("remove a stale device plugin socket", zap.String("socket", e.Name()), zap.Error(err))
		}
	}
}

// listed records a plugin's devices (ListAndWatch).
func (m *Manager) listed(ep *endpoint, devs []*pluginapi.Device) {
	m.mu.Lock()
	if m.plugins[ep.resource] != ep {
		m.mu.Unlock()
		return // replaced by a newer registration
	}
	byID := make(map[string]*pluginapi.Device, len(devs))
	healthy := 0
	for _, d := range devs {
		byID[d.ID] = d
		if d.Health == pluginapi.Healthy {
			healthy++
		}
	}
	m.devices[ep.resource] = byID
	delete(m.stoppedAt, ep.resource)
	m.removed.Delete(ep.resource)
	m.mu.Unlock()
	m.log.Info("device plugin listed its devices", zap.String("resource", ep.resource), zap.Int("devices", len(devs)), zap.Int("healthy", healthy))
	m.saveCheckpoint()
	m.changed()
}

// gone records that a plugin's stream ended: its devices are unhealthy
// until it registers again, and the resource goes from the node after
// the grace period.
func (m *Manager) gone(ep *endpoint, err error) {
	m.mu.Lock()
	if m.plugins[ep.resource] != ep {
		m.mu.Unlock()
		return
	}
	delete(m.plugins, ep.resource)
	for _, d := range m.devices[ep.resource] {
		d.Health = pluginapi.Unhealthy
	}
	m.stoppedAt[ep.resource] = m.cfg.Clock.Now()
	m.mu.Unlock()
	ep.close()
	m.log.Warn("device plugin went; its devices are unhealthy until it registers again", zap.String("resource", ep.resource), zap.Error(err))
	m.changed()
}

func (m *Manager) changed() {
	if m.cfg.OnChange != nil {
		m.cfg.OnChange()
	}
}

// Capacity is the device resources in the node's status: capacity
// counts every device, allocatable the healthy ones; a resource whose
// plugin went more than the grace period ago is reported as 0 (and
// forgotten).
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	now := m.cfg.Clock.Now()
	var expired bool
	for res, at := range m.stoppedAt {
		if now.Sub(at) >= stopGracePeriod {
			delete(m.stoppedAt, res)
			delete(m.devices, res)
			m.removed.Insert(res)
			expired = true
			m.log.Info("device plugin resource removed from the node", zap.String("resource", res))
		}
	}
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	for res := range m.removed {
		capacity[v1.ResourceName(res)] = *resource.NewQuantity(0, resource.DecimalSI)
		allocatable[v1.ResourceName(res)] = *resource.NewQuantity(0, resource.DecimalSI)
	}
	for res, devs := range m.devices {
		healthy := 0
		for _, d := range devs {
			if d.Health == pluginapi.Healthy {
				healthy++
			}
		}
		capacity[v1.ResourceName(res)] = *resource.NewQuantity(int64(len(devs)), resource.DecimalSI)
		allocatable[v1.ResourceName(res)] = *resource.NewQuantity(int64(healthy), resource.DecimalSI)
	}
	m.mu.Unlock()
	if expired {
		m.saveCheckpoint()
	}
	return capacity, allocatable
}

// AdmissionAllocatable is Capacity's allocatable, raised to what the
// admitted pods hold where they hold more (the kubelet's
// sanitizeNodeAllocatable): right after an agent restart a plugin has
// not registered again, and the pods that run with its devices are
// admitted again all the same. Gone pods' devices are freed first.
func (m *Manager) AdmissionAllocatable() v1.ResourceList {
	m.freeGone("") // the pod being admitted is new: none of this run's
	_, allocatable := m.Capacity()
	m.mu.Lock()
	defer m.mu.Unlock()
	for res, ids := range m.allocatedLocked() {
		name := v1.ResourceName(res)
		if q, ok := allocatable[name]; !ok || q.Value() < int64(ids.Len()) {
			allocatable[name] = *resource.NewQuantity(int64(ids.Len()), resource.DecimalSI)
		}
	}
	return allocatable
}

// allocatedLocked is every allocated device by resource.
func (m *Manager) allocatedLocked() map[string]sets.Set[string] {
	out := map[string]sets.Set[string]{}
	for _, cs := range m.pods {
		for _, rs := range cs {
			for res, a := range rs {
				if out[res] == nil {
					out[res] = sets.New[string]()
				}
				out[res] = out[res].Union(a.set())
			}
		}
	}
	return out
}

// isDeviceResource: a resource a plugin registered (now or before the
// agent restarted) or that some container holds.
func (m *Manager) isDeviceResource(res string) bool {
	if _, ok := m.devices[res]; ok {
		return true
	}
	_, ok := m.allocatedLocked()[res]
	return ok
}

// RemoveStale frees the devices of every pod not in running (the loop's
// pods not finished) that Gone (when set) confirms gone — a finished
// pod keeps its devices until its containers stopped: the kubelet's
// UpdateAllocatedDevices.
func (m *Manager) RemoveStale(running map[types.UID]bool) {
	m.mu.Lock()
	var gone []types.UID
	for uid := range m.pods {
		if !running[uid] && (m.cfg.Gone == nil || m.cfg.Gone(uid)) {
			gone = append(gone, uid)
			delete(m.pods, uid)
		}
	}
	for uid := range m.admitted {
		if !running[uid] {
			m.admitted.Delete(uid)
		}
	}
	m.mu.Unlock()
	if len(gone) == 0 {
		return
	}
	m.log.Info("devices of finished pods freed", zap.Any("pods", gone))
	m.saveCheckpoint()
}

// saveCheckpoint writes the checkpoint, logging a failure (the next
// write carries the state).
func (m *Manager) saveCheckpoint() {
	if err := m.writeCheckpoint(); err != nil {
		m.log.Error("write the device manager checkpoint", zap.Error(err))
	}
}

// writeCheckpoint writes the allocations and the healthy devices.
func (m *Manager) writeCheckpoint() error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mu.Lock()
	var entries []checkpoint.PodDevicesEntry
	for uid, cs := range m.pods {
		for name, rs := range cs {
			for res, a := range rs {
				if a.resp == nil {
					continue // Allocate in flight
				}
				b, err := proto.Marshal(a.resp)
				if err != nil {
					continue
				}
				entries = append(entries, checkpoint.PodDevicesEntry{PodUID: string(uid), ContainerName: name, ResourceName: res, DeviceIDs: a.ids, AllocResp: b})
			}
		}
	}
	registered := map[string][]string{}
	for res, devs := range m.devices {
		ids := []string{}
		for id, d := range devs {
			if d.Health == pluginapi.Healthy {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		registered[res] = ids
	}
	m.mu.Unlock()
	slices.SortFunc(entries, func(a, b checkpoint.PodDevicesEntry) int {
		return strings.Compare(a.PodUID+"/"+a.ContainerName+"/"+a.ResourceName, b.PodUID+"/"+b.ContainerName+"/"+b.ResourceName)
	})
	if err := checkpoint.New(entries, registered).Write(m.cfg.Dir); err != nil {
		return fmt.Errorf("failed to write checkpoint file %q: %w", checkpoint.FileName, err)
	}
	return nil
}
