package cri

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// envFor resolves a container's environment: literal values, $(VAR)
// references to earlier variables, and the downward API fields a node
// knows. ConfigMap and Secret references cannot be resolved without an
// API server and are a CreateContainerConfigError.
func (r *Runtime) envFor(p *v1.Pod, c *v1.Container, podIP string) ([]string, error) {
	vals := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %q: envFrom needs an API server (ConfigMap/Secret)", c.Name)
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vals))
			continue
		}
		ref := e.ValueFrom.FieldRef
		if ref == nil {
			return nil, fmt.Errorf("container %q: env %q: only fieldRef sources are supported without an API server", c.Name, e.Name)
		}
		v, err := r.fieldValue(p, ref.FieldPath, podIP)
		if err != nil {
			return nil, fmt.Errorf("container %q: env %q: %w", c.Name, e.Name, err)
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out, nil
}

func (r *Runtime) fieldValue(p *v1.Pod, path, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return r.cfg.NodeIP, nil
	}
	if strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']") {
		return p.Labels[path[len("metadata.labels['"):len(path)-2]], nil
	}
	if strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']") {
		return p.Annotations[path[len("metadata.annotations['"):len(path)-2]], nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
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
