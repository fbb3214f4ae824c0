package podsource

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// IsMirror reports whether p is a mirror pod (the API's copy of a static
// pod).
func IsMirror(p *v1.Pod) bool {
	_, ok := p.Annotations[ConfigMirrorAnnotation]
	return ok
}

// IsAPIPod reports whether the agent took p from the API server.
func IsAPIPod(p *v1.Pod) bool {
	return p.Annotations[ConfigSourceAnnotation] == pod.SourceAPI
}

// APIConfig wires the API pod source.
type APIConfig struct {
	// Informer and Lister are over the pods bound to this node (mirror
	// pods included); Synced reports whether its first list arrived.
	Informer cache.SharedIndexInformer
	Lister   corelisters.PodLister
	Synced   func() bool
	// Sink receives the whole set of pods to run, each a copy marked with
	// the config.source annotation "api"; first only once the informer has
	// synced (or from the checkpoint, see below).
	Sink func([]*v1.Pod)
	// Checkpoint is a file where the last set handed over is kept. When
	// the informer has not synced within CheckpointWait of the start (the
	// API server is unreachable), the checkpointed pods are handed over,
	// so the node runs what it last knew instead of nothing.
	Checkpoint     string
	CheckpointWait time.Duration
	Clock          clock.WithTicker
	Logger         *zap.Logger
}

// API hands the pods bound to this node to the agent: every pod but
// mirror pods (those are the static pods' copies). A pod the API shows
// finished (Succeeded or Failed) is handed over too, marked so (see
// markAPI): the agent never runs it again but keeps its stopped
// containers, and so their logs, until the pod is deleted — as the
// kubelet does.
type API struct {
	cfg  APIConfig
	log  *zap.Logger
	poke chan struct{}

	mu sync.Mutex
	// dirty holds the namespace/name keys of the pods changed since the
	// last hand-over: only those are looked at again, so a change costs
	// the work of one pod, not of every pod on the node.
	dirty map[string]bool

	// handed is what was handed over last, by key (Run's own).
	handed map[string]handed
}

// handed is one pod handed over: the informer's object it was made from
// (the same pointer means nothing to redo), the marked copy, and that
// copy as JSON for the checkpoint.
type handed struct {
	from *v1.Pod
	pod  *v1.Pod
	json []byte
}

// NewAPI registers the source's handlers on the informer.
func NewAPI(cfg APIConfig) (*API, error) {
	if cfg.Informer == nil || cfg.Lister == nil || cfg.Synced == nil || cfg.Sink == nil || cfg.Logger == nil || cfg.Clock == nil {
		return nil, errors.New("api pod source: Informer, Lister, Synced, Sink, Clock and Logger are required")
	}
	if cfg.CheckpointWait <= 0 {
		cfg.CheckpointWait = 5 * time.Second
	}
	s := &API{cfg: cfg, log: cfg.Logger.Named("apisource"), poke: make(chan struct{}, 1),
		dirty: map[string]bool{}, handed: map[string]handed{}}
	_, err := cfg.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: s.changed,
		UpdateFunc: func(o, n any) {
			if handedOverChanged(o, n) {
				s.changed(n)
			}
		},
		DeleteFunc: s.changed,
	})
	return s, err
}

// changed marks obj's key dirty and wakes Run.
func (s *API) changed(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	s.mu.Lock()
	s.dirty[key] = true
	s.mu.Unlock()
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// takeDirty returns the keys changed since the last call.
func (s *API) takeDirty() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dirty
	s.dirty = map[string]bool{}
	return d
}

// Run hands over the set after every change until ctx ends.
func (s *API) Run(ctx context.Context) error {
	synced := s.cfg.Synced
	wait := s.cfg.Clock.NewTimer(s.cfg.CheckpointWait)
	defer wait.Stop()
	poll := s.cfg.Clock.NewTicker(50 * time.Millisecond) // the informer's HasSynced has no signal
	defer poll.Stop()
	for !synced() {
		select {
		case <-ctx.Done():
			return nil
		case <-s.poke:
		case <-poll.C():
		case <-wait.C():
			pods, err := readCheckpoint(s.cfg.Checkpoint)
			switch {
			case err != nil:
				s.log.Warn("API server not reached and no usable checkpoint of its pods; waiting for it", zap.Error(err))
			default:
				s.log.Warn("API server not reached; running the pods it last bound to this node until it answers", zap.Int("pods", len(pods)))
				s.cfg.Sink(pods)
			}
		}
	}
	s.log.Info("API pods synced")
	s.takeDirty() // the first hand-over looks at every pod
	all, _ := s.cfg.Lister.List(labels.Everything())
	for _, p := range all {
		key, err := cache.MetaNamespaceKeyFunc(p)
		if err == nil {
			s.update(key, p)
		}
	}
	var last []byte
	for {
		pods := s.current()
		last = s.checkpoint(pods, last) // durable before acted on
		s.cfg.Sink(pods)
		select {
		case <-ctx.Done():
			return nil
		case <-s.poke:
		}
		for key := range s.takeDirty() {
			ns, name, err := cache.SplitMetaNamespaceKey(key)
			if err != nil {
				continue
			}
			p, err := s.cfg.Lister.Pods(ns).Get(name)
			if err != nil {
				p = nil // gone
			}
			s.update(key, p)
		}
	}
}

// update records what key hands over now: p marked (nil, or a mirror
// pod: nothing).
func (s *API) update(key string, p *v1.Pod) {
	if p == nil || IsMirror(p) {
		delete(s.handed, key)
		return
	}
	if h, ok := s.handed[key]; ok && h.from == p {
		return
	}
	m := MarkAPI(p)
	body, err := json.Marshal(m)
	if err != nil {
		body = nil
	}
	s.handed[key] = handed{from: p, pod: m, json: body}
}

// current is the set to hand over, sorted by UID; the pods not changed
// since the last hand-over are the same pointers (the Mux skips them).
func (s *API) current() []*v1.Pod {
	out := make([]*v1.Pod, 0, len(s.handed))
	for _, h := range s.handed {
		out = append(out, h.pod)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// handedOverChanged reports whether an informer update changes what the
// source hands over (markAPI's view): most updates are the agent's own
// status writes, which need no re-list and re-diff of every pod.
func handedOverChanged(o, n any) bool {
	op, ok1 := o.(*v1.Pod)
	np, ok2 := n.(*v1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	if IsMirror(op) && IsMirror(np) {
		return false // never handed over
	}
	// MarkAPI's view, compared without copying either pod.
	om, nm := op.ObjectMeta, np.ObjectMeta
	om.ResourceVersion, nm.ResourceVersion = "", ""
	om.ManagedFields, nm.ManagedFields = nil, nil
	return !apiequality.Semantic.DeepEqual(om, nm) || !apiequality.Semantic.DeepEqual(op.Spec, np.Spec) ||
		!apiequality.Semantic.DeepEqual(handedStatus(op), handedStatus(np))
}

// handedStatus is the part of p's status MarkAPI keeps.
func handedStatus(p *v1.Pod) v1.PodStatus {
	var s v1.PodStatus
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		s.Phase, s.Reason, s.Message = p.Status.Phase, p.Status.Reason, p.Status.Message
	}
	s.StartTime = p.Status.StartTime // activeDeadlineSeconds counts from it, across agent restarts
	for _, g := range p.Spec.ReadinessGates {
		if cond := podCondition(p.Status.Conditions, g.ConditionType); cond != nil {
			s.Conditions = append(s.Conditions, *cond)
		}
	}
	return s
}

// markAPI returns a copy of the informer's pod (never modified in place)
// with the config.source annotation and without what only the API
// changes (resourceVersion, managed fields, the status but for two
// parts): the agent's own status writes do not make the pod "updated"
// and synced again. Of the status it keeps what others decide and the
// agent acts on: a terminal phase with its reason and message (the pod
// is over: never run again), the conditions of the pod's readiness
// gates (the pod is Ready only when they are True), and the start time
// (activeDeadlineSeconds counts from it), set once.
func MarkAPI(p *v1.Pod) *v1.Pod {
	c := &v1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: *p.ObjectMeta.DeepCopy(), Spec: *p.Spec.DeepCopy()}
	c.ResourceVersion, c.ManagedFields = "", nil
	st := handedStatus(p)
	c.Status = *st.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[ConfigSourceAnnotation] = pod.SourceAPI
	return c
}

// checkpoint writes the set when it changed; it returns what it wrote.
func (s *API) checkpoint(pods []*v1.Pod, last []byte) []byte {
	if s.cfg.Checkpoint == "" {
		return nil
	}
	// The pods carry no status (markAPI): only what to run; statuses come
	// back from the runtime. The list is put together from each pod's
	// JSON, made once when it changed.
	body, err := s.listJSON(pods)
	if err != nil || bytes.Equal(body, last) {
		return last
	}
	if err := writeCheckpoint(s.cfg.Checkpoint, body); err != nil {
		s.log.Warn("checkpoint API pods", zap.Error(err))
		return last
	}
	return body
}

// listJSON is pods as a v1.PodList in JSON, from the JSON update made
// of each.
func (s *API) listJSON(pods []*v1.Pod) ([]byte, error) {
	byUID := make(map[types.UID][]byte, len(s.handed))
	for _, h := range s.handed {
		byUID[h.pod.UID] = h.json
	}
	var b bytes.Buffer
	b.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[`)
	for i, p := range pods {
		j := byUID[p.UID]
		if j == nil {
			return nil, fmt.Errorf("pod %s: not encoded", pod.FullName(p))
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(j)
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

func readCheckpoint(path string) ([]*v1.Pod, error) {
	if path == "" {
		return nil, errors.New("no checkpoint file configured")
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var l v1.PodList
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	out := make([]*v1.Pod, 0, len(l.Items))
	uids := make(map[types.UID]bool, len(l.Items))
	for i := range l.Items {
		p := &l.Items[i]
		if p.UID == "" || p.Name == "" || p.Namespace == "" || !IsAPIPod(p) || p.Annotations[v1.MirrorPodAnnotationKey] != "" {
			return nil, fmt.Errorf("checkpoint %s: pod %d is not an API pod", path, i)
		}
		if uids[p.UID] {
			return nil, fmt.Errorf("checkpoint %s: pod %d repeats UID %s", path, i, p.UID)
		}
		uids[p.UID] = true
		out = append(out, p)
	}
	return out, nil
}

func podCondition(cs []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// writeCheckpoint writes the checkpoint, creating its directory: whole
// (a rename) and before the set is acted on, so an agent that dies keeps
// every pod it started; not fsynced (one per API change) — a machine
// that loses its page cache lost the containers too, and the API server
// is the truth again once it answers.
func writeCheckpoint(path string, body []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, body, 0o600, false)
}
