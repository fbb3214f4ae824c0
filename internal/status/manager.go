package status

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// Manager publishes pod statuses as files: <Dir>/<namespace>_<name>.json,
// each a whole v1.Pod (metadata, spec, status). It keeps the start time
// and condition transition times across syncs and writes only on change.
type Manager struct {
	dir         string
	runtimeName string
	hostIP      string
	clock       clock.PassiveClock
	log         *zap.Logger

	node string

	mu sync.Mutex
	// owner is the UID whose status a file name holds: an edited static
	// pod has a new UID but the same name, and the old one's removal must
	// not delete the new one's files.
	owner    map[string]pod.UID
	last     map[pod.UID]v1.PodStatus
	problems map[string]map[string]string
	// events records the pods' events; the Manager moves their files'
	// ownership with its own and removes them with the pod.
	events *Events
	// pods is the newest spec published per UID, so that a status can be
	// rewritten without a sync (terminating, runtime unreachable).
	pods map[pod.UID]*v1.Pod
	// terminating holds when each pod's termination began, with its grace
	// period: published as metadata.deletionTimestamp, which is what makes
	// kubectl (and `nodeagent pods`) show Terminating.
	terminating map[pod.UID]deletion
	// unreachable is the runtime's health error while it cannot be
	// reached (nil otherwise); every pod is then published as Unknown.
	unreachable error
	since       metav1.Time
	// unverified holds the pods not synced since the runtime came back:
	// they stay Unknown until a sync has looked at the runtime again.
	unverified map[pod.UID]bool
	// refused holds the pods the admit chain turned down: they never
	// reach the runtime, so its outages do not make them Unknown.
	refused map[pod.UID]bool
	// probes, if set, gives the containers' startup and readiness
	// verdicts.
	probes pod.ProbeResults
	// resizes, if set, gives the in-place resize fields (allocated
	// resources, resources in effect, resize conditions).
	resizes Resizes
	// pub, if set, receives every published status and removal (API
	// mode: the API server's writer).
	pub Publisher
	// files queues the status files to write: the loop (admission,
	// termination, health) and the pods' workers publish, the queue's
	// writer (Run) writes, each file once however often it was queued
	// meanwhile.
	files *queue
	// wmu serialises writing and removing status files (taken before mu),
	// so that a file always ends up showing the newest state.
	wmu sync.Mutex
}

// Publisher receives what the Manager publishes, for the API server. Its
// methods must not block (they queue).
type Publisher interface {
	// PodStatus is p's newest status, on every change (never made
	// Unknown by a runtime outage: that is local knowledge).
	PodStatus(p *v1.Pod, s v1.PodStatus)
	// PodRemoved: p is gone from the node.
	PodRemoved(p *v1.Pod)
	// PodEvent is an event about p.
	PodEvent(p *v1.Pod, eventType, reason, message string)
}

// compute is Compute with the Manager's probes and resizes.
func (m *Manager) compute(p *v1.Pod, st *pod.RuntimeStatus, res pod.SyncResult) v1.PodStatus {
	return compute(p, st, res, m.runtimeName, m.probes, m.resizes)
}

type deletion struct {
	at    metav1.Time
	grace int64
}

// Config wires a Manager: what it publishes and what its statuses read.
type Config struct {
	// Dir is the status directory, Node the node's name, RuntimeName the
	// runtime's (its containers' IDs are <name>://<id>), HostIP the
	// node's address ("" for none).
	Dir, Node, RuntimeName, HostIP string
	// Events records the pods' events (NewEvents over the same Dir).
	Events *Events
	// Probes, if set, gives the containers' startup and readiness
	// verdicts.
	Probes pod.ProbeResults
	// Resizes, if set, makes statuses show in-place resize: each
	// resizable container's allocatedResources and resources, and the
	// pod's PodResizePending and PodResizeInProgress conditions.
	Resizes Resizes
	// Publisher, if set, receives every published status and removal.
	Publisher Publisher
	// WritePause, if set (and Clock has timers), is the least time
	// between two rounds of file writes: a burst of changes to a pod is
	// one write of its files. What the node server and the API see is not
	// delayed (they are fed at once); only the files are.
	WritePause time.Duration
	Clock      clock.PassiveClock
	Logger     *zap.Logger
}

// NewManager creates cfg.Dir if needed and forgets what an earlier run
// published there (it is rebuilt from the runtime).
func NewManager(cfg Config) (*Manager, error) {
	dir := cfg.Dir
	if cfg.Events == nil || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("status manager: Events, Clock and Logger are required")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create status directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read status directory: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	m := &Manager{dir: dir, node: cfg.Node, runtimeName: cfg.RuntimeName, hostIP: cfg.HostIP, clock: cfg.Clock, log: cfg.Logger.Named("status"),
		events: cfg.Events, probes: cfg.Probes, resizes: cfg.Resizes, pub: cfg.Publisher,
		owner: map[string]pod.UID{}, last: map[pod.UID]v1.PodStatus{}, problems: map[string]map[string]string{},
		pods: map[pod.UID]*v1.Pod{}, terminating: map[pod.UID]deletion{}, unverified: map[pod.UID]bool{}, refused: map[pod.UID]bool{}}
	m.files = newQueue(m.write)
	if c, ok := cfg.Clock.(clock.Clock); ok && cfg.WritePause > 0 {
		m.files.after, m.files.pause = c.After, cfg.WritePause
		m.events.files.after, m.events.files.pause = c.After, cfg.WritePause
	}
	return m, nil
}

// Run writes the status and events files queued until ctx ends, then
// what is left.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); m.events.files.run(ctx) }()
	m.files.run(ctx)
	wg.Wait()
	return nil
}

// flush writes what is queued now (tests; Run does it as it goes).
func (m *Manager) flush() {
	m.files.drain()
	m.events.files.drain()
}

// Admitted publishes a pod the moment the loop admits it, before any
// runtime work: Pending with its containers waiting (ContainerCreating or
// PodInitializing), its startTime now. A pod the runtime already runs
// (adopted after a restart) is not published here: the runtime's
// list-level view st lacks its IPs and start times, which would show a
// running pod without them for a moment; its first sync, at once,
// publishes it whole, as the kubelet's does.
func (m *Manager) Admitted(p *v1.Pod, st *pod.RuntimeStatus) {
	m.mu.Lock()
	_, readded := m.terminating[p.UID] // re-added while it was being removed
	delete(m.terminating, p.UID)
	delete(m.refused, p.UID)
	m.mu.Unlock()
	if st != nil && (len(st.Sandboxes) > 0 || len(st.Containers) > 0) {
		if readded {
			m.files.add(p) // its last status, without the deletion mark
		}
		return
	}
	m.publish(p, m.compute(p, st, pod.SyncResult{}))
	if readded {
		m.files.add(p) // the same status, without the deletion mark
	}
}

// Terminating marks a pod whose removal began: it is published with a
// deletionTimestamp and the grace period, so it shows Terminating until
// it is gone.
func (m *Manager) Terminating(p *v1.Pod, gracePeriod int64) {
	m.mu.Lock()
	if _, ok := m.terminating[p.UID]; ok {
		m.mu.Unlock()
		return
	}
	m.terminating[p.UID] = deletion{at: metav1.NewTime(m.clock.Now()), grace: gracePeriod}
	m.mu.Unlock()
	m.files.add(p)
}

// RuntimeHealth reports the runtime's (or the PLEG's) health as the loop
// sees it. While err is non-nil every published pod shows phase Unknown,
// reason RuntimeUnreachable, not ready and without a pod IP — what the
// agent last saw can no longer be vouched for — and the node's state is
// published for `nodeagent pods`. When it is back (nil) the pods stay
// Unknown, now "waiting for the first sync", until their next sync has
// looked at the runtime again.
func (m *Manager) RuntimeHealth(err error) {
	m.mu.Lock()
	was := m.unreachable
	m.unreachable = err
	if err != nil && was == nil {
		m.since = metav1.NewTime(m.clock.Now())
	}
	pods := make([]*v1.Pod, 0, len(m.pods))
	for uid, p := range m.pods {
		pods = append(pods, p)
		if err != nil && !m.refused[uid] {
			m.unverified[uid] = true
		}
	}
	changed := (was == nil) != (err == nil)
	var nodeErr error
	if err != nil {
		nodeErr = writeJSON(filepath.Join(m.dir, nodeFile), NodeState{
			RuntimeReachable: false, Since: m.since, Message: err.Error(),
		})
	} else if was != nil {
		if nodeErr = os.Remove(filepath.Join(m.dir, nodeFile)); errors.Is(nodeErr, os.ErrNotExist) {
			nodeErr = nil
		}
	}
	m.mu.Unlock()
	if nodeErr != nil {
		m.log.Warn("write node state", zap.Error(nodeErr))
	}
	if !changed {
		return
	}
	for _, p := range pods {
		m.files.add(p)
	}
}

// nodeFile holds the node's state while something is wrong with it.
const nodeFile = "_node.json"

// NodeState is what `nodeagent pods` shows about the node itself.
type NodeState struct {
	RuntimeReachable bool        `json:"runtimeReachable"`
	Since            metav1.Time `json:"since"`
	Message          string      `json:"message"`
}

// ReadNodeState reads the node state published in dir; nil when all is
// well.
func ReadNodeState(dir string) (*NodeState, error) {
	b, err := os.ReadFile(filepath.Join(dir, nodeFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &NodeState{}
	return st, json.Unmarshal(b, st)
}

func writeJSON(path string, v any) error {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, body)
}

// unknown is the status shown while the runtime is unreachable (err set)
// or until the pod's first sync after it came back.
func unknown(s v1.PodStatus, since metav1.Time, err error) v1.PodStatus {
	out := *s.DeepCopy()
	if err != nil {
		out.Message = fmt.Sprintf("container runtime unreachable since %s (last known phase %s): %v",
			since.UTC().Format("2006-01-02T15:04:05Z"), s.Phase, err)
	} else {
		out.Message = fmt.Sprintf("container runtime reachable again after an outage since %s; waiting for the pod's first sync (last known phase %s)",
			since.UTC().Format("2006-01-02T15:04:05Z"), s.Phase)
	}
	out.Phase = v1.PodUnknown
	out.Reason = "RuntimeUnreachable"
	out.PodIP, out.PodIPs = "", nil
	for i := range out.Conditions {
		c := &out.Conditions[i]
		if c.Type == v1.PodReady || c.Type == v1.ContainersReady {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = v1.ConditionUnknown, "RuntimeUnreachable", "", since
		}
	}
	for i := range out.ContainerStatuses {
		out.ContainerStatuses[i].Ready = false
	}
	return out
}

// Synced computes and publishes the status after a sync; it returns the
// phase published ("" when none was: an evicted pod's stands).
func (m *Manager) Synced(p *v1.Pod, st *pod.RuntimeStatus, res pod.SyncResult) v1.PodPhase {
	if m.isRefused(p) {
		return "" // evicted while this sync ran: Failed/Evicted stands
	}
	s := m.compute(p, st, res)
	m.publish(p, s)
	return s.Phase
}

// isRefused reports a pod refused or evicted: a sync that ends after that
// must not publish over its final status.
func (m *Manager) isRefused(p *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused[p.UID]
}

// Terminated publishes the final status of a deleted pod whose
// containers were stopped, as the kubelet makes a deleted pod terminal:
// every container terminated (one the runtime no longer knows as
// ContainerStatusUnknown, exit code 137), phase Succeeded when every
// container exited 0, else Failed.
func (m *Manager) Terminated(p *v1.Pod, st *pod.RuntimeStatus) {
	s := terminal(m.compute(p, st, pod.SyncResult{}))
	m.mu.Lock()
	prev, had := m.last[p.UID]
	m.mu.Unlock()
	if had && isTerminalPhase(prev.Phase) {
		// A finished pod ends as it finished (DeadlineExceeded stays).
		s.Phase, s.Reason, s.Message = prev.Phase, prev.Reason, prev.Message
		finishedConditions(&s)
	}
	m.publish(p, s)
}

func terminal(s v1.PodStatus) v1.PodStatus {
	if s.Phase == v1.PodSucceeded || s.Phase == v1.PodFailed {
		return s
	}
	allZero := len(s.ContainerStatuses) > 0
	for i := range s.ContainerStatuses {
		cs := &s.ContainerStatuses[i]
		if cs.State.Terminated == nil {
			if lt := cs.LastTerminationState.Terminated; lt != nil && cs.State.Running == nil {
				cs.State = v1.ContainerState{Terminated: lt}
				cs.LastTerminationState = v1.ContainerState{}
			} else {
				cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137,
					Reason: "ContainerStatusUnknown", Message: "The container could not be located when the pod was terminated"}}
			}
		}
		cs.Ready = false
		if cs.State.Terminated.ExitCode != 0 {
			allZero = false
		}
	}
	s.Phase = v1.PodFailed
	if allZero {
		s.Phase = v1.PodSucceeded
	}
	finishedConditions(&s)
	return s
}

// Blocked publishes a pod the run chain keeps from running, as the
// kubelet shows it: Pending (unless already over), the handler's reason
// and message, its waiting containers' reason Blocked; a Warning event
// with the reason.
func (m *Manager) Blocked(p *v1.Pod, st *pod.RuntimeStatus, reason, message string) {
	if m.isRefused(p) {
		return
	}
	s := m.compute(p, st, pod.SyncResult{})
	if s.Phase != v1.PodSucceeded && s.Phase != v1.PodFailed {
		s.Phase = v1.PodPending
	}
	s.Reason, s.Message = reason, message
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range list {
			if w := list[i].State.Waiting; w != nil {
				w.Reason, w.Message = "Blocked", ""
			}
		}
	}
	m.mu.Lock()
	prev, had := m.last[p.UID]
	m.mu.Unlock()
	if !had || prev.Reason != reason || prev.Message != message {
		m.Event(p, v1.EventTypeWarning, reason, message)
	}
	m.publish(p, s)
}

// Evicted publishes a pod ended for the node's sake, once its containers
// stopped, as the kubelet reports it: Failed, the reason (Evicted; a
// node shutdown's Terminated) and message, a DisruptionTarget condition
// (TerminationByKubelet), its containers terminated as st (the view
// after the stop) shows them, else as last seen; an eviction's Evicted
// warning event. Like a
// refused pod it never comes back to the runtime, so outages do not make
// it Unknown.
func (m *Manager) Evicted(p *v1.Pod, reason, message string, st *pod.RuntimeStatus) {
	m.mu.Lock()
	last, had := m.last[p.UID]
	m.refused[p.UID] = true
	delete(m.terminating, p.UID)
	m.mu.Unlock()
	var s v1.PodStatus
	switch {
	case st != nil:
		// The view after its containers stopped: their exit codes.
		s = terminal(m.compute(p, st, pod.SyncResult{}))
	case had:
		s = *last.DeepCopy()
	default:
		// Not published yet and no view: the status its spec gives, not
		// an empty one the API would take fields away for.
		s = m.compute(p, nil, pod.SyncResult{})
	}
	// Failed, unless it had already succeeded (as the kubelet's kill
	// status function).
	if !had || last.Phase != v1.PodSucceeded {
		s.Phase = v1.PodFailed
	}
	s.Reason, s.Message = reason, message
	disruption := false
	for i := range s.Conditions {
		switch c := &s.Conditions[i]; c.Type {
		case v1.PodReady, v1.ContainersReady:
			c.Status, c.Reason, c.Message = v1.ConditionFalse, reasonPodFailed, ""
		case v1.DisruptionTarget:
			c.Status, c.Reason, c.Message, disruption = v1.ConditionTrue, v1.PodReasonTerminationByKubelet, message, true
		}
	}
	if !disruption {
		s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: v1.PodReasonTerminationByKubelet, Message: message, LastTransitionTime: metav1.NewTime(m.clock.Now())})
	}
	for i := range s.ContainerStatuses {
		s.ContainerStatuses[i].Ready = false
	}
	if reason == "Evicted" {
		m.Event(p, v1.EventTypeWarning, reason, message)
	}
	m.publish(p, s)
}

// Refused publishes a pod the admit chain turned down: phase Failed with
// the handler's reason and message, as the kubelet reports it.
func (m *Manager) Refused(p *v1.Pod, reason, message string) {
	m.mu.Lock()
	m.refused[p.UID] = true
	m.mu.Unlock()
	m.Event(p, v1.EventTypeWarning, reason, message)
	m.publish(p, v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message})
}

// Removed deletes a pod's status file.
func (m *Manager) Removed(p *v1.Pod) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.pub != nil {
		m.pub.PodRemoved(p)
	}
	delete(m.last, p.UID)
	m.events.removed(p)
	delete(m.pods, p.UID)
	delete(m.terminating, p.UID)
	delete(m.unverified, p.UID)
	delete(m.refused, p.UID)
	if m.owner[m.path(p)] != p.UID {
		return // another pod of the same name owns the files now
	}
	delete(m.owner, m.path(p))
	// Under the lock: a publish of the new owner cannot slip in between.
	if err := os.Remove(m.path(p)); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.Warn("remove status file", zap.String("pod", pod.FullName(p)), zap.Error(err))
	}
}

// Event records an event about p (Events.Event).
func (m *Manager) Event(p *v1.Pod, eventType, reason, message string) {
	m.events.Event(p, eventType, reason, message)
}

func (m *Manager) path(p *v1.Pod) string {
	return filepath.Join(m.dir, fileBase(p)+".json")
}

// maxBase keeps <base>.events.json within the 255 bytes a file name may
// have.
const maxBase = 255 - len(".events.json")

// fileBase is <namespace>_<name>; a name too long for a file name (pod
// names may have 253 characters) is cut and made unique with a hash of the
// whole, so that such a pod is published like any other.
func fileBase(p *v1.Pod) string {
	base := p.Namespace + "_" + p.Name
	if len(base) <= maxBase {
		return base
	}
	sum := sha256.Sum256([]byte(base))
	suffix := "-" + hex.EncodeToString(sum[:8])
	return base[:maxBase-len(suffix)] + suffix
}

func (m *Manager) publish(p *v1.Pod, s v1.PodStatus) {
	now := metav1.NewTime(m.clock.Now())
	s.HostIP = m.hostIP
	if m.hostIP != "" {
		s.HostIPs = []v1.HostIP{{IP: m.hostIP}}
		// A hostNetwork pod's IP is the node's (generateAPIPodStatus).
		if p.Spec.HostNetwork && s.PodIP == "" {
			s.PodIP, s.PodIPs = m.hostIP, []v1.PodIP{{IP: m.hostIP}}
		}
	}
	m.mu.Lock()
	prev, had := m.last[p.UID]
	// A pod without a ready sandbox keeps the IPs it had: a finished pod's
	// IP stays readable once its sandbox is stopped (the kubelet's PLEG,
	// getPodIPs). While the runtime is unreachable, write still shows
	// none (unknown).
	if had && len(s.PodIPs) == 0 && len(prev.PodIPs) > 0 && !hasReadySandbox(s) {
		s.PodIP, s.PodIPs = prev.PodIP, append([]v1.PodIP(nil), prev.PodIPs...)
	}
	switch {
	case had && prev.StartTime != nil:
		s.StartTime = prev.StartTime
	case s.StartTime == nil:
		s.StartTime = &now
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if isResizeCondition(c.Type) && !c.LastTransitionTime.IsZero() {
			continue // the allocation manager's, moved when its reason changes
		}
		c.LastTransitionTime = now
		for _, pc := range prev.Conditions {
			if pc.Type == c.Type && pc.Status == c.Status {
				c.LastTransitionTime = pc.LastTransitionTime
			}
		}
	}
	changed := !had || !statusEqual(prev, s) || m.owner[m.path(p)] != p.UID || m.pods[p.UID] != p ||
		(m.unverified[p.UID] && m.unreachable == nil)
	if m.unreachable == nil {
		delete(m.unverified, p.UID) // a sync after the outage: verified
	}
	m.last[p.UID] = s
	m.pods[p.UID] = p
	m.owner[m.path(p)] = p.UID
	m.events.own(p)
	if changed && m.pub != nil {
		// Under mu, as Removed: the publisher sees a pod's statuses and
		// its removal in the order they happened (its methods only queue).
		m.pub.PodStatus(p, s)
	}
	m.mu.Unlock()
	if !changed {
		return
	}
	if prev.Phase != s.Phase {
		m.log.Info("pod phase", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)),
			zap.String("phase", string(s.Phase)), zap.String("reason", s.Reason))
	}
	m.files.add(p)
}

// write publishes p with its newest status, marked as terminating or
// unknown when it is. Writes are serialised and each reads the state at
// its own moment, so the last write shows the newest state; a removed
// pod is not written again.
func (m *Manager) write(p *v1.Pod) {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	out, ok := m.view(p)
	if !ok {
		return
	}
	body, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		m.log.Error("encode status", zap.Error(err))
		return
	}
	if err := writeAtomic(m.path(out), body); err != nil {
		m.log.Error("write status file", zap.String("pod", pod.FullName(out)), zap.Error(err))
	}
}

// Pods returns every published pod as its file shows it, sorted by
// namespace and name: the node server's /pods, without reading the
// files.
func (m *Manager) Pods() []*v1.Pod {
	m.mu.Lock()
	ps := make([]*v1.Pod, 0, len(m.pods))
	for _, p := range m.pods {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	out := make([]*v1.Pod, 0, len(ps))
	for _, p := range ps {
		if v, ok := m.view(p); ok {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return pod.FullName(out[i]) < pod.FullName(out[j]) })
	return out
}

// view is p as published now: its newest spec and status, marked as
// terminating or unknown when it is; false when p has no status or
// another pod of its name owns the file.
func (m *Manager) view(p *v1.Pod) (*v1.Pod, bool) {
	m.mu.Lock()
	s, ok := m.last[p.UID]
	del, terminating := m.terminating[p.UID]
	down, since, unverified := m.unreachable, m.since, m.unverified[p.UID]
	if m.refused[p.UID] {
		down, unverified = nil, false // never on the runtime
	}
	owned := m.owner[m.path(p)] == p.UID
	if cur := m.pods[p.UID]; cur != nil {
		p = cur
	}
	m.mu.Unlock()
	if !ok || !owned {
		return nil, false
	}
	out := p.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	if terminating {
		out.DeletionTimestamp = &del.at
		out.DeletionGracePeriodSeconds = &del.grace
	}
	if down != nil || unverified {
		s = unknown(s, since, down)
	}
	out.Status = s
	return out, true
}

func statusEqual(a, b v1.PodStatus) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func writeAtomic(path string, body []byte) error {
	return atomicfile.Write(path, body, 0o600, false)
}

// List reads every published pod of dir, sorted by namespace and name.
func List(dir string) ([]*v1.Pod, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var pods []*v1.Pod
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasSuffix(e.Name(), ".events.json") ||
			strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		p, err := readPod(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool { return pod.FullName(pods[i]) < pod.FullName(pods[j]) })
	return pods, nil
}

func readPod(path string) (*v1.Pod, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &v1.Pod{}
	if err := json.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return p, nil
}
