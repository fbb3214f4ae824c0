package cri

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// RuntimeClasses resolves a pod's runtimeClassName to the CRI runtime
// handler its sandbox runs with (the kubelet's runtimeclass.Manager,
// LookupRuntimeHandler). API mode reads node.k8s.io/v1 RuntimeClasses;
// standalone mode has none (Config.RuntimeClasses nil).
//
// Contract: called from pod workers, concurrently for different pods; may
// answer from a cache. An error — no such RuntimeClass (say
// `RuntimeClass "x" not found`), or none read yet — fails the pod's
// sandbox creation (FailedCreatePodSandBox), which the pod's next sync
// retries: the RuntimeClass may appear later.
type RuntimeClasses interface {
	// Handler returns the handler of the RuntimeClass called name.
	Handler(name string) (string, error)
}

// runtimeHandler is the CRI runtime handler of p's sandbox: "" (the
// runtime's default) without a runtimeClassName, else its RuntimeClass's
// handler. Without RuntimeClasses (standalone mode) a pod naming one is
// an error rather than a pod silently run on the default handler — the
// kubelet, without an API client, ignores the name.
func (r *Runtime) runtimeHandler(p *v1.Pod) (string, error) {
	name := p.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return "", nil
	}
	if r.cfg.RuntimeClasses == nil {
		return "", fmt.Errorf("RuntimeClass %q: RuntimeClasses are read from the API server and nodeagent runs without one; "+
			"run the pod without runtimeClassName or run nodeagent in API mode", *name)
	}
	return r.cfg.RuntimeClasses.Handler(*name)
}
