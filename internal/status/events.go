package status

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// maxEvents is how many distinct events a pod keeps (oldest dropped).
const maxEvents = 30

// Event records an event about a pod, as the kubelet would post it to the
// API server: repeated events (same type, reason and message) are counted,
// not duplicated. The pod's events go to <ns>_<name>.events.json (a
// v1.EventList), which `nodeagent describe` prints.
func (m *Manager) Event(p *v1.Pod, eventType, reason, message string) {
	now := metav1.NewTime(m.clock.Now())
	m.mu.Lock()
	evs := m.events[p.UID]
	found := false
	for i := range evs {
		e := &evs[i]
		if e.Type == eventType && e.Reason == reason && e.Message == message {
			e.Count++
			e.LastTimestamp = now
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
			Source: v1.EventSource{Component: "nodeagent", Host: m.node},
		})
		if len(evs) > maxEvents {
			evs = evs[len(evs)-maxEvents:]
		}
	}
	m.events[p.UID] = evs
	if m.pub != nil {
		m.pub.PodEvent(p, eventType, reason, message)
	}
	defer m.mu.Unlock()
	// The files of a name belong to the pod that published there last (an
	// old version's Killing events must not replace the new one's).
	if o, ok := m.owner[m.path(p)]; ok && o != p.UID {
		return
	}
	m.owner[m.path(p)] = p.UID
	list := v1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: append([]v1.Event(nil), evs...)}
	body, err := json.MarshalIndent(list, "", "  ")
	if err == nil {
		err = writeAtomic(m.eventsPath(p), body)
	}
	if err != nil {
		m.log.Warn("write events file", zap.String("pod", pod.FullName(p)), zap.Error(err))
	}
}

func (m *Manager) eventsPath(p *v1.Pod) string {
	return filepath.Join(m.dir, fileBase(p)+".events.json")
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
