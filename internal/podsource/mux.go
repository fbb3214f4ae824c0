package podsource

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Mux merges the sources' full pod sets into one stream of deltas. A source
// hands over its whole set each time (Set); the Mux diffs it against the
// source's previous set by UID and emits only what changed.
type Mux struct {
	out   chan pod.Update
	clock clock.PassiveClock

	mu      sync.Mutex
	sources map[string]map[pod.UID]*v1.Pod
	seen    map[string]bool
}

// NewMux returns a Mux that expects the named sources; clk stamps the
// time a static pod was first seen.
func NewMux(clk clock.PassiveClock, sources ...string) *Mux {
	m := &Mux{
		out:     make(chan pod.Update, 64),
		clock:   clk,
		sources: map[string]map[pod.UID]*v1.Pod{},
		seen:    map[string]bool{},
	}
	for _, s := range sources {
		m.sources[s] = map[pod.UID]*v1.Pod{}
		m.seen[s] = false
	}
	return m
}

// Updates is the merged stream.
func (m *Mux) Updates() <-chan pod.Update { return m.out }

// SeenAll reports whether every source has handed over at least one set,
// even an empty one, and the consumer has taken every delta out of
// Updates(). Until then the agent must not treat runtime pods it does not
// know as orphans: an adopted pod's ADD may still be on its way. (The
// consumer calls SeenAll from the goroutine that reads Updates, so a delta
// taken out has been handled.) A source that changes without pause can
// delay housekeeping by a tick or more; it never makes it unsafe.
func (m *Mux) SeenAll() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ok := range m.seen {
		if !ok {
			return false
		}
	}
	return len(m.out) == 0
}

// Set replaces a source's pods and sends the deltas. It blocks while the
// stream is full: config updates are never dropped.
func (m *Mux) Set(ctx context.Context, source string, pods []*v1.Pod) {
	m.mu.Lock()
	old := m.sources[source]
	next := make(map[pod.UID]*v1.Pod, len(pods))
	var adds, updates, removes []*v1.Pod
	now := m.clock.Now()
	for _, p := range pods {
		next[p.UID] = p
		prev, ok := old[p.UID]
		if source != pod.SourceAPI {
			stampSeen(p, prev, now)
		}
		switch {
		case !ok:
			adds = append(adds, p)
		case prev != p && !equality.Semantic.DeepEqual(prev, p): // unchanged files hand over the same pods
			updates = append(updates, p)
		}
	}
	for uid, p := range old {
		if _, ok := next[uid]; !ok {
			removes = append(removes, p)
		}
	}
	m.sources[source] = next
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.seen[source] = true // only once the deltas are in the channel
		m.mu.Unlock()
	}()

	for _, u := range []pod.Update{
		{Op: pod.OpRemove, Source: source, Pods: removes},
		{Op: pod.OpAdd, Source: source, Pods: adds},
		{Op: pod.OpUpdate, Source: source, Pods: updates},
	} {
		if len(u.Pods) == 0 {
			continue
		}
		select {
		case m.out <- u:
		case <-ctx.Done():
			return
		}
	}
}

// stampSeen gives a static pod the kubelet's config.seen annotation: the
// time its source first handed it over, kept while its UID stays (an
// API pod's copy in the API carries no such annotation, so it gets none).
// Mirror pods carry it as the kubelet's do.
func stampSeen(p, prev *v1.Pod, now time.Time) {
	if p.Annotations[ConfigSeenAnnotation] != "" {
		return
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	if prev != nil && prev.Annotations[ConfigSeenAnnotation] != "" {
		p.Annotations[ConfigSeenAnnotation] = prev.Annotations[ConfigSeenAnnotation]
		return
	}
	p.Annotations[ConfigSeenAnnotation] = now.Format(time.RFC3339Nano)
}
