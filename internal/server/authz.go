package server

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// Attributes are what is authorized: verb on nodes/<subresource> named
// the node, as the API server would authorize the same access.
type Attributes struct {
	User        *User
	Verb        string
	Subresource string
	Name        string
	Path        string
}

// RequestAttributes maps a request to the attributes to authorize, as
// the kubelet's GetRequestAttributes with fine-grained authorization:
// any one of them allowed lets the request through.
//
//	/stats/*    stats
//	/metrics/*  metrics
//	/logs/*     log
//	/checkpoint checkpoint
//	/pods, /runningpods/  pods, then proxy
//	/healthz/*  healthz, then proxy
//	/configz    configz, then proxy
//	/statusz    statusz, then proxy
//	others      proxy
func RequestAttributes(u *User, r *http.Request, node string) []Attributes {
	verb := map[string]string{
		http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update",
		http.MethodPatch: "patch", http.MethodDelete: "delete",
	}[r.Method]
	p := r.URL.Path
	var subs []string
	switch {
	case isSubpath(p, "/pods"), isSubpath(p, "/runningpods"):
		subs = append(subs, "pods")
	case isSubpath(p, "/healthz"):
		subs = append(subs, "healthz")
	case isSubpath(p, "/configz"):
		subs = append(subs, "configz")
	case isSubpath(p, "/statusz"):
		subs = append(subs, "statusz")
	}
	switch {
	case isSubpath(p, "/stats"):
		subs = append(subs, "stats")
	case isSubpath(p, "/metrics"):
		subs = append(subs, "metrics")
	case isSubpath(p, "/logs"):
		subs = append(subs, "log")
	case isSubpath(p, "/checkpoint"):
		subs = append(subs, "checkpoint")
	default:
		subs = append(subs, "proxy")
	}
	attrs := make([]Attributes, len(subs))
	for i, s := range subs {
		attrs[i] = Attributes{User: u, Verb: verb, Subresource: s, Name: node, Path: p}
	}
	return attrs
}

// isSubpath: p is path or under it.
func isSubpath(p, path string) bool {
	return p == path || strings.HasPrefix(p, path+"/")
}

// Authorizer decides one set of attributes: allowed, or not with a
// reason; an error when no decision could be made. Safe for concurrent
// use.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// AlwaysAllow allows everything (--authorization-mode=AlwaysAllow).
type AlwaysAllow struct{}

// Authorize allows.
func (AlwaysAllow) Authorize(context.Context, Attributes) (bool, string, error) { return true, "", nil }

// SubjectAccessReviewer creates SubjectAccessReviews: client-go's
// AuthorizationV1().SubjectAccessReviews() satisfies it.
type SubjectAccessReviewer interface {
	Create(ctx context.Context, sar *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// Webhook authorizes through SubjectAccessReviews, caching allowed
// decisions for AllowTTL (default 5m) and denied ones for DenyTTL
// (default 30s), as the kubelet's defaults; errors are not cached.
type Webhook struct {
	Reviews           SubjectAccessReviewer
	AllowTTL, DenyTTL time.Duration
	Clock             clock.PassiveClock

	mu    sync.Mutex
	cache map[string]decision
	// reviews bounds and coalesces the SubjectAccessReviews in flight.
	reviews     *reviewGate
	reviewsOnce sync.Once
}

type decision struct {
	allowed bool
	reason  string
	expires time.Time
}

// Authorize asks the API server (or the cache). One review per set of
// attributes is in flight; one that starts after another stored its
// answer finds that instead.
func (w *Webhook) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	spec := sarSpec(a)
	key := cacheKey(spec)
	d, ok := w.cached(key)
	if !ok {
		w.reviewsOnce.Do(func() { w.reviews = newReviewGate() })
		v, err := w.reviews.do(ctx, key, func(ctx context.Context) (any, error) {
			if d, ok := w.cached(key); ok {
				return d, nil
			}
			return w.review(ctx, key, spec)
		})
		if err != nil {
			return false, "", fmt.Errorf("subject access review: %w", err)
		}
		d = v.(decision)
	}
	return d.allowed, d.reason, nil
}

func (w *Webhook) now() time.Time {
	if w.Clock == nil {
		return clock.RealClock{}.Now()
	}
	return w.Clock.Now()
}

// cached is the unexpired decision for key.
func (w *Webhook) cached(key string) (decision, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d, ok := w.cache[key]
	return d, ok && w.now().Before(d.expires)
}

// review asks the API server and caches the decision.
func (w *Webhook) review(ctx context.Context, key string, spec authorizationv1.SubjectAccessReviewSpec) (decision, error) {
	sar, err := w.Reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, err
	}
	d := decision{allowed: sar.Status.Allowed && !sar.Status.Denied, reason: sar.Status.Reason}
	ttl := w.AllowTTL
	if ttl == 0 {
		ttl = 5 * time.Minute
	}
	if !d.allowed {
		if ttl = w.DenyTTL; ttl == 0 {
			ttl = 30 * time.Second
		}
	}
	now := w.now()
	d.expires = now.Add(ttl)
	w.mu.Lock()
	if w.cache == nil {
		w.cache = map[string]decision{}
	}
	pruneExpired(w.cache, now, func(d decision) time.Time { return d.expires })
	w.cache[key] = d
	w.mu.Unlock()
	return d, nil
}

func sarSpec(a Attributes) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: a.User.Name, UID: a.User.UID, Groups: a.User.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Version: "v1", Resource: "nodes", Subresource: a.Subresource, Name: a.Name,
		},
	}
	if len(a.User.Extra) > 0 {
		spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range a.User.Extra {
			spec.Extra[k] = v
		}
	}
	return spec
}

// cacheKey identifies a review: the user in full and the attributes.
func cacheKey(s authorizationv1.SubjectAccessReviewSpec) string {
	var b strings.Builder
	r := s.ResourceAttributes
	fmt.Fprintf(&b, "%q %q %q %q %q %q|", s.User, s.UID, r.Verb, r.Subresource, r.Name, s.Groups)
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q;", k, []string(s.Extra[k]))
	}
	return b.String()
}
