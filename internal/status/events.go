package status

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// maxEvents is how many distinct events a pod keeps (oldest dropped).
const maxEvents = 30

// EventPublisher receives each event recorded (API mode: the API
// server's event writer). Its method must not block (it queues).
type EventPublisher interface {
	PodEvent(p *v1.Pod, eventType, reason, message string)
}

// Events records the pods' events, as the kubelet would post them to the
// API server: repeated events (same type, reason and message) are
// counted, not duplicated. A pod's events go to <ns>_<name>.events.json
// in the status directory (a v1.EventList), which `nodeagent describe`
// prints. It is built before the parts that record events (the prober,
// the allocation manager, the runtime) and the Manager, which reads none
// of them: so no part needs the Manager to exist first.
type Events struct {
	dir, node string
	clock     clock.PassiveClock
	log       *zap.Logger
	pub       EventPublisher

	mu     sync.Mutex
	events map[pod.UID][]v1.Event
	// owner is the pod whose events a file holds: the files of a name
	// belong to the pod that published there last (an old version's
	// Killing events must not replace the new one's). The Manager moves
	// it when it publishes a status (own).
	owner map[string]pod.UID
	// files queues the events files to write (the Manager's Run writes
	// them); wmu serialises writing and removing them (taken before mu).
	files *queue
	wmu   sync.Mutex
}

// NewEvents records events into the status directory dir (the Manager's;
// it creates it), each also handed to pub (nil: none).
func NewEvents(dir, node string, pub EventPublisher, c clock.PassiveClock, log *zap.Logger) *Events {
	e := &Events{dir: dir, node: node, clock: c, log: log.Named("events"), pub: pub,
		events: map[pod.UID][]v1.Event{}, owner: map[string]pod.UID{}}
	e.files = newQueue(e.write)
	return e
}

// Event records an event about p.
func (e *Events) Event(p *v1.Pod, eventType, reason, message string) {
	now := metav1.NewTime(e.clock.Now())
	e.mu.Lock()
	defer e.mu.Unlock()
	evs := e.events[p.UID]
	found := false
	for i := range evs {
		ev := &evs[i]
		if ev.Type == eventType && ev.Reason == reason && ev.Message == message {
			ev.Count++
			ev.LastTimestamp = now
			found = true
			break
		}
	}
	if !found {
		evs = append(evs, v1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: p.Name, Namespace: p.Namespace, UID: p.UID, APIVersion: "v1"},
			Type:           eventType, Reason: reason, Message: message, Count: 1,
			FirstTimestamp: now, LastTimestamp: now,
			Source: v1.EventSource{Component: "nodeagent", Host: e.node},
		})
		if len(evs) > maxEvents {
			evs = evs[len(evs)-maxEvents:]
		}
	}
	e.events[p.UID] = evs
	if e.pub != nil {
		e.pub.PodEvent(p, eventType, reason, message)
	}
	path := e.path(p)
	if o, ok := e.owner[path]; ok && o != p.UID {
		return
	}
	e.owner[path] = p.UID
	e.files.add(p)
}

// write writes p's events file as its events are now, if p owns it.
func (e *Events) write(p *v1.Pod) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	path := e.path(p)
	e.mu.Lock()
	evs := e.events[p.UID]
	owned := e.owner[path] == p.UID
	var body []byte
	var err error
	if owned && len(evs) > 0 {
		body, err = json.MarshalIndent(v1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: evs}, "", "  ")
	}
	e.mu.Unlock()
	if body != nil {
		err = writeAtomic(path, body)
	}
	if err != nil {
		e.log.Warn("write events file", zap.String("pod", pod.FullName(p)), zap.Error(err))
	}
}

// own makes p's the events its name's file shows: the Manager published
// p's status there. The file is rewritten when it held another pod's.
func (e *Events) own(p *v1.Pod) {
	e.mu.Lock()
	defer e.mu.Unlock()
	path := e.path(p)
	if o, ok := e.owner[path]; ok && o == p.UID {
		return
	}
	e.owner[path] = p.UID
	if len(e.events[p.UID]) > 0 {
		e.files.add(p)
	}
}

// removed forgets p's events and removes its file when p owns it.
func (e *Events) removed(p *v1.Pod) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.events, p.UID)
	path := e.path(p)
	if e.owner[path] != p.UID {
		return // another pod of the same name owns the file now
	}
	delete(e.owner, path)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		e.log.Warn("remove events file", zap.String("pod", pod.FullName(p)), zap.Error(err))
	}
}

func (e *Events) path(p *v1.Pod) string {
	return filepath.Join(e.dir, fileBase(p)+".events.json")
}

// ReadEvents reads a pod's events from dir, oldest first.
func ReadEvents(dir string, p *v1.Pod) ([]v1.Event, error) {
	b, err := os.ReadFile(filepath.Join(dir, fileBase(p)+".events.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list v1.EventList
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		return list.Items[i].LastTimestamp.Before(&list.Items[j].LastTimestamp)
	})
	return list.Items, nil
}

// sourcesFile holds the pod sources' problems: source → item → reason.
const sourcesFile = "_sources.json"

// SourceProblems publishes why some manifests of a source are not used
// (file name or URL → reason); an empty map clears the source's problems.
func (m *Manager) SourceProblems(source string, problems map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock() // the file is written under the lock: sources race
	if len(problems) == 0 {
		delete(m.problems, source)
	} else {
		m.problems[source] = problems
	}
	none := len(m.problems) == 0
	body, err := json.MarshalIndent(m.problems, "", "  ")
	switch {
	case none:
		if err = os.Remove(filepath.Join(m.dir, sourcesFile)); errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	case err == nil:
		err = writeAtomic(filepath.Join(m.dir, sourcesFile), body)
	}
	if err != nil {
		m.log.Warn("write source problems", zap.Error(err))
	}
}

// ReadSourceProblems reads what SourceProblems published in dir.
func ReadSourceProblems(dir string) (map[string]map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, sourcesFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out map[string]map[string]string
	return out, json.Unmarshal(b, &out)
}
