package devicemanager

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodeagent/nodeagent/internal/devicemanager/checkpoint"
)

// Allocate gives each container of an admitted pod the devices its
// limits ask for, init containers first, as the kubelet's device manager
// does at admission: the devices of a regular init container are reused
// by the containers after it; a sidecar keeps its own. A container that
// holds its devices already (the pod admitted again after an agent
// restart) keeps them. All or none: on an error, what this call gave is
// taken back. The errors are the kubelet's (the caller words the
// refusal).
func (m *Manager) Allocate(ctx context.Context, p *v1.Pod) error {
	m.freeGone(p.UID)
	reuse := map[string]sets.Set[string]{}
	var made []string // containers given devices by this call
	undo := func() {
		m.mu.Lock()
		for _, c := range made {
			if cs := m.pods[p.UID]; cs != nil {
				delete(cs, c)
				if len(cs) == 0 {
					delete(m.pods, p.UID)
				}
			}
		}
		m.mu.Unlock()
	}
	// Init containers first, in order: a regular one's devices are
	// offered to the containers after it, a sidecar's (and an app
	// container's) are taken out of the offer.
	type step struct {
		c     *v1.Container
		lends bool
	}
	var steps []step
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		steps = append(steps, step{c, c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways})
	}
	for i := range p.Spec.Containers {
		steps = append(steps, step{&p.Spec.Containers[i], false})
	}
	for _, st := range steps {
		got, err := m.allocateContainer(ctx, p, st.c, reuse)
		if err != nil {
			undo()
			return err
		}
		if got {
			made = append(made, st.c.Name)
		}
		for res, ids := range m.containerSets(p.UID, st.c.Name) {
			if st.lends {
				reuse[res] = ids.Union(reuse[res])
			} else if reuse[res] != nil {
				reuse[res] = reuse[res].Difference(ids)
			}
		}
	}
	m.mu.Lock()
	_, holds := m.pods[p.UID]
	m.mu.Unlock()
	if !holds {
		return nil
	}
	if len(made) > 0 {
		// A pod whose devices are not on disk could lose them, or share
		// them, after a restart: refused instead, as the kubelet does.
		if err := m.writeCheckpoint(); err != nil {
			undo()
			return err
		}
	}
	m.mu.Lock()
	m.admitted.Insert(p.UID)
	m.mu.Unlock()
	return nil
}

// freeGone frees the devices of the pods admitted by this run that are
// gone (Config.Gone), but the one being admitted. Only pods that hold
// devices are asked about, without the manager's lock.
func (m *Manager) freeGone(admitting types.UID) {
	if m.cfg.Gone == nil {
		return
	}
	m.mu.Lock()
	held := m.admitted.UnsortedList()
	m.mu.Unlock()
	var gone []types.UID
	for _, uid := range held {
		if uid != admitting && m.cfg.Gone(uid) {
			gone = append(gone, uid)
		}
	}
	if len(gone) == 0 {
		return
	}
	m.mu.Lock()
	var freed []types.UID
	for _, uid := range gone {
		m.admitted.Delete(uid)
		if _, ok := m.pods[uid]; ok {
			delete(m.pods, uid)
			freed = append(freed, uid)
		}
	}
	m.mu.Unlock()
	if len(freed) > 0 {
		m.log.Info("devices of gone pods freed", zap.Any("pods", freed))
		m.saveCheckpoint()
	}
}

// containerSets is a container's devices by resource.
func (m *Manager) containerSets(uid types.UID, container string) map[string]sets.Set[string] {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]sets.Set[string]{}
	for res, a := range m.entry(uid, container, false) {
		out[res] = a.set()
	}
	return out
}

// allocateContainer gives one container its devices of each device
// resource in its limits; got tells whether it was given any. On an
// error the container holds none of the devices this call gave it.
func (m *Manager) allocateContainer(ctx context.Context, p *v1.Pod, c *v1.Container, reuse map[string]sets.Set[string]) (got bool, err error) {
	var given []string
	defer func() {
		if err == nil {
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		rs := m.entry(p.UID, c.Name, false)
		for _, res := range given {
			delete(rs, res)
		}
		if cs := m.pods[p.UID]; cs != nil && len(cs[c.Name]) == 0 {
			delete(cs, c.Name)
			if len(cs) == 0 {
				delete(m.pods, p.UID)
			}
		}
		got = false
	}()
	for _, name := range slices.Sorted(maps.Keys(c.Resources.Limits)) {
		res, q := string(name), c.Resources.Limits[name]
		needed := int(q.Value())
		ep, ids, err := m.choose(ctx, p.UID, c.Name, res, needed, reuse[res])
		if err != nil || ids == nil {
			if err != nil {
				return got, err
			}
			continue
		}
		start := m.cfg.Clock.Now()
		cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
		resp, err := ep.client.Allocate(cctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: sets.List(ids)}}})
		cancel()
		if m.cfg.OnAllocate != nil {
			m.cfg.OnAllocate(res, m.cfg.Clock.Since(start))
		}
		m.mu.Lock()
		rs := m.entry(p.UID, c.Name, false)
		switch {
		case err != nil:
			delete(rs, res)
			err = fmt.Errorf("device plugin Allocate rpc failed with err: %w", err)
		case len(resp.ContainerResponses) != 1:
			delete(rs, res)
			err = fmt.Errorf("no containers return in allocation response %v", resp)
		default:
			rs[res].resp = resp.ContainerResponses[0]
			given = append(given, res)
			got = true
		}
		m.mu.Unlock()
		if err != nil {
			return got, err
		}
		m.log.Info("devices allocated", zap.String("pod", p.Namespace+"/"+p.Name), zap.String("container", c.Name),
			zap.String("resource", res), zap.Strings("devices", sets.List(ids)), zap.Duration("took", m.cfg.Clock.Since(start)))
	}
	return got, nil
}

// choose picks needed devices of res for the container and reserves
// them (an entry without a response), returning its plugin; nil ids when
// res is no device resource or the container holds its devices already.
// Devices of earlier init containers (reuse) go first, then the plugin's
// preferred ones if it offers a preference (asked without the lock: the
// choice is made again from what is free once it answered), then the
// others in order.
func (m *Manager) choose(ctx context.Context, uid types.UID, container, res string, needed int, reuse sets.Set[string]) (*endpoint, sets.Set[string], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ep, chosen, available, err := m.candidates(uid, container, res, needed, reuse)
	if err != nil || ep == nil {
		return nil, nil, err
	}
	if chosen.Len() < needed && ep.opts.GetGetPreferredAllocationAvailable() {
		m.mu.Unlock()
		preferred, err := m.preferred(ctx, ep, available.Union(chosen), chosen, needed)
		m.mu.Lock()
		if err != nil {
			return nil, nil, err
		}
		if ep, chosen, available, err = m.candidates(uid, container, res, needed, reuse); err != nil || ep == nil {
			return nil, nil, err
		}
		take(chosen, needed, sets.List(sets.New(preferred...).Intersection(available)))
	}
	if !take(chosen, needed, sets.List(available)) {
		return nil, nil, fmt.Errorf("unexpectedly allocated less resources than required. Requested: %d, Got: %d", needed, chosen.Len())
	}
	ids := checkpoint.DevicesPerNUMA{}
	for _, id := range sets.List(chosen) {
		d := m.devices[res][id]
		if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
			ids[noTopology] = append(ids[noTopology], id)
			continue
		}
		for _, n := range d.Topology.Nodes {
			ids[n.ID] = append(ids[n.ID], id)
		}
	}
	m.entry(uid, container, true)[res] = &alloc{ids: ids}
	return ep, chosen, nil
}

// candidates is, under the lock, the plugin of res, the devices of reuse
// the container takes first, and the free healthy devices beside them;
// a nil plugin with no error when there is nothing to do. The errors are
// the kubelet's.
func (m *Manager) candidates(uid types.UID, container, res string, needed int, reuse sets.Set[string]) (ep *endpoint, chosen, available sets.Set[string], err error) {
	if !m.isDeviceResource(res) || needed <= 0 {
		return nil, nil, nil, nil
	}
	if a := m.entry(uid, container, false)[res]; a != nil {
		if have := a.set().Len(); have != needed {
			return nil, nil, nil, fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, container, res, have, needed)
		}
		return nil, nil, nil, nil
	}
	ep = m.plugins[res]
	if _, ok := m.devices[res]; !ok && ep == nil {
		return nil, nil, nil, fmt.Errorf("cannot allocate unregistered device %s", res)
	}
	healthy := sets.New[string]()
	for id, d := range m.devices[res] {
		if d.Health == pluginapi.Healthy {
			healthy.Insert(id)
		}
	}
	if ep == nil || healthy.Len() == 0 {
		return nil, nil, nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", res)
	}
	chosen = sets.New[string]()
	take(chosen, needed, sets.List(reuse.Intersection(healthy)))
	available = healthy.Difference(m.allocatedLocked()[res]).Difference(chosen)
	if available.Len() < needed-chosen.Len() {
		return nil, nil, nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", res, needed-chosen.Len(), available.Len())
	}
	return ep, chosen, available, nil
}

// take adds ids to chosen, in order, until it holds needed; it reports
// whether it does.
func take(chosen sets.Set[string], needed int, ids []string) bool {
	for _, id := range ids {
		if chosen.Len() >= needed {
			break
		}
		chosen.Insert(id)
	}
	return chosen.Len() >= needed
}

// preferred asks the plugin which devices it prefers (called without
// the lock).
func (m *Manager) preferred(ctx context.Context, ep *endpoint, available, mustInclude sets.Set[string], size int) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	resp, err := ep.client.GetPreferredAllocation(cctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: sets.List(available), MustIncludeDeviceIDs: sets.List(mustInclude), AllocationSize: int32(size),
	}}})
	if err != nil {
		return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %w", err)
	}
	if len(resp.ContainerResponses) == 0 {
		return nil, nil
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// MutateConfig puts a container's devices into its CRI config, as the
// kubelet's GetDeviceRunContainerOptions: the plugins' environment
// variables (before the container's own, which win), mounts, device
// nodes, annotations and CDI device names, the first of each key kept;
// a plugin that asks for it is told first (PreStartContainer, 30s).
func (m *Manager) MutateConfig(ctx context.Context, p *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
	type pre struct {
		ep  *endpoint
		res string
		ids []string
	}
	var calls []pre
	var resps []*pluginapi.ContainerAllocateResponse
	m.mu.Lock()
	rs := m.entry(p.UID, c.Name, false)
	for _, res := range slices.Sorted(maps.Keys(rs)) {
		a := rs[res]
		if a.resp == nil {
			continue
		}
		resps = append(resps, a.resp)
		// A plugin away (restarting, or not back yet after an agent
		// restart) is needed only to be told first: the saved answer
		// serves, as the kubelet's stopped endpoint does.
		switch ep := m.plugins[res]; {
		case ep != nil && ep.opts.GetPreStartRequired():
			calls = append(calls, pre{ep, res, sets.List(a.set())})
		case ep == nil && m.lastOpts[res].GetPreStartRequired():
			m.mu.Unlock()
			return fmt.Errorf("endpoint not found in cache for a registered resource: %s", res)
		}
	}
	m.mu.Unlock()
	for _, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, pluginapi.KubeletPreStartContainerRPCTimeoutInSecs*time.Second)
		_, err := call.ep.client.PreStartContainer(cctx, &pluginapi.PreStartContainerRequest{DevicesIds: call.ids})
		cancel()
		if err != nil {
			return fmt.Errorf("device plugin PreStartContainer rpc failed with err: %w", err)
		}
	}
	envs, mounts, devs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	cdi := map[string]bool{}
	var env []*runtimeapi.KeyValue
	for _, r := range resps {
		for _, k := range slices.Sorted(maps.Keys(r.Envs)) {
			if !envs[k] {
				envs[k] = true
				env = append(env, &runtimeapi.KeyValue{Key: k, Value: []byte(r.Envs[k])})
			}
		}
		for _, mt := range r.Mounts {
			if !mounts[mt.ContainerPath] {
				mounts[mt.ContainerPath] = true
				cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: mt.ContainerPath, HostPath: mt.HostPath, Readonly: mt.ReadOnly})
			}
		}
		for _, d := range r.Devices {
			if !devs[d.ContainerPath] {
				devs[d.ContainerPath] = true
				cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
			}
		}
		for _, k := range slices.Sorted(maps.Keys(r.Annotations)) {
			if cfg.Annotations == nil {
				cfg.Annotations = map[string]string{}
			}
			if _, ok := cfg.Annotations[k]; !ok {
				cfg.Annotations[k] = r.Annotations[k]
			}
		}
		for _, d := range r.CdiDevices {
			if d.Name != "" && !cdi[d.Name] {
				cdi[d.Name] = true
				cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: d.Name})
			}
		}
	}
	cfg.Envs = append(env, cfg.Envs...)
	return nil
}

// ContainerDevicesByNUMA is a container's devices by resource and NUMA
// node (-1: no topology), for the pod resources API.
func (m *Manager) ContainerDevicesByNUMA(uid types.UID, container string) map[string]map[int64][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]map[int64][]string{}
	for res, a := range m.entry(uid, container, false) {
		if a.resp != nil {
			out[res] = maps.Clone(a.ids)
		}
	}
	return out
}

// HealthyDevices is each resource's healthy devices, for the pod
// resources API's allocatable devices.
func (m *Manager) HealthyDevices() map[string][]*pluginapi.Device {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]*pluginapi.Device{}
	for res, devs := range m.devices {
		for _, id := range slices.Sorted(maps.Keys(devs)) {
			if devs[id].Health == pluginapi.Healthy {
				out[res] = append(out[res], devs[id])
			}
		}
	}
	return out
}
