package cri

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Adopter keeps a static pod on the UID it runs under. nodeagent's UID of
// a static pod is its own hash of the manifest; the kubelet's is another
// (of its internal decoding, which only the kubelet's code makes), so a
// node the kubelet ran has its static pods running under UIDs nodeagent
// would not compute. Handed a static source's set, the Adopter gives a pod
// the UID of the running static pod of its name that the kubelet made
// with the manifest's labels and for the same containers (the kubelet's
// hash of each container's name and image, or nodeagent's of a container
// it restarted there) — only for the first manifest of that name the agent
// sees after its start: an edit of the manifest later replaces the pod, as
// for nodeagent's own static pods, which are never adopted. A sandbox
// nodeagent makes for an adopted pod carries AnnotationAdopted with the
// manifest's UID, and is adopted again after an agent restart while the
// manifest is unchanged. A pod adopted once keeps its adopted UID for the
// agent's life (its sandbox may be being recreated meanwhile).
type Adopter struct {
	snapshot func() (map[pod.UID]*pod.RuntimeStatus, time.Time)
	clock    clock.WithTicker
	log      *zap.Logger

	mu      sync.Mutex
	adopted map[pod.UID]pod.UID // the manifest's UID → the running pod's
	// first is the manifest UID each full name had when first seen.
	first map[string]pod.UID
}

// NewAdopter adopts from the runtime's pods as snapshot lists them (the
// PLEG's cache, with the time of its relist: zero before the first).
func NewAdopter(snapshot func() (map[pod.UID]*pod.RuntimeStatus, time.Time), c clock.WithTicker, log *zap.Logger) *Adopter {
	return &Adopter{snapshot: snapshot, clock: c, log: log.Named("adopt"), adopted: map[pod.UID]pod.UID{}, first: map[string]pod.UID{}}
}

// Adopt returns pods with every adoptable pod replaced by a copy under
// the UID it runs under (its config hash too, which is a static pod's
// UID, and AnnotationAdopted); the others as they are. It waits for the
// runtime's first listing (ctx ending: no adoption), so that a pod is not
// judged against a runtime not looked at yet.
func (a *Adopter) Adopt(ctx context.Context, pods []*v1.Pod) []*v1.Pod {
	var snap map[pod.UID]*pod.RuntimeStatus
	out := make([]*v1.Pod, len(pods))
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, p := range pods {
		out[i] = p
		name := pod.FullName(p)
		if _, ok := a.first[name]; !ok {
			a.first[name] = p.UID
		}
		uid, ok := a.adopted[p.UID]
		if !ok {
			if snap == nil {
				// Not listed (ctx ended): nothing new is adopted; pods
				// adopted before keep their UIDs.
				if snap = a.listed(ctx); snap == nil {
					snap = map[pod.UID]*pod.RuntimeStatus{}
				}
			}
			if uid, ok = adoptableStatic(p, snap, a.first[name] == p.UID); !ok {
				continue
			}
			a.adopted[p.UID] = uid
			a.log.Info("static pod adopted as it runs", zap.String("pod", name),
				zap.String("uid", string(uid)), zap.String("manifestUID", string(p.UID)))
		}
		c := p.DeepCopy()
		c.UID = uid
		c.Annotations[configHashAnnotation] = string(uid)
		c.Annotations[AnnotationAdopted] = string(p.UID)
		out[i] = c
	}
	return out
}

// listed is the runtime's pods once they were listed (nil: ctx ended).
func (a *Adopter) listed(ctx context.Context) map[pod.UID]*pod.RuntimeStatus {
	for {
		if snap, at := a.snapshot(); !at.IsZero() {
			return snap
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.clock.After(100 * time.Millisecond):
		}
	}
}

// adoptableStatic is the UID of the running static pod of p's name, made
// for p's containers and labels, when p's own UID does not run: one the
// kubelet made (only when firstManifest: p is the first manifest of its
// name since the agent's start), or one nodeagent made for this very
// manifest.
func adoptableStatic(p *v1.Pod, snap map[pod.UID]*pod.RuntimeStatus, firstManifest bool) (pod.UID, bool) {
	if _, runs := snap[p.UID]; runs || p.Annotations == nil {
		return "", false
	}
	for uid, st := range snap {
		if st.Namespace != p.Namespace || st.Name != p.Name {
			continue
		}
		sb := st.LatestSandbox()
		if sb == nil || sb.SpecHash != string(uid) || !st.Running() {
			continue // not a static pod (its config hash is its UID), or not running
		}
		if !(sb.Kubelet && firstManifest) && sb.AdoptedFrom != string(p.UID) {
			continue // nodeagent's own, or adopted for another manifest
		}
		if !sameLabels(sb.PodLabels, p.Labels) {
			continue // another version of the manifest
		}
		if madeFor(p, st) {
			return uid, true
		}
	}
	return "", false
}

func sameLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// madeFor reports whether every container of p's has an instance in st
// made for its spec, by the kubelet's hash or nodeagent's.
func madeFor(p *v1.Pod, st *pod.RuntimeStatus) bool {
	for i := range p.Spec.Containers {
		spec := &p.Spec.Containers[i]
		c := st.Latest(spec.Name, false)
		if c == nil {
			return false
		}
		if c.Hash != HashContainer(spec) && !adoptable(c.Hash, spec) {
			return false
		}
	}
	return len(p.Spec.Containers) > 0
}
