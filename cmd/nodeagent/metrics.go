package main

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/kubeapi"
	"github.com/nodeagent/nodeagent/internal/metrics"
	"github.com/nodeagent/nodeagent/internal/status"
)

// podStartPublisher is the status manager's publisher: the pod start
// tracker hears of every published status and removal, then the API
// server's writer (API mode only).
func podStartPublisher(api *kubeapi.Mode, start *metrics.PodStart) status.Publisher {
	p := startPublisher{start: start}
	if api != nil {
		p.next = api.Status
	}
	return p
}

type startPublisher struct {
	start *metrics.PodStart
	next  status.Publisher // nil standalone
}

func (p startPublisher) PodStatus(pd *v1.Pod, s v1.PodStatus) {
	p.start.Status(pd, s)
	if p.next != nil {
		p.next.PodStatus(pd, s)
	}
}

func (p startPublisher) PodRemoved(pd *v1.Pod) {
	p.start.Removed(pd.UID)
	if p.next != nil {
		p.next.PodRemoved(pd)
	}
}

func (p startPublisher) PodEvent(pd *v1.Pod, eventType, reason, message string) {
	if p.next != nil {
		p.next.PodEvent(pd, eventType, reason, message)
	}
}
