package podmanager

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// The kubelet's annotations on static and mirror pods (the same values as
// internal/podsource's, which this package may not import; a test checks
// they agree).
const (
	configHashAnnotation   = "kubernetes.io/config.hash"
	configSourceAnnotation = "kubernetes.io/config.source"
	configMirrorAnnotation = "kubernetes.io/config.mirror"
)

// IsStatic reports whether p came from a static source (a manifest
// directory or URL), not from the API server: such a pod has a mirror
// pod in the API.
func IsStatic(p *v1.Pod) bool {
	src, ok := p.Annotations[configSourceAnnotation]
	return ok && src != pod.SourceAPI
}

// IsMirror reports whether p is a mirror pod: the API's copy of a static
// pod.
func IsMirror(p *v1.Pod) bool {
	_, ok := p.Annotations[configMirrorAnnotation]
	return ok
}

// IsMirrorOf reports whether mirror is the mirror pod of this version of
// static pod p: the same full name, and its config.mirror annotation is
// p's config.hash (p's UID when it has none).
func IsMirrorOf(mirror, p *v1.Pod) bool {
	h, ok := mirror.Annotations[configMirrorAnnotation]
	return ok && pod.FullName(mirror) == pod.FullName(p) && h == StaticHash(p)
}

// StaticHash is what ties a mirror pod to static pod p, the value of its
// config.mirror annotation: p's config.hash, p's UID when it has none.
func StaticHash(p *v1.Pod) string {
	if h := p.Annotations[configHashAnnotation]; h != "" {
		return h
	}
	return string(p.UID)
}
