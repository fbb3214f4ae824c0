package pod

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Op is the kind of change a Update carries.
type Op int

const (
	// OpAdd: pods new to the agent.
	OpAdd Op = iota
	// OpUpdate: pods whose object changed without a change of UID (labels,
	// annotations); a spec change of a static pod changes its UID and
	// arrives as Remove + Add.
	OpUpdate
	// OpRemove: pods the source no longer has; the agent kills them.
	OpRemove
	// OpReconcile: pods whose status-relevant fields changed only.
	OpReconcile
)

func (o Op) String() string {
	switch o {
	case OpAdd:
		return "ADD"
	case OpUpdate:
		return "UPDATE"
	case OpRemove:
		return "REMOVE"
	case OpReconcile:
		return "RECONCILE"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Source names where a pod came from, as in kubernetes.io/config.source.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	SourceAPI  = "api"
)

// Update is one delta from one source.
type Update struct {
	Op     Op
	Source string
	Pods   []*v1.Pod
}

// FullName is the "namespace/name" form used in logs.
func FullName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// UID is a pod's UID.
type UID = types.UID
