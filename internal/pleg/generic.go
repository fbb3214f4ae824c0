package pleg

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// EventType is what happened to a pod.
type EventType string

const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerRemoved EventType = "ContainerRemoved"
	ContainerChanged EventType = "ContainerChanged"
	SandboxChanged   EventType = "SandboxChanged"
)

// Event is one change of one pod; Data is the container or sandbox ID.
type Event struct {
	UID  pod.UID
	Type EventType
	Data string
}

// Lister reads what the runtime has for the agent.
type Lister interface {
	// ListPods lists sandboxes and containers grouped by pod, without
	// inspecting them (two list calls).
	ListPods(ctx context.Context) ([]*pod.RuntimeStatus, error)
	// InspectPod completes a listed pod with what only inspection gives
	// (exit codes, times, IPs); prev is its last inspected view or nil,
	// whose unchanged parts may be reused.
	InspectPod(ctx context.Context, listed, prev *pod.RuntimeStatus) (*pod.RuntimeStatus, error)
}

// inspectParallelism bounds the InspectPod calls of one relist.
const inspectParallelism = 8

// MaxRelistAge is how old the last successful relist may be before the
// PLEG is unhealthy (the kubelet's relistThreshold).
const MaxRelistAge = 3 * time.Minute

// Generic is the relisting PLEG.
type Generic struct {
	lister Lister
	clock  clock.WithTicker
	log    *zap.Logger
	events chan Event

	dropped atomic.Int64
	// fast is Run's relist period; slow replaces it while an event stream
	// is up (streaming).
	fast, slow atomic.Int64
	onRelist   func(start time.Time, took time.Duration, err error)
	streaming  atomic.Bool
	trigger    chan struct{}

	mu         sync.Mutex
	last       map[pod.UID]*pod.RuntimeStatus
	lastRelist time.Time
	// The status cache (cache.go).
	cache     map[pod.UID]cacheEntry
	timestamp time.Time
	changed   chan struct{}
}

// NewGeneric returns a PLEG with an event channel of the given capacity.
func NewGeneric(l Lister, c clock.WithTicker, log *zap.Logger, capacity int) *Generic {
	g := &Generic{lister: l, clock: c, log: log.Named("pleg"), events: make(chan Event, capacity),
		last: map[pod.UID]*pod.RuntimeStatus{}, trigger: make(chan struct{}, 1),
		cache: map[pod.UID]cacheEntry{}, changed: make(chan struct{})}
	g.fast.Store(int64(time.Second))
	return g
}

// ObserveRelists sets a func called with each relist's start, duration
// and error, failed ones too (metrics). Call it before Run.
func (g *Generic) ObserveRelists(f func(start time.Time, took time.Duration, err error)) {
	g.onRelist = f
}

// Watch returns the event stream.
func (g *Generic) Watch() <-chan Event { return g.events }

// Dropped is how many events were dropped on a full channel.
func (g *Generic) Dropped() int64 { return g.dropped.Load() }

// Healthy reports whether a relist succeeded within MaxRelistAge.
func (g *Generic) Healthy() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.lastRelist.IsZero() {
		return nil // not started yet; the loop's runtime check covers it
	}
	if age := g.clock.Since(g.lastRelist); age > MaxRelistAge {
		return fmt.Errorf("pleg was last seen active %v ago; threshold is %v", age.Round(time.Second), MaxRelistAge)
	}
	return nil
}

// Snapshot returns the pods of the last relist (list-level detail) and
// when it was taken. The slice is the PLEG's; do not modify it.
func (g *Generic) Snapshot() (map[pod.UID]*pod.RuntimeStatus, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last, g.lastRelist
}

// Relist lists the runtime once, inspects the pods that changed into the
// status cache, and then emits the differences to the previous list (so a
// worker woken by an event finds the cache already current).
func (g *Generic) Relist(ctx context.Context) error {
	start := g.clock.Now()
	pods, err := g.lister.ListPods(ctx)
	if err != nil {
		if g.onRelist != nil {
			g.onRelist(start, g.clock.Since(start), err)
		}
		return fmt.Errorf("relist: %w", err)
	}
	next := make(map[pod.UID]*pod.RuntimeStatus, len(pods))
	for _, p := range pods {
		next[p.UID] = p
	}
	g.mu.Lock()
	old := g.last
	g.mu.Unlock()

	var events []Event
	var changed []pod.UID
	for uid, cur := range next {
		evs := diff(uid, old[uid], cur)
		events = append(events, evs...)
		g.mu.Lock()
		e, cached := g.cache[uid]
		g.mu.Unlock()
		if len(evs) > 0 || !cached || e.err != nil {
			changed = append(changed, uid)
		}
	}
	var gone []pod.UID
	for uid, prev := range old {
		if _, ok := next[uid]; !ok {
			events = append(events, diff(uid, prev, nil)...)
			gone = append(gone, uid)
		}
	}
	statuses := g.inspect(ctx, changed, next)

	g.mu.Lock()
	g.last = next
	g.lastRelist = start
	g.updateCacheLocked(statuses, gone, start)
	g.mu.Unlock()
	dropped := 0
	for _, ev := range events {
		if !g.send(ev) {
			dropped++
		}
	}
	if dropped > 0 {
		g.log.Warn("event channel full; events dropped, the periodic resync recovers", zap.Int("dropped", dropped))
	}
	if g.onRelist != nil {
		g.onRelist(start, g.clock.Since(start), nil)
	}
	g.log.Debug("relisted", zap.Int("pods", len(next)), zap.Int("events", len(events)), zap.Duration("took", g.clock.Since(start)))
	return nil
}

// inspect reads the full status of the given pods, a few at a time.
func (g *Generic) inspect(ctx context.Context, uids []pod.UID, listed map[pod.UID]*pod.RuntimeStatus) map[pod.UID]cacheEntry {
	out := make(map[pod.UID]cacheEntry, len(uids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, inspectParallelism)
	for _, uid := range uids {
		wg.Add(1)
		sem <- struct{}{}
		go func(uid pod.UID) {
			defer func() { <-sem; wg.Done() }()
			g.mu.Lock()
			prev := g.cache[uid]
			g.mu.Unlock()
			if prev.err != nil {
				prev.status = nil // a list-level fallback: nothing to reuse
			}
			st, err := g.lister.InspectPod(ctx, listed[uid], prev.status)
			if err != nil {
				g.log.Warn("inspect pod failed; retried at the next relist", zap.String("uid", string(uid)), zap.Error(err))
				st = listed[uid] // list-level view: enough to kill the pod
			}
			mu.Lock()
			out[uid] = cacheEntry{status: st, err: err}
			mu.Unlock()
		}(uid)
	}
	wg.Wait()
	return out
}

// send queues ev without blocking; it reports false (and counts) a drop.
func (g *Generic) send(ev Event) bool {
	select {
	case g.events <- ev:
		return true
	default:
		g.dropped.Add(1)
		return false
	}
}

// Trigger asks for a relist now; triggers coalesce.
func (g *Generic) Trigger() {
	select {
	case g.trigger <- struct{}{}:
	default:
	}
}

func (g *Generic) period() time.Duration {
	if g.streaming.Load() {
		return time.Duration(g.slow.Load())
	}
	return time.Duration(g.fast.Load())
}

// Run relists every period (or the slower period an event stream set, see
// RunEvented) and on every Trigger, until ctx ends.
func (g *Generic) Run(ctx context.Context, period time.Duration) {
	g.fast.Store(int64(period))
	for {
		if err := g.Relist(ctx); err != nil && ctx.Err() == nil {
			g.log.Warn("relist failed", zap.Error(err))
		}
		t := g.clock.NewTimer(g.period())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-g.trigger:
			t.Stop()
		}
	}
}

// diff compares two list-level views of one pod (either may be nil).
func diff(uid pod.UID, old, cur *pod.RuntimeStatus) []Event {
	var evs []Event
	oldC := map[string]pod.ContainerState{}
	if old != nil {
		for _, c := range old.Containers {
			oldC[c.ID] = c.State
		}
	}
	seen := map[string]bool{}
	if cur != nil {
		for _, c := range cur.Containers {
			seen[c.ID] = true
			prev, had := oldC[c.ID]
			if had && prev == c.State {
				continue
			}
			switch c.State {
			case pod.ContainerRunning:
				evs = append(evs, Event{uid, ContainerStarted, c.ID})
			case pod.ContainerExited:
				evs = append(evs, Event{uid, ContainerDied, c.ID})
			default:
				evs = append(evs, Event{uid, ContainerChanged, c.ID})
			}
		}
	}
	for id, st := range oldC {
		if seen[id] {
			continue
		}
		if st == pod.ContainerRunning {
			evs = append(evs, Event{uid, ContainerDied, id})
		}
		evs = append(evs, Event{uid, ContainerRemoved, id})
	}
	oldS := map[string]runtimeapi.PodSandboxState{}
	if old != nil {
		for _, s := range old.Sandboxes {
			oldS[s.ID] = s.State
		}
	}
	seenS := map[string]bool{}
	if cur != nil {
		for _, s := range cur.Sandboxes {
			seenS[s.ID] = true
			if prev, had := oldS[s.ID]; !had || prev != s.State {
				evs = append(evs, Event{uid, SandboxChanged, s.ID})
			}
		}
	}
	for id := range oldS {
		if !seenS[id] {
			evs = append(evs, Event{uid, SandboxChanged, id})
		}
	}
	return evs
}
