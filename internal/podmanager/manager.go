package podmanager

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// State is what the loop decided about a pod; doc.go lists them.
type State uint8

const (
	// Unknown: the Manager holds nothing about the pod.
	Unknown State = iota
	// Admitted: wanted; its worker syncs it.
	Admitted
	// Held: admitted, and waits for the previous pod of its full name to
	// be killed (an edited static pod) before its worker starts.
	Held
	// Finished: admitted and over (a terminal phase, or its
	// activeDeadlineSeconds passed): stopped, kept until it is removed.
	Finished
	// Refused: the admit chain turned it down; never run.
	Refused
	// Evicted: ended for the node's sake; its status stays Failed until
	// its source drops it.
	Evicted
	// Terminating: being killed — removed from its source, deleted, or an
	// orphan — and not wanted any more.
	Terminating
)

var stateNames = [...]string{"unknown", "admitted", "held", "finished", "refused", "evicted", "terminating"}

func (s State) String() string { return stateNames[s] }

// WorkerView is the loop's view of its pod workers: whether uid has one
// (ok) and whether it still syncs the pod (syncing: neither finished nor
// terminating). It must be safe from any goroutine; the Manager calls it
// without its own lock held.
type WorkerView func(uid pod.UID) (syncing, ok bool)

// Reader is the read-only view of the desired pods. Every method is safe
// from any goroutine; slices returned are the caller's, the pods in them
// shared (read only).
type Reader interface {
	// GetPodByUID returns the newest spec of uid: admitted (held and
	// finished too), refused, evicted, or being killed when its spec is
	// known (an orphan's is not).
	GetPodByUID(uid pod.UID) (*v1.Pod, bool)
	// GetPodByFullName returns the admitted pod named fullName
	// (namespace/name); of two (one held behind the other), the one that
	// is not held.
	GetPodByFullName(fullName string) (*v1.Pod, bool)
	// GetPodByMirrorPod returns the static pod mirror stands for: the
	// admitted or refused pod of its full name that it mirrors
	// (IsMirrorOf).
	GetPodByMirrorPod(mirror *v1.Pod) (*v1.Pod, bool)
	// IsAdmitted reports whether uid is admitted (held and finished
	// too): a pod of the desired set.
	IsAdmitted(uid pod.UID) bool
	// State is uid's state (Unknown when the Manager holds nothing).
	State(uid pod.UID) State
	// IsTerminating reports whether uid is being killed (an evicted pod
	// too, until its kill ended).
	IsTerminating(uid pod.UID) bool
	// Pods are the admitted pods — held and finished ones too — by full
	// name, then UID.
	Pods() []*v1.Pod
	// ActivePods are the admitted pods whose worker syncs them: neither
	// held, finished nor being killed (what eviction ranks and resizes fit
	// beside), by full name, then UID.
	ActivePods() []*v1.Pod
}

// Manager owns the desired pods. Its writer methods are the sync loop's
// (see doc.go); its Reader methods are anyone's.
type Manager struct {
	mu sync.RWMutex
	// pods are the admitted pods, by UID.
	pods map[pod.UID]*v1.Pod
	// refused are the pods the admit chain turned down, and the evicted
	// ones (evicted), until their source drops them.
	refused map[pod.UID]*v1.Pod
	evicted map[pod.UID]bool
	// held is, per full name, the pod that waits for the kill of the
	// pods of that name in terminating to end.
	held map[string]*v1.Pod
	// terminating is, per full name, the UIDs being killed; killing their
	// specs (nil for an orphan).
	terminating map[string]map[pod.UID]bool
	killing     map[pod.UID]*v1.Pod
	workers     WorkerView
}

var _ Reader = (*Manager)(nil)

// New returns an empty Manager.
func New() *Manager {
	return &Manager{
		pods:        map[pod.UID]*v1.Pod{},
		refused:     map[pod.UID]*v1.Pod{},
		evicted:     map[pod.UID]bool{},
		held:        map[string]*v1.Pod{},
		terminating: map[string]map[pod.UID]bool{},
		killing:     map[pod.UID]*v1.Pod{},
	}
}

// SetWorkers gives the Manager the loop's view of its workers (whether
// an admitted pod is finished). Until it is set every admitted pod that
// is not held counts as synced by its worker. Called once, before the
// loop runs.
func (m *Manager) SetWorkers(v WorkerView) {
	m.mu.Lock()
	m.workers = v
	m.mu.Unlock()
}

// Set records p as admitted, or its newer spec.
func (m *Manager) Set(p *v1.Pod) {
	m.mu.Lock()
	m.pods[p.UID] = p
	m.mu.Unlock()
}

// Delete drops p from the admitted pods (a no-op when it is not one),
// and from the held one of its name; it returns whether p was held (it
// never started).
func (m *Manager) Delete(p *v1.Pod) (wasHeld bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.pods, p.UID)
	name := pod.FullName(p)
	if h := m.held[name]; h != nil && h.UID == p.UID {
		delete(m.held, name)
		return true
	}
	return false
}

// Refuse records p (or its newer spec) as refused by admission.
func (m *Manager) Refuse(p *v1.Pod) {
	m.mu.Lock()
	m.refused[p.UID] = p
	m.mu.Unlock()
}

// Evict moves the admitted pod uid to the evicted ones and returns it;
// false when uid is not admitted (gone meanwhile).
func (m *Manager) Evict(uid pod.UID) (*v1.Pod, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pods[uid]
	if !ok {
		return nil, false
	}
	delete(m.pods, uid)
	m.refused[uid] = p
	m.evicted[uid] = true
	return p, true
}

// Forget drops a refused or evicted pod (its source dropped it); it
// returns whether it was one.
func (m *Manager) Forget(uid pod.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.refused[uid]
	delete(m.refused, uid)
	delete(m.evicted, uid)
	return ok
}

// Hold decides whether p's worker may start: not while another pod of
// its full name is being killed. Then p is held (replacing the pod held
// before it), and Hold returns true, whether no pod of that name was held
// before (first) and how many are being killed. Otherwise p is no longer
// held, and Hold returns false.
func (m *Manager) Hold(p *v1.Pod) (held, first bool, terminating int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name := pod.FullName(p)
	if others := m.terminating[name]; len(others) > 0 && !others[p.UID] {
		_, already := m.held[name]
		m.held[name] = p
		return true, !already, len(others)
	}
	if h, ok := m.held[name]; ok && h.UID == p.UID {
		delete(m.held, name)
	}
	return false, false, 0
}

// StartTermination records that uid, under the full name name, is being
// killed; p is its newest spec (nil: an orphan, or unchanged).
func (m *Manager) StartTermination(name string, uid pod.UID, p *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.terminating[name] == nil {
		m.terminating[name] = map[pod.UID]bool{}
	}
	m.terminating[name][uid] = true
	if p != nil || m.killing[uid] == nil {
		m.killing[uid] = p
	}
}

// EndTermination records that uid's kill under name ended (or that it
// was re-added before it ended). When no pod of that name is being
// killed any more, the pod held for that name, if any, is no longer held
// and is returned: its worker may start.
func (m *Manager) EndTermination(name string, uid pod.UID) (next *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.terminating[name]
	if !set[uid] {
		return nil
	}
	delete(set, uid)
	delete(m.killing, uid)
	if len(set) > 0 {
		return nil
	}
	delete(m.terminating, name)
	next = m.held[name]
	delete(m.held, name)
	return next
}

// GetPodByUID implements Reader.
func (m *Manager) GetPodByUID(uid pod.UID) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if p, ok := m.pods[uid]; ok {
		return p, true
	}
	if p, ok := m.refused[uid]; ok {
		return p, true
	}
	if p := m.killing[uid]; p != nil {
		return p, true
	}
	return nil, false
}

// GetPodByFullName implements Reader. It looks through the admitted pods
// (a node runs a few hundred at most).
func (m *Manager) GetPodByFullName(fullName string) (*v1.Pod, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var found *v1.Pod
	for _, p := range m.pods {
		if pod.FullName(p) != fullName {
			continue
		}
		if h := m.held[fullName]; h == nil || h.UID != p.UID {
			return p, true
		}
		found = p
	}
	return found, found != nil
}

// GetPodByMirrorPod implements Reader.
func (m *Manager) GetPodByMirrorPod(mirror *v1.Pod) (*v1.Pod, bool) {
	if !IsMirror(mirror) {
		return nil, false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	name := pod.FullName(mirror)
	for _, set := range []map[pod.UID]*v1.Pod{m.pods, m.refused} {
		for _, p := range set {
			if pod.FullName(p) == name && IsStatic(p) && IsMirrorOf(mirror, p) {
				return p, true
			}
		}
	}
	return nil, false
}

// IsAdmitted implements Reader.
func (m *Manager) IsAdmitted(uid pod.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.pods[uid]
	return ok
}

// State implements Reader.
func (m *Manager) State(uid pod.UID) State {
	m.mu.RLock()
	p, admitted := m.pods[uid]
	_, refused := m.refused[uid]
	evicted, killing := m.evicted[uid], false
	if _, ok := m.killing[uid]; ok {
		killing = true
	}
	held := admitted && m.held[pod.FullName(p)] != nil && m.held[pod.FullName(p)].UID == uid
	view := m.workers
	m.mu.RUnlock()
	switch {
	case held:
		return Held
	case admitted:
		if view != nil {
			if syncing, ok := view(uid); ok && !syncing {
				return Finished
			}
		}
		return Admitted
	case evicted:
		return Evicted
	case refused:
		return Refused
	case killing:
		return Terminating
	}
	return Unknown
}

// IsTerminating implements Reader.
func (m *Manager) IsTerminating(uid pod.UID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.killing[uid]
	return ok
}

// Pods implements Reader.
func (m *Manager) Pods() []*v1.Pod {
	out := m.Unordered()
	sortPods(out)
	return out
}

// Unordered is Pods in no order: the loop's own reads (admission beside
// the others, housekeeping), which need no sort on their path.
func (m *Manager) Unordered() []*v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(m.pods))
	for _, p := range m.pods {
		out = append(out, p)
	}
	return out
}

// ActivePods implements Reader: the admitted pods that are not held and
// whose worker syncs them.
func (m *Manager) ActivePods() []*v1.Pod {
	m.mu.RLock()
	out := make([]*v1.Pod, 0, len(m.pods))
	for uid, p := range m.pods {
		if h := m.held[pod.FullName(p)]; h != nil && h.UID == uid {
			continue
		}
		out = append(out, p)
	}
	view := m.workers
	m.mu.RUnlock()
	if view != nil {
		kept := out[:0]
		for _, p := range out {
			if syncing, ok := view(p.UID); ok && syncing {
				kept = append(kept, p)
			}
		}
		out = kept
	}
	sortPods(out)
	return out
}

func sortPods(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pod.FullName(pods[i]), pod.FullName(pods[j])
		if a != b {
			return a < b
		}
		return pods[i].UID < pods[j].UID
	})
}
