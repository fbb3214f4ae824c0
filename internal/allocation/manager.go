package allocation

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Config configures a Manager.
type Config struct {
	// StateDir holds the checkpoint, <StateDir>/allocated_pods_state.
	StateDir string
	// Allocatable is the node's allocatable resources: a resize whose
	// pod asks for more cpu or memory is Infeasible.
	Allocatable v1.ResourceList
	// Admit judges whether p, with its spec's resources, fits beside
	// others (their allocated resources): admission's resource check
	// (admit.Resources), wired in main. A refusal defers the resize, its
	// message the condition's. Nil admits every resize.
	Admit func(p *v1.Pod, others []*v1.Pod) (ok bool, message string)
	// ActivePods are the admitted pods neither finished nor terminating
	// (the loop's ActivePods): the others a resize must fit beside.
	// Called without the Manager's lock; nil: none.
	ActivePods func() []*v1.Pod
	// StaticCPUManager is the CPU manager's static policy: a Guaranteed
	// pod's cpu resize is Infeasible (the kubelet without
	// InPlacePodVerticalScalingExclusiveCPUs).
	StaticCPUManager bool
	// Recorder, if set, receives the resize events.
	Recorder Recorder
	Clock    clock.PassiveClock
	Logger   *zap.Logger
}

// Recorder receives events about pods.
type Recorder interface {
	Event(p *v1.Pod, eventType, reason, message string)
}

// Manager is the allocation manager. Safe for concurrent use.
type Manager struct {
	cfg Config
	dir string // the state directory (its checkpoint files: state.go)
	log *zap.Logger

	mu    sync.Mutex
	pods  map[types.UID]*podRecord
	conds map[types.UID]*resizeConditions
	// dirty: a release is not checkpointed yet.
	dirty bool
}

// New restores the checkpoint. One that cannot be read as this agent
// wrote it is moved aside and reported (what it means, what to check);
// the agent goes on with an empty state, every pod allocated its spec's
// resources again at its admission.
func New(cfg Config) (*Manager, error) {
	if cfg.StateDir == "" || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("allocation manager: StateDir, Clock and Logger are required")
	}
	m := &Manager{cfg: cfg, dir: cfg.StateDir, log: cfg.Logger.Named("allocation"),
		conds: map[types.UID]*resizeConditions{}}
	pods, path, err := readState(m.dir)
	var bad *corruptError
	switch {
	case errors.As(err, &bad):
		aside := path + ".corrupt"
		if rerr := os.Rename(path, aside); rerr != nil {
			return nil, fmt.Errorf("allocation state %s is %v, and it cannot be moved aside (%v): delete it and start nodeagent again", path, bad, rerr)
		}
		m.log.Error("allocation state is corrupt; moved aside, starting afresh. Every running pod is allocated its spec's resources again "+
			"as it is admitted: a resize that was pending (Deferred) is then taken as allocated, or refuses its pod if the node has no room for it. "+
			"Check the pods' resources (kubectl get pods -o yaml: status.containerStatuses[].allocatedResources), then delete the moved file",
			zap.String("file", path), zap.String("movedTo", aside), zap.String("why", bad.why))
		pods = map[types.UID]*podRecord{}
	case err != nil:
		return nil, err
	}
	m.pods = pods
	return m, nil
}

// resizable reports whether a container may be resized in place: app
// containers and sidecars (the kubelet's IsResizableContainer).
func resizable(c *v1.Container, init bool) bool { return !init || pod.IsSidecar(c) }

// recordOf is the allocation of p's spec.
func recordOf(p *v1.Pod) *podRecord {
	r := &podRecord{Containers: map[string]v1.ResourceRequirements{}}
	if p.Spec.Resources != nil {
		r.Pod = p.Spec.Resources.DeepCopy()
	}
	for _, list := range []struct {
		cs   []v1.Container
		init bool
	}{{p.Spec.InitContainers, true}, {p.Spec.Containers, false}} {
		for i := range list.cs {
			if c := &list.cs[i]; resizable(c, list.init) {
				r.Containers[c.Name] = *c.Resources.DeepCopy()
			}
		}
	}
	return r
}

// allocated is p with rec's resources (a copy when they differ) and
// whether they differ (the kubelet's UpdatePodFromAllocation).
func allocated(p *v1.Pod, rec *podRecord) (*v1.Pod, bool) {
	out, changed := p, false
	cp := func() {
		if !changed {
			out, changed = p.DeepCopy(), true
		}
	}
	if !apiequality.Semantic.DeepEqual(p.Spec.Resources, rec.Pod) {
		cp()
		out.Spec.Resources = rec.Pod.DeepCopy()
	}
	for _, list := range []*[]v1.Container{&p.Spec.InitContainers, &p.Spec.Containers} {
		for i := range *list {
			c := &(*list)[i]
			r, ok := rec.Containers[c.Name]
			if !ok || apiequality.Semantic.DeepEqual(c.Resources, r) {
				continue
			}
			cp()
			dst := &out.Spec.Containers
			if list == &p.Spec.InitContainers {
				dst = &out.Spec.InitContainers
			}
			(*dst)[i].Resources = *r.DeepCopy()
		}
	}
	return out, changed
}

// AllocatedPod is p with its allocated resources in place of its spec's
// (p itself when they are the same or it has no allocation). Safe from
// any goroutine; admission's view of the pods.
func (m *Manager) AllocatedPod(p *v1.Pod) *v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec := m.pods[p.UID]; rec != nil {
		p, _ = allocated(p, rec)
	}
	return p
}

// Admitted records p's allocation as it is admitted: its spec's
// resources, unless it has one already (an agent restart: what was
// allocated stands, a pending resize stays pending). Checkpointed.
func (m *Manager) Admitted(p *v1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pods[p.UID] != nil {
		return nil
	}
	m.pods[p.UID] = recordOf(p)
	if err := m.saveLocked(); err != nil {
		delete(m.pods, p.UID)
		m.log.Error("checkpoint a pod's allocation; recorded at its first sync", zap.String("pod", pod.FullName(p)), zap.Error(err))
		return err
	}
	return nil
}

func (m *Manager) saveLocked() error { return writeState(m.dir, m.pods) }

// Resize decides p's resize when its spec asks for other resources than
// those allocated, as the kubelet's handlePodResourcesResize, and returns
// p with its allocated resources (p itself when they are its spec's):
//
//   - a static pod, or one whose pod-level resources change: Infeasible;
//   - a Guaranteed pod's cpu under the static CPU manager policy:
//     Infeasible;
//   - more cpu or memory requested than the node's allocatable:
//     Infeasible ("Node didn't have enough capacity: …");
//   - not fitting beside the other active pods' allocated resources
//     (Config.Admit): Deferred with admission's message, decided again
//     at the pod's next sync;
//   - else allocated (checkpointed), PodResizeInProgress set and a
//     ResizeStarted event.
//
// PodResizePending is set (an event when it changes) or cleared
// accordingly. A pod without an allocation (its record could not be
// written at admission) is allocated its spec.
func (m *Manager) Resize(p *v1.Pod) *v1.Pod {
	m.mu.Lock()
	rec := m.pods[p.UID]
	var alloc *v1.Pod
	changed := false
	if rec != nil {
		alloc, changed = allocated(p, rec)
	}
	m.mu.Unlock()
	if rec == nil {
		if err := m.Admitted(p); err != nil {
			return p
		}
		m.clearPending(p.UID)
		return p
	}
	if !changed {
		m.clearPending(p.UID)
		return p
	}
	reason, message := m.feasible(p, alloc)
	if reason == "" {
		var others []*v1.Pod
		if m.cfg.ActivePods != nil {
			for _, o := range m.cfg.ActivePods() {
				if o.UID != p.UID {
					others = append(others, m.AllocatedPod(o))
				}
			}
		}
		if m.cfg.Admit != nil {
			if ok, msg := m.cfg.Admit(p, others); !ok {
				reason, message = v1.PodReasonDeferred, msg
			}
		}
	}
	if reason != "" {
		if m.setPending(p.UID, reason, message, p.Generation) {
			ev := EventResizeDeferred
			if reason == v1.PodReasonInfeasible {
				ev = EventResizeInfeasible
			}
			m.log.Info("pod resize pending", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)),
				zap.String("reason", reason), zap.String("message", message))
			m.event(p, v1.EventTypeWarning, ev, resizeMessage("Pod resize "+reason, p, p.Generation, message))
		}
		return alloc
	}
	m.mu.Lock()
	old := m.pods[p.UID]
	if old == nil { // released meanwhile: the pod is gone
		m.mu.Unlock()
		return alloc
	}
	next := recordOf(p)
	next.Actuated = old.Actuated
	m.pods[p.UID] = next
	if err := m.saveLocked(); err != nil {
		m.pods[p.UID] = old
		m.mu.Unlock()
		m.log.Error("checkpoint a pod's resize; decided again at its next sync", zap.String("pod", pod.FullName(p)), zap.Error(err))
		return alloc
	}
	c := m.condsLocked(p.UID)
	c.pending = nil
	c.inProgress = updated(v1.PodResizeInProgress, nil, "", "", p.Generation, metav1.NewTime(m.cfg.Clock.Now()))
	m.mu.Unlock()
	m.log.Info("pod resize allocated", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)), zap.Int64("generation", p.Generation))
	m.event(p, v1.EventTypeNormal, EventResizeStarted, resizeMessage("Pod resize started", p, p.Generation, ""))
	return p
}

// feasible is the Infeasible reason and message of resizing alloc to p,
// "" when it may be tried.
func (m *Manager) feasible(p, alloc *v1.Pod) (reason, message string) {
	switch {
	case isStatic(p):
		return v1.PodReasonInfeasible, msgStaticPod
	case !apiequality.Semantic.DeepEqual(p.Spec.Resources, alloc.Spec.Resources):
		return v1.PodReasonInfeasible, msgPodLevelResources
	case m.cfg.StaticCPUManager && pod.QOSClass(p) == v1.PodQOSGuaranteed && cpuChanged(p, alloc):
		return v1.PodReasonInfeasible, `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`
	}
	reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
	if avail, ok := m.cfg.Allocatable[v1.ResourceMemory]; ok && reqs.Memory().Value() > avail.Value() {
		return v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", reqs.Memory().Value(), avail.Value())
	}
	if avail, ok := m.cfg.Allocatable[v1.ResourceCPU]; ok && reqs.Cpu().MilliValue() > avail.MilliValue() {
		return v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", reqs.Cpu().MilliValue(), avail.MilliValue())
	}
	return "", ""
}

// cpuChanged reports a resizable container whose cpu request differs
// between a and b (requests equal limits in a Guaranteed pod).
func cpuChanged(a, b *v1.Pod) bool {
	for _, list := range []struct {
		a, b []v1.Container
		init bool
	}{{a.Spec.InitContainers, b.Spec.InitContainers, true}, {a.Spec.Containers, b.Spec.Containers, false}} {
		for i := range list.a {
			if i < len(list.b) && resizable(&list.a[i], list.init) && !list.a[i].Resources.Requests.Cpu().Equal(*list.b[i].Resources.Requests.Cpu()) {
				return true
			}
		}
	}
	return false
}

func (m *Manager) condsLocked(uid types.UID) *resizeConditions {
	c := m.conds[uid]
	if c == nil {
		c = &resizeConditions{}
		m.conds[uid] = c
	}
	return c
}

// setPending sets PodResizePending; it reports a change.
func (m *Manager) setPending(uid types.UID, reason, message string, generation int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.condsLocked(uid)
	next := updated(v1.PodResizePending, c.pending, reason, message, generation, metav1.NewTime(m.cfg.Clock.Now()))
	if next == nil {
		return false
	}
	c.pending = next
	return true
}

func (m *Manager) clearPending(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.conds[uid]; c != nil {
		c.pending = nil
	}
}

// ResizeProgress takes a sync's outcome for p (its allocated view): an
// error sets PodResizeInProgress with reason Error (a ResizeError event
// when it changes); a resize still in progress keeps the condition
// without error; none clears it, with a ResizeCompleted event when it
// was set.
func (m *Manager) ResizeProgress(p *v1.Pod, inProgress bool, err error) {
	m.mu.Lock()
	c := m.conds[p.UID]
	if c == nil {
		if err == nil && !inProgress {
			m.mu.Unlock()
			return // the common case: nothing to report
		}
		c = m.condsLocked(p.UID)
	}
	now := metav1.NewTime(m.cfg.Clock.Now())
	var ev, reason, msg string
	var gen int64
	switch {
	case err != nil:
		if next := updated(v1.PodResizeInProgress, c.inProgress, v1.PodReasonError, err.Error(), p.Generation, now); next != nil {
			c.inProgress = next
			ev, reason, msg, gen = EventResizeError, v1.EventTypeWarning, err.Error(), p.Generation
		}
	case inProgress:
		if next := updated(v1.PodResizeInProgress, c.inProgress, "", "", p.Generation, now); next != nil {
			c.inProgress = next
		}
	case c.inProgress != nil:
		ev, reason, gen = EventResizeCompleted, v1.EventTypeNormal, c.inProgress.ObservedGeneration
		c.inProgress = nil
	}
	m.mu.Unlock()
	switch ev {
	case EventResizeError:
		m.event(p, reason, ev, resizeMessage("Pod resize error", p, gen, msg))
	case EventResizeCompleted:
		m.log.Info("pod resize completed", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)), zap.Int64("generation", gen))
		m.event(p, reason, ev, resizeMessage("Pod resize completed", p, gen, ""))
	}
}

// Conditions are p's PodResizePending and PodResizeInProgress
// conditions, those set.
func (m *Manager) Conditions(uid types.UID) []v1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.conds[uid]
	if c == nil {
		return nil
	}
	var out []v1.PodCondition
	for _, cond := range []*v1.PodCondition{c.pending, c.inProgress} {
		if cond != nil {
			out = append(out, *cond.DeepCopy())
		}
	}
	return out
}

// Allocated is the resources allocated to a pod's container (an app
// container or sidecar); false when it has none.
func (m *Manager) Allocated(uid types.UID, container string) (v1.ResourceRequirements, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.pods[uid]
	if rec == nil {
		return v1.ResourceRequirements{}, false
	}
	r, ok := rec.Containers[container]
	return *r.DeepCopy(), ok
}

// Actuated is the record of container's running instance id; false when
// there is none for that instance.
func (m *Manager) Actuated(uid types.UID, container, id string) (pod.Actuated, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.pods[uid]
	if rec == nil {
		return pod.Actuated{}, false
	}
	a, ok := rec.Actuated[container]
	if !ok || a.ContainerID != id {
		return pod.Actuated{}, false
	}
	a.Resources = *a.Resources.DeepCopy()
	return a, true
}

// SetActuated records what was applied to container's instance
// a.ContainerID, replacing the record of an earlier instance.
// Checkpointed; a pod without an allocation gets one of its record only
// at its admission, so its record is kept in memory until then.
func (m *Manager) SetActuated(uid types.UID, container string, a pod.Actuated) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.pods[uid]
	if rec == nil {
		return fmt.Errorf("pod %s has no allocation", uid)
	}
	old, had := rec.Actuated[container]
	if rec.Actuated == nil {
		rec.Actuated = map[string]pod.Actuated{}
	}
	rec.Actuated[container] = a
	if err := m.saveLocked(); err != nil {
		if had {
			rec.Actuated[container] = old
		} else {
			delete(rec.Actuated, container)
		}
		return err
	}
	return nil
}

// RemoveOrphans releases the allocations and conditions of pods not in
// active (housekeeping's set: desired, being worked on, or present in
// the runtime).
func (m *Manager) RemoveOrphans(active map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	removed := 0
	for uid := range m.pods {
		if !active[uid] {
			delete(m.pods, uid)
			removed++
		}
	}
	for uid := range m.conds {
		if !active[uid] {
			delete(m.conds, uid)
		}
	}
	if removed == 0 && !m.dirty {
		return
	}
	if err := m.saveLocked(); err != nil {
		m.dirty = true
		m.log.Warn("checkpoint released allocations; retried at the next housekeeping", zap.Error(err))
		return
	}
	m.dirty = false
	m.log.Debug("released allocations of gone pods", zap.Int("pods", removed))
}

func (m *Manager) event(p *v1.Pod, eventType, reason, message string) {
	if m.cfg.Recorder != nil {
		m.cfg.Recorder.Event(p, eventType, reason, message)
	}
}
