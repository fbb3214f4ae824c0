package cri

import (
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Adopter keeps a static pod on the UID it runs under. nodeagent's UID of
// a static pod is its own hash of the manifest; the kubelet's is another
// (of its internal decoding, which only the kubelet's code makes), so a
// node the kubelet ran has its static pods running under UIDs nodeagent
// would not compute. Handed a static source's set, the Adopter gives each
// pod the UID of the running static pod of its name made by the kubelet
// (or by nodeagent for a pod it adopted: AnnotationAdopted) with the
// manifest's labels and for the same containers — the kubelet's hash of
// each container's name and image, or nodeagent's of the whole spec but
// resources — so it is kept as it runs, its mirror pod and logs
// included. nodeagent's own static pods are never adopted: an edit of
// their manifest replaces them. A pod adopted once keeps its adopted UID
// for the agent's life (its containers may be restarting meanwhile);
// after a restart of the agent the runtime decides again.
type Adopter struct {
	snapshot func() map[pod.UID]*pod.RuntimeStatus
	log      *zap.Logger

	mu      sync.Mutex
	adopted map[pod.UID]pod.UID // nodeagent's UID → the running pod's
}

// NewAdopter adopts from the runtime's pods as snapshot lists them (the
// PLEG's cache).
func NewAdopter(snapshot func() map[pod.UID]*pod.RuntimeStatus, log *zap.Logger) *Adopter {
	return &Adopter{snapshot: snapshot, log: log.Named("adopt"), adopted: map[pod.UID]pod.UID{}}
}

// Adopt returns pods with every adoptable pod replaced by a copy under
// the UID it runs under (its config hash too, which is a static pod's
// UID); the others as they are.
func (a *Adopter) Adopt(pods []*v1.Pod) []*v1.Pod {
	var snap map[pod.UID]*pod.RuntimeStatus
	out := make([]*v1.Pod, len(pods))
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, p := range pods {
		out[i] = p
		uid, ok := a.adopted[p.UID]
		if !ok {
			if snap == nil {
				snap = a.snapshot()
			}
			if uid, ok = adoptableStatic(p, snap); !ok {
				continue
			}
			a.adopted[p.UID] = uid
			a.log.Info("static pod adopted as it runs", zap.String("pod", pod.FullName(p)),
				zap.String("uid", string(uid)), zap.String("manifestUID", string(p.UID)))
		}
		c := p.DeepCopy()
		c.UID = uid
		c.Annotations[configHashAnnotation] = string(uid)
		c.Annotations[AnnotationAdopted] = "kubelet"
		out[i] = c
	}
	return out
}

// adoptableStatic is the UID of the running static pod of p's name, made for
// p's containers, when p's own UID does not run.
func adoptableStatic(p *v1.Pod, snap map[pod.UID]*pod.RuntimeStatus) (pod.UID, bool) {
	if _, runs := snap[p.UID]; runs || p.Annotations == nil {
		return "", false
	}
	for uid, st := range snap {
		if st.Namespace != p.Namespace || st.Name != p.Name {
			continue
		}
		sb := st.LatestSandbox()
		if sb == nil || sb.SpecHash != string(uid) || !st.Running() || !sb.Adoptable {
			continue // not a static pod (its config hash is its UID), not running, or nodeagent's own
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
