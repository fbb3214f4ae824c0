package cri

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/downward"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podvolumes"
)

// envFor resolves a container's environment as the kubelet's
// makeEnvironmentVariables does:
//
//  1. the service variables (API mode only): KUBERNETES_SERVICE_HOST/PORT…
//     always, the namespace's services too unless enableServiceLinks is
//     false;
//  2. envFrom, in order: every key of the ConfigMap or Secret, prefixed;
//  3. env, in order: literal values with $(VAR) expanded against the
//     variables defined so far (service ones included), and values from
//     the downward API (fieldRef, resourceFieldRef), a ConfigMap key or a
//     Secret key — taken as they are, not expanded.
//
// Later definitions win. The result lists envFrom and env variables in
// the order they were first defined, then the service variables nothing
// overrode, sorted. An optional reference to a missing object or key
// defines nothing; a required one is an error in the kubelet's words
// (`configmap "cm" not found`, `couldn't find key k in ConfigMap ns/cm`),
// which the caller reports as CreateContainerConfigError and retries on
// the next sync. Without an API server (standalone mode) ConfigMap and
// Secret references are errors.
func (r *Runtime) envFor(ctx context.Context, p *v1.Pod, c *v1.Container, podIPs []string) ([]string, error) {
	var service map[string]string
	if r.cfg.Objects != nil {
		links := p.Spec.EnableServiceLinks == nil || *p.Spec.EnableServiceLinks
		svc, err := r.cfg.Objects.ServiceEnv(ctx, p.Namespace, links)
		if err != nil && !(errors.Is(err, ErrServicesNotSynced) && p.Annotations["kubernetes.io/config.source"] != pod.SourceAPI) {
			return nil, fmt.Errorf("get service environment variables: %w", err)
		}
		service = svc
	}
	// vals is what $(VAR) sees: the container's own variables over the
	// service ones.
	vals := make(map[string]string, len(service)+len(c.Env))
	maps.Copy(vals, service)
	own := map[string]bool{}
	var order []string
	set := func(k, v string) {
		if !own[k] {
			own[k] = true
			order = append(order, k)
		}
		vals[k] = v
	}
	src := envSources{r: r, ctx: ctx, ns: p.Namespace}
	for _, ef := range c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			optional := ef.ConfigMapRef.Optional != nil && *ef.ConfigMapRef.Optional
			cm, err := src.configMap(ef.ConfigMapRef.Name, optional)
			if err != nil {
				return nil, err
			}
			if cm != nil {
				data = cm.Data
			}
		case ef.SecretRef != nil:
			optional := ef.SecretRef.Optional != nil && *ef.SecretRef.Optional
			s, err := src.secret(ef.SecretRef.Name, optional)
			if err != nil {
				return nil, err
			}
			if s != nil {
				data = make(map[string]string, len(s.Data))
				for k, v := range s.Data {
					data[k] = string(v)
				}
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			// The kubelet takes every key as it is (keys are validated by
			// the API server; names need only be printable since relaxed
			// env var validation). A name a process environment cannot
			// carry is dropped rather than corrupt the "K=V" list.
			name := ef.Prefix + k
			if name == "" || strings.ContainsAny(name, "=\x00") {
				continue
			}
			set(name, data[k])
		}
	}
	for _, e := range c.Env {
		if e.Value != "" || e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vals))
			continue
		}
		v, ok, err := r.envValueFrom(&src, p, c, &e, podIPs)
		if err != nil {
			return nil, err
		}
		if ok {
			set(e.Name, v)
		}
	}
	out := make([]string, 0, len(order)+len(service))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	rest := make([]string, 0, len(service))
	for k, v := range service {
		if !own[k] {
			rest = append(rest, k+"="+v)
		}
	}
	sort.Strings(rest)
	return append(out, rest...), nil
}

// envValueFrom resolves one env var's source; ok is false when an
// optional reference finds nothing. ConfigMap and Secret errors are the
// kubelet's own messages, which users search for; the others name the
// container and variable.
func (r *Runtime) envValueFrom(src *envSources, p *v1.Pod, c *v1.Container, e *v1.EnvVar, podIPs []string) (val string, ok bool, err error) {
	from := e.ValueFrom
	wrap := func(v string, err error) (string, bool, error) {
		if err != nil {
			return "", false, fmt.Errorf("container %q: env %q: %w", c.Name, e.Name, err)
		}
		return v, true, nil
	}
	switch {
	case from.FieldRef != nil:
		return wrap(r.node.PodFieldValue(p, from.FieldRef.FieldPath, podIPs))
	case from.ResourceFieldRef != nil:
		target := c
		if name := from.ResourceFieldRef.ContainerName; name != "" && name != c.Name {
			if target = downward.Container(p, name); target == nil {
				return wrap("", fmt.Errorf("container %s not found", name))
			}
		}
		return wrap(r.node.ResourceValue(p, target, from.ResourceFieldRef))
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		optional := ref.Optional != nil && *ref.Optional
		cm, err := src.configMap(ref.Name, optional)
		if err != nil || cm == nil {
			return "", false, err
		}
		if v, found := cm.Data[ref.Key]; found {
			return v, true, nil
		}
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, p.Namespace, ref.Name)
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		optional := ref.Optional != nil && *ref.Optional
		s, err := src.secret(ref.Name, optional)
		if err != nil || s == nil {
			return "", false, err
		}
		if v, found := s.Data[ref.Key]; found {
			return string(v), true, nil
		}
		if optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, p.Namespace, ref.Name)
	}
	return wrap("", errors.New("unsupported source (fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef are)"))
}

// envSources reads the ConfigMaps and Secrets one container's environment
// refers to, each once (as the kubelet), so that all its variables come
// from one version of an object.
type envSources struct {
	r          *Runtime
	ctx        context.Context
	ns         string
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

// configMap returns the named ConfigMap; (nil, nil) when it is missing
// and optional. A missing one is not remembered: a later required
// reference to it still fails.
func (s *envSources) configMap(name string, optional bool) (*v1.ConfigMap, error) {
	if cm, ok := s.configMaps[name]; ok {
		return cm, nil
	}
	cm, err := podvolumes.GetConfigMap(s.ctx, s.r.cfg.Objects, s.ns, name, optional)
	if err != nil || cm == nil {
		return nil, err
	}
	if s.configMaps == nil {
		s.configMaps = map[string]*v1.ConfigMap{}
	}
	s.configMaps[name] = cm
	return cm, nil
}

// secret is configMap for Secrets.
func (s *envSources) secret(name string, optional bool) (*v1.Secret, error) {
	if sec, ok := s.secrets[name]; ok {
		return sec, nil
	}
	sec, err := podvolumes.GetSecret(s.ctx, s.r.cfg.Objects, s.ns, name, optional)
	if err != nil || sec == nil {
		return nil, err
	}
	if s.secrets == nil {
		s.secrets = map[string]*v1.Secret{}
	}
	s.secrets[name] = sec
	return sec, nil
}

// expand replaces $(NAME) with vals[NAME] as the kubelet does: "$$" is a
// literal "$", and an unknown reference is left as written.
func expand(s string, vals map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vals[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func expandAll(in []string, env []string) []string {
	if len(in) == 0 {
		return nil
	}
	vals := envMap(env)
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, vals)
	}
	return out
}

// envMap indexes a resolved environment ("K=V" entries) by name.
func envMap(env []string) map[string]string {
	vals := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	return vals
}
