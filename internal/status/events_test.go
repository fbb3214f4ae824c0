package status

import (
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

func TestEventsAreCountedAndRemovedWithThePod(t *testing.T) {
	m, dir, _ := newManager(t)
	m.Event(mgrPodA, v1.EventTypeNormal, "Pulled", "pulled x")
	m.Event(mgrPodA, v1.EventTypeWarning, "BackOff", "back-off")
	m.Event(mgrPodA, v1.EventTypeWarning, "BackOff", "back-off")
	m.flush()
	evs, err := ReadEvents(dir, mgrPodA)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Reason != "BackOff" || evs[1].Count != 2 || evs[0].Count != 1 {
		t.Fatalf("events %+v", evs)
	}
	if evs[0].InvolvedObject.UID != mgrPodA.UID || evs[0].Source.Host != "node1" {
		t.Fatalf("event object/source %+v %+v", evs[0].InvolvedObject, evs[0].Source)
	}
	// Event files are not pods.
	m.Synced(mgrPodA, nil, pod.SyncResult{})
	m.flush()
	pods, err := List(dir)
	if err != nil || len(pods) != 1 {
		t.Fatalf("List = %d pods, %v", len(pods), err)
	}
	m.Removed(mgrPodA)
	m.flush()
	if evs, _ := ReadEvents(dir, mgrPodA); len(evs) != 0 {
		t.Fatalf("events left after removal: %+v", evs)
	}
}

func TestRefusalIsAnEvent(t *testing.T) {
	m, dir, _ := newManager(t)
	m.Refused(mgrPodA, "NodeAffinity", "no match")
	m.flush()
	evs, _ := ReadEvents(dir, mgrPodA)
	if len(evs) != 1 || evs[0].Type != v1.EventTypeWarning || evs[0].Reason != "NodeAffinity" {
		t.Fatalf("events %+v", evs)
	}
}

func TestSourceProblems(t *testing.T) {
	m, dir, _ := newManager(t)
	m.SourceProblems("file", map[string]string{"a.yaml": "broken"})
	m.SourceProblems("http", map[string]string{"http://x": "500"})
	got, err := ReadSourceProblems(dir)
	if err != nil || got["file"]["a.yaml"] != "broken" || got["http"]["http://x"] != "500" {
		t.Fatalf("problems %v, %v", got, err)
	}
	m.SourceProblems("file", nil)
	got, _ = ReadSourceProblems(dir)
	if _, ok := got["file"]; ok || len(got) != 1 {
		t.Fatalf("file problems not cleared: %v", got)
	}
}

func TestNewManagerForgetsAnEarlierRun(t *testing.T) {
	m, dir, _ := newManager(t)
	m.Synced(mgrPodA, nil, pod.SyncResult{})
	m.Event(mgrPodA, v1.EventTypeNormal, "Started", "x")
	if _, err := NewManager(Config{Dir: dir, Node: "node1", RuntimeName: "containerd", Events: m.events, Clock: m.clock, Logger: m.log}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Fatalf("stale files kept: %v", entries)
	}
}
