package podvolumes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// Objects is what volumes read from the API server; nil in standalone
// mode. Package cri's Objects adds the service env vars.
//
// Contract: called from pod workers, concurrently for different pods;
// every method honours ctx and may answer from a cache (the kubelet's
// watch-based managers). Nothing is retried here: a failed call fails
// the container start (CreateContainerConfigError) or the refresh, and
// the next sync of the pod asks again.
type Objects interface {
	// ConfigMap returns the ConfigMap, or an error for which
	// k8s.io/apimachinery/pkg/api/errors.IsNotFound is true when it does
	// not exist.
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	// Secret returns the Secret; NotFound as ConfigMap.
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
	// ServiceAccountToken returns a token for the pod's service account
	// (TokenRequest bound to the pod), with its expiry. audience "" asks
	// for the API server's own audiences. The Manager caches tokens and
	// asks again once 80% of a token's life has passed.
	ServiceAccountToken(ctx context.Context, p *v1.Pod, audience string, expirationSeconds int64) (token string, expires time.Time, err error)
}

// errStandalone is why API objects cannot be read: no API server.
var errStandalone = errors.New("nodeagent runs standalone (no --kubeconfig)")

// GetConfigMap reads a ConfigMap of namespace ns through objs (nil:
// standalone). A missing one is (nil, nil) when optional and the
// kubelet's `configmap "x" not found` otherwise, whatever wording the
// Objects implementation uses. The container environment (package cri)
// reads its ConfigMaps through it too, so both say the same.
func GetConfigMap(ctx context.Context, objs Objects, ns, name string, optional bool) (*v1.ConfigMap, error) {
	if objs == nil {
		return nil, fmt.Errorf("couldn't get configMap %s/%s without an API server: %w", ns, name, errStandalone)
	}
	cm, err := objs.ConfigMap(ctx, ns, name)
	switch {
	case err == nil:
		return cm, nil
	case apierrors.IsNotFound(err) && optional:
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("configmap %q not found", name)
	}
	return nil, fmt.Errorf("get configmap %s/%s: %w", ns, name, err)
}

// GetSecret is GetConfigMap for Secrets.
func GetSecret(ctx context.Context, objs Objects, ns, name string, optional bool) (*v1.Secret, error) {
	if objs == nil {
		return nil, fmt.Errorf("couldn't get secret %s/%s without an API server: %w", ns, name, errStandalone)
	}
	s, err := objs.Secret(ctx, ns, name)
	switch {
	case err == nil:
		return s, nil
	case apierrors.IsNotFound(err) && optional:
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("secret %q not found", name)
	}
	return nil, fmt.Errorf("get secret %s/%s: %w", ns, name, err)
}

func (m *Manager) getConfigMap(ctx context.Context, ns, name string, optional bool) (*v1.ConfigMap, error) {
	return GetConfigMap(ctx, m.cfg.Objects, ns, name, optional)
}

func (m *Manager) getSecret(ctx context.Context, ns, name string, optional bool) (*v1.Secret, error) {
	return GetSecret(ctx, m.cfg.Objects, ns, name, optional)
}

// maxTokenAge is how long a token is used at most, whatever its expiry
// (the kubelet's token manager: maxTTL).
const maxTokenAge = 24 * time.Hour

// tokenKey identifies a cached token: one per pod, service account,
// audience and requested lifetime (the kubelet's token manager keys).
type tokenKey struct {
	uid            types.UID
	serviceAccount string
	audience       string
	seconds        int64
}

type cachedToken struct {
	token   string
	issued  time.Time // when the agent received it
	expires time.Time
}

// refreshAt is when a token is asked for again: after 80% of its life,
// and no later than maxTokenAge.
func (t cachedToken) refreshAt() time.Time {
	life := t.expires.Sub(t.issued)
	return t.issued.Add(min(life*8/10, maxTokenAge))
}

// tokenCache holds service account tokens. The zero value is ready.
type tokenCache struct {
	mu sync.Mutex
	m  map[tokenKey]cachedToken
}

func (c *tokenCache) get(k tokenKey) (cachedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[k]
	return t, ok
}

// put stores a token and forgets every expired one (tokens of pods gone
// for good leave this way).
func (c *tokenCache) put(k tokenKey, t cachedToken, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[tokenKey]cachedToken{}
	}
	for key, old := range c.m {
		if !now.Before(old.expires) {
			delete(c.m, key)
		}
	}
	c.m[k] = t
}

// serviceAccountToken returns a token for the pod's service account,
// from the cache until 80% of its life has passed. When a refresh fails,
// the cached token is used as long as it has not expired (the kubelet's
// token manager does the same).
func (m *Manager) serviceAccountToken(ctx context.Context, p *v1.Pod, audience string, seconds int64) (string, error) {
	if m.cfg.Objects == nil {
		return "", fmt.Errorf("service account tokens need an API server: %w", errStandalone)
	}
	key := tokenKey{uid: p.UID, serviceAccount: p.Spec.ServiceAccountName, audience: audience, seconds: seconds}
	now := m.cfg.Clock.Now()
	cached, ok := m.tokens.get(key)
	if ok && now.Before(cached.refreshAt()) {
		return cached.token, nil
	}
	token, expires, err := m.cfg.Objects.ServiceAccountToken(ctx, p, audience, seconds)
	if err != nil {
		if ok && now.Before(cached.expires) {
			m.log.Warn("refresh service account token failed; using the cached one until it expires",
				zap.String("pod", p.Namespace+"/"+p.Name), zap.String("uid", string(p.UID)),
				zap.Time("expires", cached.expires), zap.Error(err))
			return cached.token, nil
		}
		return "", fmt.Errorf("get service account token for %s/%s: %w", p.Namespace, p.Spec.ServiceAccountName, err)
	}
	m.tokens.put(key, cachedToken{token: token, issued: now, expires: expires}, now)
	return token, nil
}
