package cpumanager

import (
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// SMTAlignmentError: under full-pcpus-only, a request that is not whole
// physical cores, or more than the free whole cores hold.
type SMTAlignmentError struct {
	RequestedCPUs, CPUsPerCore int
	// AvailablePhysicalCPUs is set when free whole cores were short.
	AvailablePhysicalCPUs int
	causedByPhysicalCPUs  bool
}

func (e *SMTAlignmentError) Error() string {
	if e.causedByPhysicalCPUs {
		return fmt.Sprintf("SMT Alignment Error: not enough free physical CPUs: available physical CPUs = %d, requested CPUs = %d, CPUs per core = %d",
			e.AvailablePhysicalCPUs, e.RequestedCPUs, e.CPUsPerCore)
	}
	return fmt.Sprintf("SMT Alignment Error: requested %d cpus not multiple cpus per core = %d", e.RequestedCPUs, e.CPUsPerCore)
}

// Reason is the admission refusal reason (the kubelet's).
func (e *SMTAlignmentError) Reason() string { return "SMTAlignmentError" }

// Allocate gives the pod's containers that qualify their exclusive CPUs:
// a Guaranteed pod's containers with a whole-number CPU request. Init
// containers come first; the CPUs of an init container (not a sidecar)
// are offered again to the containers after it, which run once it is
// done. A container that already has CPUs (a restored checkpoint, a
// second admission) keeps them. All or nothing: on error nothing is
// allocated. Idempotent; called by admission.
func (m *Manager) Allocate(p *v1.Pod) error {
	if !m.static || !guaranteed(p) {
		return nil
	}
	uid := string(p.UID)
	m.mu.Lock()
	defer m.mu.Unlock()
	before := m.st.clone()
	reuse := cpuset.New()
	changed := false
	alloc := func(c *v1.Container, init bool) error {
		n := exclusiveCPUs(c)
		if n == 0 {
			return nil
		}
		set, ok := m.st.get(uid, c.Name)
		if !ok {
			var err error
			if set, err = m.allocate(n, reuse); err != nil {
				return fmt.Errorf("container %s: %w", c.Name, err)
			}
			m.st.set(uid, c.Name, set)
			m.st.defaultSet = m.st.defaultSet.Difference(set)
			changed = true
			m.log.Info("exclusive CPUs assigned", zap.String("pod", pod.FullName(p)), zap.String("uid", uid),
				zap.String("container", c.Name), zap.Stringer("cpus", set))
		}
		if init && !pod.IsSidecar(c) {
			reuse = reuse.Union(set)
		} else {
			reuse = reuse.Difference(set)
		}
		return nil
	}
	for i := range p.Spec.InitContainers {
		if err := alloc(&p.Spec.InitContainers[i], true); err != nil {
			m.st = before
			return err
		}
	}
	for i := range p.Spec.Containers {
		if err := alloc(&p.Spec.Containers[i], false); err != nil {
			m.st = before
			return err
		}
	}
	if !changed {
		return nil
	}
	if err := m.commit(); err != nil {
		m.st = before
		return fmt.Errorf("checkpoint exclusive CPUs: %w", err)
	}
	return nil
}

// allocate takes n CPUs from the free ones (shared pool minus reserved)
// and reuse. m.mu is held.
func (m *Manager) allocate(n int, reuse cpuset.CPUSet) (cpuset.CPUSet, error) {
	avail := m.st.defaultSet.Difference(m.reserved).Union(reuse)
	if m.fullPCPU {
		perCore := m.topo.CPUsPerCore()
		if n%perCore != 0 {
			return cpuset.New(), &SMTAlignmentError{RequestedCPUs: n, CPUsPerCore: perCore}
		}
		// Only whole free cores: a reserved or taken sibling makes its
		// core unusable.
		avail = m.topo.fullCores(avail)
		if n > avail.Size() {
			return cpuset.New(), &SMTAlignmentError{RequestedCPUs: n, CPUsPerCore: perCore,
				AvailablePhysicalCPUs: avail.Size(), causedByPhysicalCPUs: true}
		}
	}
	return m.topo.take(avail, n)
}

// release ends a container's exclusive assignment: its CPUs go back to
// the shared pool but those a sibling still holds (an init container's
// reused CPUs). With tombstone, an empty entry stays so that a
// re-admission after a restart does not allocate again for a container
// that will not run again. m.mu is held.
func (m *Manager) release(uid, name string, tombstone bool) cpuset.CPUSet {
	set, ok := m.st.get(uid, name)
	if !ok {
		return cpuset.New()
	}
	m.st.delete(uid, name)
	inUse := cpuset.New()
	for _, other := range m.st.assignments[uid] {
		inUse = inUse.Union(other)
	}
	back := set.Difference(inUse)
	m.st.defaultSet = m.st.defaultSet.Union(back)
	if tombstone {
		m.st.set(uid, name, cpuset.New())
	}
	return back
}

// RemoveStale releases the CPUs of every pod not in active (the sync
// loop's pods, running or wanted). Called from housekeeping.
func (m *Manager) RemoveStale(active map[pod.UID]bool) {
	if !m.static {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for uid, cs := range m.st.assignments {
		if active[pod.UID(uid)] {
			continue
		}
		for name := range cs {
			back := m.release(uid, name, false)
			m.log.Info("exclusive CPUs released: pod gone", zap.String("uid", uid), zap.String("container", name), zap.Stringer("cpus", back))
		}
		changed = true
	}
	if changed {
		if err := m.commit(); err != nil {
			m.log.Error("checkpoint CPU manager state", zap.Error(err))
		}
	}
}

// exclusiveCPUs is the number of exclusive CPUs a container of a
// Guaranteed pod gets: its CPU request when a whole number, else 0. An
// absent request defaults to the limit, as the API server does.
func exclusiveCPUs(c *v1.Container) int {
	q, ok := c.Resources.Requests[v1.ResourceCPU]
	if !ok {
		q, ok = c.Resources.Limits[v1.ResourceCPU]
	}
	if !ok || q.MilliValue()%1000 != 0 {
		return 0
	}
	return int(q.Value())
}

// guaranteed reports the Guaranteed QoS class (pod.QOSClass). Pods with
// pod-level resources are left to the shared pool.
func guaranteed(p *v1.Pod) bool {
	return p.Spec.Resources == nil && pod.QOSClass(p) == v1.PodQOSGuaranteed
}
