package syncloop

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// states are one representative of every reachable kind of state: each
// phase, with and without a finishing reason where both occur.
func states() map[string]podState {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
	fin := &finishing{reason: reasonDeadlineExceeded}
	return map[string]podState{
		"syncing":                {phase: syncing, pod: p, grace: -1},
		"finished":               {phase: finished, pod: p, grace: -1, fin: fin},
		"terminating":            {phase: terminating, pod: p, grace: 30},
		"terminating (finished)": {phase: terminating, pod: p, grace: 30, fin: fin},
		"terminating (stopped)":  {phase: terminating, pod: p, grace: 30, stopped: true},
		"terminating (evicted)":  {phase: terminating, pod: p, grace: 30, evicted: true},
		"terminated":             {phase: terminated, pod: p, grace: 30},
	}
}

// Every state × every event: the phase it leads to and what it carries.
func TestTransitions(t *testing.T) {
	newer := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: 2}}
	over := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Generation: 3}, Status: v1.PodStatus{Phase: v1.PodFailed}}
	events := map[string]event{
		"update":       {kind: evUpdate, pod: newer},
		"update, over": {kind: evUpdate, pod: over},
		"finish":       {kind: evFinish, reason: "R"},
		"kill":         {kind: evKill, grace: 10},
		"kill, longer": {kind: evKill, grace: 60},
		"kill, own":    {kind: evKill, grace: -1, pod: newer},
		"evict":        {kind: evEvict, grace: 5},
		"forget":       {kind: evForget},
		"stopped":      {kind: evStopped},
		"killed":       {kind: evKilled},
	}
	type want struct {
		phase   phase
		grace   int64
		stopped bool
		evicted bool
		reason  string // the finishing reason; "-" for none
		newPod  bool   // the event's pod is the state's now
	}
	tests := map[string]map[string]want{
		"syncing": {
			"update, over": {finished, -1, false, false, "", true},
			"update":       {syncing, -1, false, false, "-", true}, "finish": {finished, -1, false, false, "R", false},
			"kill": {terminating, 10, false, false, "-", false}, "kill, longer": {terminating, 60, false, false, "-", false},
			"kill, own": {terminating, -1, false, false, "-", true}, "evict": {terminating, 5, false, true, "-", false},
			"forget": {syncing, -1, false, false, "-", false}, "stopped": {syncing, -1, false, false, "-", false},
			"killed": {syncing, -1, false, false, "-", false},
		},
		"finished": {
			"update, over": {finished, -1, false, false, reasonDeadlineExceeded, true},
			"update":       {finished, -1, false, false, reasonDeadlineExceeded, true}, "finish": {finished, -1, false, false, reasonDeadlineExceeded, false},
			"kill": {terminating, 10, false, false, reasonDeadlineExceeded, false}, "kill, longer": {terminating, 60, false, false, reasonDeadlineExceeded, false},
			"kill, own": {terminating, -1, false, false, reasonDeadlineExceeded, true}, "evict": {terminating, 5, false, true, reasonDeadlineExceeded, false},
			"forget": {finished, -1, false, false, reasonDeadlineExceeded, false}, "stopped": {finished, -1, false, false, reasonDeadlineExceeded, false},
			"killed": {finished, -1, false, false, reasonDeadlineExceeded, false},
		},
		"terminating": {
			"update, over": {finished, -1, false, false, "", true},
			"update":       {syncing, -1, false, false, "-", true}, "finish": {terminating, 30, false, false, "-", false},
			"kill": {terminating, 10, false, false, "-", false}, "kill, longer": {terminating, 30, false, false, "-", false},
			"kill, own": {terminating, 30, false, false, "-", true}, "evict": {terminating, 5, false, true, "-", false},
			"forget": {terminating, 30, false, false, "-", false}, "stopped": {terminating, 30, true, false, "-", false},
			"killed": {terminated, 30, false, false, "-", false},
		},
		"terminating (finished)": {
			"update, over": {finished, -1, false, false, reasonDeadlineExceeded, true},
			"update":       {finished, -1, false, false, reasonDeadlineExceeded, true}, "finish": {terminating, 30, false, false, reasonDeadlineExceeded, false},
			"kill": {terminating, 10, false, false, reasonDeadlineExceeded, false}, "kill, longer": {terminating, 30, false, false, reasonDeadlineExceeded, false},
			"kill, own": {terminating, 30, false, false, reasonDeadlineExceeded, true}, "evict": {terminating, 5, false, true, reasonDeadlineExceeded, false},
			"forget": {terminating, 30, false, false, reasonDeadlineExceeded, false}, "stopped": {terminating, 30, true, false, reasonDeadlineExceeded, false},
			"killed": {terminated, 30, false, false, reasonDeadlineExceeded, false},
		},
		"terminating (stopped)": {
			"update, over": {finished, -1, false, false, "", true},
			"update":       {syncing, -1, false, false, "-", true}, "finish": {terminating, 30, true, false, "-", false},
			"kill": {terminating, 10, true, false, "-", false}, "kill, longer": {terminating, 30, true, false, "-", false},
			"kill, own": {terminating, 30, true, false, "-", true}, "evict": {terminating, 5, true, true, "-", false},
			"forget": {terminating, 30, true, false, "-", false}, "stopped": {terminating, 30, true, false, "-", false},
			"killed": {terminated, 30, true, false, "-", false},
		},
		"terminating (evicted)": {
			"update, over": {finished, -1, false, false, "", true},
			"update":       {syncing, -1, false, false, "-", true}, "finish": {terminating, 30, false, true, "-", false},
			"kill": {terminating, 10, false, true, "-", false}, "kill, longer": {terminating, 30, false, true, "-", false},
			"kill, own": {terminating, 30, false, true, "-", true}, "evict": {terminating, 5, false, true, "-", false},
			"forget": {terminating, 30, false, false, "-", false}, "stopped": {terminating, 30, true, true, "-", false},
			"killed": {terminated, 30, false, true, "-", false},
		},
		"terminated": {
			"update, over": {terminated, 30, false, false, "-", false},
			"update":       {terminated, 30, false, false, "-", false}, "finish": {terminated, 30, false, false, "-", false},
			"kill": {terminated, 30, false, false, "-", false}, "kill, longer": {terminated, 30, false, false, "-", false},
			"kill, own": {terminated, 30, false, false, "-", false}, "evict": {terminated, 30, false, false, "-", false},
			"forget": {terminated, 30, false, false, "-", false}, "stopped": {terminated, 30, false, false, "-", false},
			"killed": {terminated, 30, false, false, "-", false},
		},
	}
	all := states()
	for sname, s := range all {
		row, ok := tests[sname]
		if !ok || len(row) != len(events) {
			t.Fatalf("state %q: %d of %d events covered", sname, len(row), len(events))
		}
		for ename, e := range events {
			w := row[ename]
			t.Run(sname+" + "+ename, func(t *testing.T) {
				got := s.next(e)
				reason := "-"
				if got.fin != nil {
					reason = got.fin.reason
				}
				if got.phase != w.phase || got.grace != w.grace || got.stopped != w.stopped || got.evicted != w.evicted || reason != w.reason {
					t.Errorf("got %v grace %d stopped %v evicted %v reason %q; want %+v", got.phase, got.grace, got.stopped, got.evicted, reason, w)
				}
				if (got.pod == e.pod) != w.newPod {
					t.Errorf("state's pod is the event's: %v, want %v", got.pod == e.pod, w.newPod)
				}
			})
		}
	}
}

// The diagram in doc.go is exactly the phase changes next makes.
func TestStateDiagramMatchesTransitions(t *testing.T) {
	body, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^//\t(\w+)\s+--(\w+)-->\s+(\w+)\s*$`)
	var drawn []string
	for _, line := range strings.Split(string(body), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			drawn = append(drawn, m[1]+" "+m[2]+" "+m[3])
		}
	}
	var made []string
	for _, s := range states() {
		over := &v1.Pod{Status: v1.PodStatus{Phase: v1.PodSucceeded}}
		for k := range eventNames {
			for _, e := range []event{{kind: eventKind(k), grace: 1}, {kind: eventKind(k), grace: 1, pod: over}} {
				if got := s.next(e); got.phase != s.phase {
					made = append(made, s.phase.String()+" "+e.kind.String()+" "+got.phase.String())
				}
			}
		}
	}
	slices.Sort(drawn)
	slices.Sort(made)
	made = slices.Compact(made)
	if !slices.Equal(drawn, made) {
		t.Fatalf("doc.go draws\n  %s\nnext makes\n  %s", strings.Join(drawn, "\n  "), strings.Join(made, "\n  "))
	}
}

// A pod its source shows over starts finished, never run.
func TestInitialState(t *testing.T) {
	over := &v1.Pod{Status: v1.PodStatus{Phase: v1.PodSucceeded}}
	if s := initialState(over); s.phase != finished || s.fin == nil {
		t.Fatalf("initial state of a Succeeded pod: %+v", s)
	}
	if s := initialState(&v1.Pod{}); s.phase != syncing || s.grace != -1 {
		t.Fatalf("initial state of a new pod: %+v", s)
	}
}
