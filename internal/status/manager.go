package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Manager publishes pod statuses as files: <Dir>/<namespace>_<name>.json,
// each a whole v1.Pod (metadata, spec, status). It keeps the start time
// and condition transition times across syncs and writes only on change.
type Manager struct {
	dir         string
	runtimeName string
	hostIP      string
	clock       clock.PassiveClock
	log         *zap.Logger

	node string

	mu sync.Mutex
	// owner is the UID whose status a file name holds: an edited static
	// pod has a new UID but the same name, and the old one's removal must
	// not delete the new one's files.
	owner    map[string]pod.UID
	last     map[pod.UID]v1.PodStatus
	events   map[pod.UID][]v1.Event
	problems map[string]map[string]string
}

// NewManager creates dir if needed and forgets what an earlier run
// published there (it is rebuilt from the runtime).
func NewManager(dir, node, runtimeName, hostIP string, c clock.PassiveClock, log *zap.Logger) (*Manager, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create status directory: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read status directory: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	return &Manager{dir: dir, node: node, runtimeName: runtimeName, hostIP: hostIP, clock: c, log: log.Named("status"),
		owner: map[string]pod.UID{}, last: map[pod.UID]v1.PodStatus{}, events: map[pod.UID][]v1.Event{}, problems: map[string]map[string]string{}}, nil
}

// Synced computes and publishes the status after a sync.
func (m *Manager) Synced(p *v1.Pod, st *pod.RuntimeStatus, res pod.SyncResult) {
	m.publish(p, Compute(p, st, res, m.runtimeName))
}

// Refused publishes a pod the admit chain turned down: phase Failed with
// the handler's reason and message, as the kubelet reports it.
func (m *Manager) Refused(p *v1.Pod, reason, message string) {
	m.Event(p, v1.EventTypeWarning, reason, message)
	m.publish(p, v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message})
}

// Removed deletes a pod's status file.
func (m *Manager) Removed(p *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, p.UID)
	delete(m.events, p.UID)
	if m.owner[m.path(p)] != p.UID {
		return // another pod of the same name owns the files now
	}
	delete(m.owner, m.path(p))
	// Under the lock: a publish of the new owner cannot slip in between.
	for _, f := range []string{m.path(p), m.eventsPath(p)} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			m.log.Warn("remove status file", zap.String("pod", pod.FullName(p)), zap.Error(err))
		}
	}
}

func (m *Manager) path(p *v1.Pod) string {
	return filepath.Join(m.dir, p.Namespace+"_"+p.Name+".json")
}

func (m *Manager) publish(p *v1.Pod, s v1.PodStatus) {
	now := metav1.NewTime(m.clock.Now())
	s.HostIP = m.hostIP
	if m.hostIP != "" {
		s.HostIPs = []v1.HostIP{{IP: m.hostIP}}
	}
	m.mu.Lock()
	prev, had := m.last[p.UID]
	switch {
	case had && prev.StartTime != nil:
		s.StartTime = prev.StartTime
	case s.StartTime == nil:
		s.StartTime = &now
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.LastTransitionTime = now
		for _, pc := range prev.Conditions {
			if pc.Type == c.Type && pc.Status == c.Status {
				c.LastTransitionTime = pc.LastTransitionTime
			}
		}
	}
	changed := !had || !statusEqual(prev, s) || m.owner[m.path(p)] != p.UID
	m.last[p.UID] = s
	m.owner[m.path(p)] = p.UID
	m.mu.Unlock()
	if !changed {
		return
	}
	if prev.Phase != s.Phase {
		m.log.Info("pod phase", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)),
			zap.String("phase", string(s.Phase)), zap.String("reason", s.Reason))
	}
	out := p.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	out.Status = s
	body, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		m.log.Error("encode status", zap.Error(err))
		return
	}
	if err := writeAtomic(m.path(p), body); err != nil {
		m.log.Error("write status file", zap.String("pod", pod.FullName(p)), zap.Error(err))
	}
}

func statusEqual(a, b v1.PodStatus) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func writeAtomic(path string, body []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	if _, err := tmp.Write(body); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// List reads every published pod of dir, sorted by namespace and name.
func List(dir string) ([]*v1.Pod, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var pods []*v1.Pod
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasSuffix(e.Name(), ".events.json") ||
			strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		p, err := readPod(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		pods = append(pods, p)
	}
	sort.Slice(pods, func(i, j int) bool { return pod.FullName(pods[i]) < pod.FullName(pods[j]) })
	return pods, nil
}

func readPod(path string) (*v1.Pod, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := &v1.Pod{}
	if err := json.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return p, nil
}
