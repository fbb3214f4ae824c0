package syncloop

import (
	v1 "k8s.io/api/core/v1"
)

// phase is where a pod is in its life on the node, as its worker sees it
// (the kubelet's podSyncStatus, small). The phases and the transitions
// between them are drawn in doc.go; TestStateDiagramMatchesTransitions
// checks the drawing against next.
type phase uint8

const (
	// syncing: the pod is wanted; each step makes one sync toward its spec.
	syncing phase = iota
	// finished: the pod is over (a terminal phase, or its
	// activeDeadlineSeconds passed); it is stopped and never run again,
	// its containers kept (logs, exit codes) until it is removed.
	finished
	// terminating: the pod is being killed — removed from its source,
	// deleted in the API (its final status first), or evicted.
	terminating
	// terminated: the kill is done; the worker exits.
	terminated
)

var phaseNames = [...]string{"syncing", "finished", "terminating", "terminated"}

func (p phase) String() string { return phaseNames[p] }

// podState is everything the loop decides about one pod that its worker
// acts on. It changes only through next.
type podState struct {
	phase phase
	// pod is the newest spec; nil for an orphan (nothing known but the
	// runtime's view).
	pod *v1.Pod
	// grace is the kill's grace period in seconds (< 0: the pod's own);
	// set while terminating.
	grace int64
	// stopped: a deleted pod's containers are stopped and its final
	// status is due before the kill (terminating only).
	stopped bool
	// evicted: the pod's status (Failed, Evicted) stays published after
	// its kill, until its source drops it.
	evicted bool
	// fin is why the pod is over: set once finished, and kept while it
	// terminates, so that a pod re-added before its kill ended is
	// finished again, never run.
	fin *finishing
}

// eventKind is what happened to a pod.
type eventKind uint8

const (
	// evUpdate: a newer spec came (also a pod re-added before its kill
	// ended); one its source shows terminal is over (finished).
	evUpdate eventKind = iota
	// evFinish: the pod is over (its sync saw a terminal phase, or its
	// activeDeadlineSeconds passed); reason and message say why when the
	// agent ended it.
	evFinish
	// evKill: the pod is to be killed: removed from its source, or
	// deleted in the API (grace: a shorter one than the kill's wins).
	evKill
	// evEvict: a kill for the node's sake whose status stays published.
	evEvict
	// evForget: the evicted pod's source dropped it: its status need not
	// stay published.
	evForget
	// evStopped: a deleted pod's containers were stopped.
	evStopped
	// evKilled: the pod's kill succeeded.
	evKilled
)

var eventNames = [...]string{"update", "finish", "kill", "evict", "forget", "stopped", "killed"}

func (e eventKind) String() string { return eventNames[e] }

// event is one input of next.
type event struct {
	kind eventKind
	// pod is the newest spec (update; kill and evict: when known).
	pod *v1.Pod
	// grace is a kill's grace period (< 0: the pod's own).
	grace int64
	// reason and message: why the agent ended the pod (finish).
	reason, message string
}

// next is the one transition function: the state after e. It has no side
// effects; the worker acts on the states before and after.
func (s podState) next(e event) podState {
	if s.phase == terminated {
		return s // the worker is gone: a new pod of this UID gets a new one
	}
	switch e.kind {
	case evUpdate:
		s.pod = e.pod
		if s.fin == nil && e.pod != nil && isTerminal(e.pod.Status.Phase) {
			s.fin = &finishing{} // its source shows it over
			if s.phase == syncing {
				s.phase = finished
			}
		}
		if s.phase == terminating {
			s.phase, s.grace, s.stopped, s.evicted = syncing, -1, false, false
			if s.fin != nil {
				s.phase = finished
			}
		}
	case evFinish:
		if s.phase == syncing {
			s.phase, s.fin = finished, &finishing{reason: e.reason, message: e.message}
		}
	case evKill, evEvict:
		if e.pod != nil {
			s.pod = e.pod
		}
		if s.phase != terminating {
			s.phase, s.grace, s.stopped = terminating, -1, false
		}
		if e.grace >= 0 && (s.grace < 0 || e.grace < s.grace) {
			s.grace = e.grace
		}
		s.evicted = s.evicted || e.kind == evEvict
	case evForget:
		s.evicted = false
	case evStopped:
		if s.phase == terminating {
			s.stopped = true
		}
	case evKilled:
		if s.phase == terminating {
			s.phase = terminated
		}
	}
	return s
}

// initialState is a new worker's state: syncing p, or finished when its
// source already shows it over (never run), or nothing known yet (an
// orphan, whose kill follows at once).
func initialState(p *v1.Pod) podState {
	s := podState{phase: syncing, pod: p, grace: -1}
	if p != nil && isTerminal(p.Status.Phase) {
		s.phase, s.fin = finished, &finishing{}
	}
	return s
}
