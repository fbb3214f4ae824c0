package critest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cri"
)

var _ cri.Objects = (*Objects)(nil)

// TokenRequest is one recorded ServiceAccountToken call.
type TokenRequest struct {
	Namespace, Pod, ServiceAccount string
	UID                            string
	Audience                       string
	ExpirationSeconds              int64
}

// Objects is an in-memory cri.Objects: ConfigMaps and Secrets by
// namespace and name, service env vars, and tokens that expire
// ExpirationSeconds after the clock's now. The zero value is not usable;
// call NewObjects. Safe for concurrent use.
type Objects struct {
	clock clock.PassiveClock

	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	masterEnv  map[string]string
	serviceEnv map[string]map[string]string
	tokens     []TokenRequest
	errs       map[string]error
	calls      []string
}

// NewObjects returns an empty fake whose tokens expire by c.
func NewObjects(c clock.PassiveClock) *Objects {
	return &Objects{
		clock:      c,
		configMaps: map[string]*v1.ConfigMap{},
		secrets:    map[string]*v1.Secret{},
		serviceEnv: map[string]map[string]string{},
		errs:       map[string]error{},
	}
}

// SetConfigMap adds or replaces a ConfigMap (a copy is kept).
func (o *Objects) SetConfigMap(cm *v1.ConfigMap) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.configMaps[cm.Namespace+"/"+cm.Name] = cm.DeepCopy()
}

// DeleteConfigMap removes a ConfigMap.
func (o *Objects) DeleteConfigMap(namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.configMaps, namespace+"/"+name)
}

// SetSecret adds or replaces a Secret (a copy is kept).
func (o *Objects) SetSecret(s *v1.Secret) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.secrets[s.Namespace+"/"+s.Name] = s.DeepCopy()
}

// DeleteSecret removes a Secret.
func (o *Objects) DeleteSecret(namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.secrets, namespace+"/"+name)
}

// SetMasterEnv sets the variables every pod gets (the kubernetes
// service's KUBERNETES_*).
func (o *Objects) SetMasterEnv(env map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.masterEnv = maps.Clone(env)
}

// SetServiceEnv sets the variables of namespace ns's services, given to
// its pods when enableServiceLinks.
func (o *Objects) SetServiceEnv(ns string, env map[string]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.serviceEnv[ns] = maps.Clone(env)
}

// SetError makes every later call of method (ConfigMap, Secret,
// ServiceAccountToken, ServiceEnv) fail with err; nil clears it.
func (o *Objects) SetError(method string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil {
		delete(o.errs, method)
		return
	}
	o.errs[method] = err
}

// TokenRequests returns the ServiceAccountToken calls so far, oldest
// first.
func (o *Objects) TokenRequests() []TokenRequest {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]TokenRequest(nil), o.tokens...)
}

// Calls returns "Method ns/name" for every call so far, oldest first.
func (o *Objects) Calls() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.calls...)
}

// ConfigMap returns a copy of the ConfigMap or a NotFound error.
func (o *Objects) ConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "ConfigMap "+namespace+"/"+name)
	if err := o.errs["ConfigMap"]; err != nil {
		return nil, err
	}
	cm, ok := o.configMaps[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return cm.DeepCopy(), nil
}

// Secret returns a copy of the Secret or a NotFound error.
func (o *Objects) Secret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "Secret "+namespace+"/"+name)
	if err := o.errs["Secret"]; err != nil {
		return nil, err
	}
	s, ok := o.secrets[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return s.DeepCopy(), nil
}

// ServiceAccountToken issues "token-<n>-<pod uid>-<audience>", n counting
// from 1, expiring expirationSeconds from the clock's now.
func (o *Objects) ServiceAccountToken(_ context.Context, p *v1.Pod, audience string, expirationSeconds int64) (string, time.Time, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "ServiceAccountToken "+p.Namespace+"/"+p.Name)
	if err := o.errs["ServiceAccountToken"]; err != nil {
		return "", time.Time{}, err
	}
	o.tokens = append(o.tokens, TokenRequest{
		Namespace: p.Namespace, Pod: p.Name, ServiceAccount: p.Spec.ServiceAccountName, UID: string(p.UID),
		Audience: audience, ExpirationSeconds: expirationSeconds,
	})
	token := fmt.Sprintf("token-%d-%s-%s", len(o.tokens), p.UID, audience)
	return token, o.clock.Now().Add(time.Duration(expirationSeconds) * time.Second), nil
}

// ServiceEnv returns the master variables, plus namespace ns's when
// enableServiceLinks.
func (o *Objects) ServiceEnv(_ context.Context, ns string, enableServiceLinks bool) (map[string]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "ServiceEnv "+ns)
	if err := o.errs["ServiceEnv"]; err != nil {
		return nil, err
	}
	out := map[string]string{}
	if enableServiceLinks {
		maps.Copy(out, o.serviceEnv[ns])
	}
	maps.Copy(out, o.masterEnv)
	return out, nil
}
