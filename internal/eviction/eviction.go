package eviction

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Signals.
const (
	MemoryAvailable  = "memory.available"
	NodeFsAvailable  = "nodefs.available"
	ImageFsAvailable = "imagefs.available"
	PIDAvailable     = "pid.available"
)

// Threshold is one eviction threshold: a quantity or a fraction of
// capacity; Grace > 0 makes it soft.
type Threshold struct {
	Signal   string
	Quantity *resource.Quantity
	Percent  float64
	Grace    time.Duration
}

// value is the threshold in the signal's unit for a capacity.
func (t Threshold) value(capacity int64) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(t.Percent * float64(capacity))
}

func (t Threshold) String() string {
	if t.Quantity != nil {
		return t.Quantity.String()
	}
	return fmt.Sprintf("%g%%", t.Percent*100)
}

// Observation is one signal's reading.
type Observation struct {
	Available, Capacity int64
}

// Observer reads the node's signals.
type Observer interface {
	Observe(ctx context.Context) (map[string]Observation, error)
}

// Usage is what one pod uses: memory working set and ephemeral storage
// (writable layers and logs), in bytes.
type Usage struct {
	Memory, Disk int64
	// Containers by name, for the eviction message.
	Containers map[string]Usage
}

// Stats reads the pods' usage (CRI container stats).
type Stats interface {
	PodUsage(ctx context.Context) (map[types.UID]Usage, error)
}

// Config wires a Manager.
type Config struct {
	Thresholds []Threshold
	// PressureTransitionPeriod keeps a pressure condition after the last
	// crossing (5m).
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriod bounds a soft eviction's grace (seconds; 0: the
	// pod's own).
	MaxPodGracePeriod int64
	Observer          Observer
	Stats             Stats
	// Storage, if set, reads pods' local ephemeral storage use: pods past
	// an emptyDir sizeLimit or an ephemeral-storage limit are evicted
	// (the kubelet's local storage capacity isolation; storage.go).
	Storage StorageReader
	Clock   clock.PassiveClock
	Logger  *zap.Logger
	// ActivePods are the pods that may be evicted.
	ActivePods func() []*v1.Pod
	// Evict ends p: Failed, reason Evicted, message; killed with grace
	// seconds.
	Evict func(p *v1.Pod, grace int64, message string)
	// Reclaim, if set, frees node-level disk (image GC) before a pod is
	// evicted for nodefs or imagefs.
	Reclaim func(ctx context.Context) error
}

// Manager decides pressure and evictions.
type Manager struct {
	cfg Config
	log *zap.Logger

	// firstMet is when each soft threshold was first seen crossed; its
	// grace counts from then. Synchronize only.
	firstMet map[int]time.Time
	// holdUntil: after an eviction, no other until the victim had time to
	// go and free what it held (the kubelet waits for its cleanup, 30 s
	// at most). Synchronize only.
	holdUntil time.Time

	mu sync.Mutex
	// lastMet is when each condition's signal last crossed a threshold.
	lastMet map[v1.NodeConditionType]time.Time
}

// New validates cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Observer == nil || cfg.Clock == nil || cfg.Logger == nil || cfg.ActivePods == nil || cfg.Evict == nil {
		return nil, errors.New("eviction: Observer, Clock, Logger, ActivePods and Evict are required")
	}
	if cfg.PressureTransitionPeriod <= 0 {
		cfg.PressureTransitionPeriod = 5 * time.Minute
	}
	for _, t := range cfg.Thresholds {
		if conditionOf(t.Signal) == "" {
			return nil, fmt.Errorf("eviction: unknown signal %q (memory.available, nodefs.available, imagefs.available, pid.available)", t.Signal)
		}
	}
	return &Manager{cfg: cfg, log: cfg.Logger.Named("eviction"), firstMet: map[int]time.Time{}, lastMet: map[v1.NodeConditionType]time.Time{}}, nil
}

func conditionOf(signal string) v1.NodeConditionType {
	switch signal {
	case MemoryAvailable:
		return v1.NodeMemoryPressure
	case NodeFsAvailable, ImageFsAvailable:
		return v1.NodeDiskPressure
	case PIDAvailable:
		return v1.NodePIDPressure
	}
	return ""
}

// Pressure reports whether the node is under each pressure condition.
func (m *Manager) Pressure(t v1.NodeConditionType) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.lastMet[t]
	return ok && m.cfg.Clock.Since(last) < m.cfg.PressureTransitionPeriod
}

// met is a threshold crossed now.
type met struct {
	t   Threshold
	obs Observation
}

// Synchronize is one eviction pass: observe, update the conditions, and
// evict at most one pod. It returns the evicted pod or nil.
func (m *Manager) Synchronize(ctx context.Context) (*v1.Pod, error) {
	obs, err := m.cfg.Observer.Observe(ctx)
	if err != nil && len(obs) == 0 {
		return nil, fmt.Errorf("observe the node's signals: %w", err)
	}
	now := m.cfg.Clock.Now()
	var crossed []met
	for i, t := range m.cfg.Thresholds {
		o, ok := obs[t.Signal]
		if !ok || o.Available >= t.value(o.Capacity) {
			delete(m.firstMet, i)
			continue
		}
		m.mu.Lock()
		m.lastMet[conditionOf(t.Signal)] = now
		m.mu.Unlock()
		if t.Grace > 0 {
			first, seen := m.firstMet[i]
			if !seen {
				m.firstMet[i], first = now, now
			}
			if now.Sub(first) < t.Grace {
				continue // soft: not held long enough
			}
		}
		crossed = append(crossed, met{t, o})
	}
	// As the kubelet: pods past their local storage limits go first, and
	// a pass that evicted one evicts nothing else.
	if evicted := m.localStorageEviction(ctx); len(evicted) > 0 {
		return evicted[0], nil
	}
	if len(crossed) == 0 {
		return nil, nil
	}
	// Memory first, then disk, then PIDs; hard before soft.
	sort.SliceStable(crossed, func(i, j int) bool {
		if a, b := signalOrder(crossed[i].t.Signal), signalOrder(crossed[j].t.Signal); a != b {
			return a < b
		}
		return crossed[i].t.Grace < crossed[j].t.Grace
	})
	c := crossed[0]
	if now.Before(m.holdUntil) {
		return nil, nil // the last victim may still be freeing its share
	}
	m.log.Warn("eviction threshold met", zap.String("signal", c.t.Signal), zap.String("threshold", c.t.String()),
		zap.Int64("available", c.obs.Available), zap.Int64("capacity", c.obs.Capacity))
	if conditionOf(c.t.Signal) == v1.NodeDiskPressure && m.cfg.Reclaim != nil {
		if err := m.cfg.Reclaim(ctx); err != nil {
			m.log.Warn("reclaim disk before evicting", zap.Error(err))
		}
		if again, err := m.cfg.Observer.Observe(ctx); err == nil {
			if o, ok := again[c.t.Signal]; ok && o.Available >= c.t.value(o.Capacity) {
				m.log.Info("node-level reclaim relieved the pressure; no pod evicted", zap.String("signal", c.t.Signal))
				return nil, nil
			}
		}
	}
	var usage map[types.UID]Usage
	if m.cfg.Stats != nil {
		if usage, err = m.cfg.Stats.PodUsage(ctx); err != nil {
			m.log.Warn("pod usage unknown; ranking by priority only", zap.Error(err))
		}
	}
	// Candidates: pods that run something (a pod whose containers all
	// ended frees nothing and is not the kubelet's to evict).
	var cands []*v1.Pod
	for _, p := range m.cfg.ActivePods() {
		if u, ok := usage[p.UID]; usage == nil || (ok && u.Memory > 0) {
			cands = append(cands, p)
		}
	}
	pods := rank(cands, c.t.Signal, usage)
	if len(pods) == 0 {
		m.log.Warn("eviction threshold met but no pod to evict", zap.String("signal", c.t.Signal))
		return nil, nil
	}
	victim := pods[0]
	grace := int64(0)
	if c.t.Grace > 0 {
		grace = podGrace(victim)
		if m.cfg.MaxPodGracePeriod > 0 && grace > m.cfg.MaxPodGracePeriod {
			grace = m.cfg.MaxPodGracePeriod
		}
	}
	msg := message(c, victim, usage[victim.UID])
	m.log.Warn("evicting pod", zap.String("pod", victim.Namespace+"/"+victim.Name), zap.String("uid", string(victim.UID)),
		zap.Int64("grace", grace), zap.String("message", msg))
	m.cfg.Evict(victim, grace, msg)
	m.holdUntil = now.Add(cleanupWait)
	return victim, nil
}

// cleanupWait is how long an eviction holds the next one back.
const cleanupWait = 30 * time.Second

// Run synchronizes every period until ctx ends.
func (m *Manager) Run(ctx context.Context, clk clock.WithTicker, period time.Duration) {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		if _, err := m.Synchronize(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("eviction pass failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func signalOrder(s string) int {
	switch s {
	case MemoryAvailable:
		return 0
	case NodeFsAvailable, ImageFsAvailable:
		return 1
	}
	return 2
}

func podGrace(p *v1.Pod) int64 {
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return v1.DefaultTerminationGracePeriodSeconds
}

// resourceOf is what a signal starves.
func resourceOf(signal string) v1.ResourceName {
	switch signal {
	case MemoryAvailable:
		return v1.ResourceMemory
	case NodeFsAvailable, ImageFsAvailable:
		return v1.ResourceEphemeralStorage
	}
	return "pids"
}

// message is the kubelet's eviction message.
func message(c met, p *v1.Pod, u Usage) string {
	res := resourceOf(c.t.Signal)
	avail := resource.NewQuantity(c.obs.Available, resource.BinarySI)
	if res == "pids" {
		avail = resource.NewQuantity(c.obs.Available, resource.DecimalSI)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The node was low on resource: %s. Threshold quantity: %s, available: %s. ", res, c.t, avail)
	if res == "pids" {
		return strings.TrimSpace(b.String())
	}
	for _, ctr := range p.Spec.Containers {
		cu, ok := u.Containers[ctr.Name]
		if !ok {
			continue
		}
		used := cu.Memory
		if res == v1.ResourceEphemeralStorage {
			used = cu.Disk
		}
		req := ctr.Resources.Requests[res]
		fmt.Fprintf(&b, "Container %s was using %s, request is %s. ", ctr.Name, resource.NewQuantity(used, resource.BinarySI), req.String())
	}
	return strings.TrimSpace(b.String())
}

// criticalPriority is the lowest system-critical priority.
const criticalPriority = 2000000000

// critical reports static and system-critical pods: evicted last.
func critical(p *v1.Pod) bool {
	if src := p.Annotations["kubernetes.io/config.source"]; src != "" && src != "api" {
		return true
	}
	return p.Spec.Priority != nil && *p.Spec.Priority >= criticalPriority
}

func priority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// request sums the containers' requests of one resource.
func request(p *v1.Pod, res v1.ResourceName) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Requests[res]
		n += q.Value()
	}
	return n
}

// rank orders pods for eviction under signal, first to go first.
func rank(pods []*v1.Pod, signal string, usage map[types.UID]Usage) []*v1.Pod {
	res := resourceOf(signal)
	used := func(p *v1.Pod) int64 {
		u := usage[p.UID]
		if res == v1.ResourceMemory {
			return u.Memory
		}
		return u.Disk
	}
	out := append([]*v1.Pod(nil), pods...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ca, cb := critical(a), critical(b); ca != cb {
			return !ca
		}
		if res != "pids" {
			ea, eb := used(a) > request(a, res), used(b) > request(b, res)
			if ea != eb {
				return ea
			}
		}
		if pa, pb := priority(a), priority(b); pa != pb {
			return pa < pb
		}
		if res == "pids" {
			return false
		}
		return used(a)-request(a, res) > used(b)-request(b, res)
	})
	return out
}
