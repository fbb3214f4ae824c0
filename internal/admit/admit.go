package admit

import (
	v1 "k8s.io/api/core/v1"
)

// Attributes is what a handler judges: the pod and the pods already
// admitted (not terminated) on this node.
type Attributes struct {
	Pod       *v1.Pod
	OtherPods []*v1.Pod
}

// Result is a handler's verdict.
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

// Handler admits or refuses one pod.
type Handler interface {
	Name() string
	Admit(a *Attributes) Result
}

// Chain runs handlers in order.
type Chain []Handler

// Admit returns the first refusal, or an admitting Result.
func (c Chain) Admit(a *Attributes) Result {
	for _, h := range c {
		if r := h.Admit(a); !r.Admit {
			return r
		}
	}
	return Result{Admit: true}
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc struct {
	N string
	F func(a *Attributes) Result
}

func (h HandlerFunc) Name() string               { return h.N }
func (h HandlerFunc) Admit(a *Attributes) Result { return h.F(a) }

// Names lists the chain's handlers, in order.
func (c Chain) Names() []string {
	out := make([]string, len(c))
	for i, h := range c {
		out[i] = h.Name()
	}
	return out
}
