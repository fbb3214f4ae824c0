package allocation

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// The kubelet's resize event reasons (pkg/kubelet/events).
const (
	EventResizeStarted    = "ResizeStarted"
	EventResizeCompleted  = "ResizeCompleted"
	EventResizeDeferred   = "ResizeDeferred"
	EventResizeInfeasible = "ResizeInfeasible"
	EventResizeError      = "ResizeError"
)

// Messages of Infeasible resizes, as the kubelet's.
const (
	msgStaticPod         = "In-place resize of static-pods is not supported"
	msgPodLevelResources = "InPlacePodLevelResourcesVerticalScaling is disabled"
)

// resizeConditions are a pod's resize conditions (the kubelet's status
// manager keeps them the same way, in memory: a restarted agent decides
// them again at the pod's first sync).
type resizeConditions struct {
	pending, inProgress *v1.PodCondition
}

// updated is the condition of type t now with reason, message and
// generation, from old (nil: none): nil when nothing changed. Its
// transition time moves when the reason changes (the kubelet's
// updatedPodResizeCondition); its probe time on every change.
func updated(t v1.PodConditionType, old *v1.PodCondition, reason, message string, generation int64, now metav1.Time) *v1.PodCondition {
	if old != nil && old.Reason == reason && old.Message == message && old.ObservedGeneration == generation {
		return nil
	}
	transition := now
	if old != nil && old.Reason == reason {
		transition = old.LastTransitionTime
	}
	return &v1.PodCondition{Type: t, Status: v1.ConditionTrue, ObservedGeneration: generation,
		LastProbeTime: now, LastTransitionTime: transition, Reason: reason, Message: message}
}

type containerAllocation struct {
	Name      string                  `json:"name"`
	Resources v1.ResourceRequirements `json:"resources,omitempty"`
}

type resourceSummary struct {
	InitContainers []containerAllocation `json:"initContainers,omitempty"`
	Containers     []containerAllocation `json:"containers,omitempty"`
	Generation     int64                 `json:"generation"`
	Error          string                `json:"error,omitempty"`
}

// resizeMessage is the kubelet's resize event message: prefix, then the
// containers' resources of p with the generation and the error, as JSON
// (pkg/kubelet/events/resize.go).
func resizeMessage(prefix string, p *v1.Pod, generation int64, errMsg string) string {
	s := resourceSummary{Generation: generation, Error: errMsg}
	for _, c := range p.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, containerAllocation{c.Name, c.Resources})
	}
	for _, c := range p.Spec.Containers {
		s.Containers = append(s.Containers, containerAllocation{c.Name, c.Resources})
	}
	b, err := json.Marshal(s)
	if err != nil {
		return prefix
	}
	return fmt.Sprintf("%s: %s", prefix, b)
}

// isStatic reports a pod of a file or http source.
func isStatic(p *v1.Pod) bool {
	src := p.Annotations["kubernetes.io/config.source"]
	return src == pod.SourceFile || src == pod.SourceHTTP
}
