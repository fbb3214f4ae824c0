package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Finished publishes the status of a pod that is over, its containers
// and sandboxes stopped but kept (so its logs stay readable), as the
// kubelet reports a terminated pod that is not yet deleted:
//   - reason set: the agent ended it (DeadlineExceeded): phase Failed with
//     that reason and message, and a Normal event saying so, once;
//   - else, a pod its source already shows terminal (an API pod that ended
//     before an agent restart) keeps that phase, reason and message — a
//     pod that never reached the runtime (refused) shows nothing more;
//   - else what its containers show (Succeeded or Failed).
//
// Every container is terminated and not ready.
func (m *Manager) Finished(p *v1.Pod, st *pod.RuntimeStatus, reason, message string) {
	if m.isRefused(p) {
		return // evicted or refused: that status stands
	}
	var s v1.PodStatus
	switch {
	case reason == "" && isTerminalPhase(p.Status.Phase) && (st == nil || len(st.Containers) == 0):
		s = v1.PodStatus{Phase: p.Status.Phase, Reason: p.Status.Reason, Message: p.Status.Message}
	default:
		s = terminal(m.compute(p, st, pod.SyncResult{}))
		switch {
		case reason != "":
			s.Phase, s.Reason, s.Message = v1.PodFailed, reason, message
		case isTerminalPhase(p.Status.Phase):
			s.Phase, s.Reason, s.Message = p.Status.Phase, p.Status.Reason, p.Status.Message
		}
		finishedConditions(&s)
	}
	if reason != "" {
		m.mu.Lock()
		prev := m.last[p.UID]
		m.mu.Unlock()
		if prev.Reason != reason {
			m.Event(p, v1.EventTypeNormal, reason, message)
		}
	}
	m.publish(p, s)
}

func isTerminalPhase(ph v1.PodPhase) bool { return ph == v1.PodSucceeded || ph == v1.PodFailed }
