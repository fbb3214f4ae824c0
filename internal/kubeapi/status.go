package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/podsource"
)

// StatusConfig wires the StatusWriter.
type StatusConfig struct {
	Client   kubernetes.Interface
	Pods     *NodePods
	NodeName string
	// NodeUID returns the registered Node's UID ("" until registered):
	// mirror pods are owned by the Node.
	NodeUID func() types.UID
	// StaticSources are the sources of static pods (file, http): until
	// each has handed over its pods (StaticPods), no mirror pod is an
	// orphan.
	StaticSources []string
	// Clock ticks the look for orphaned mirror pods; the wall clock when
	// nil.
	Clock  clock.WithTicker
	Logger *zap.Logger
}

// StatusWriter is the one writer of pod statuses to the API server. It
// keeps the newest status of each pod and patches it to the API's pod
// (the mirror pod, for a static pod) from its own goroutine — only when
// it differs from what the API shows, with per-pod retry and backoff,
// never turning a finished pod (Succeeded, Failed) back into a running
// one, never writing to another pod of the same name (a UID
// precondition). It also keeps each static pod's mirror pod, deletes an
// API pod whose deletion was asked for once its containers are gone, and
// posts events.
type StatusWriter struct {
	cfg   StatusConfig
	log   *zap.Logger
	queue workqueue.TypedRateLimitingInterface[types.UID]
	rec   record.EventRecorder
	bcast record.EventBroadcaster

	mu     sync.Mutex
	want   map[types.UID]*entry
	static map[string]types.UID // namespace/name of published static pods → UID
	// desired holds, per static source, the namespace/name of every pod it
	// hands over (admitted or not): a mirror pod of such a name is never
	// an orphan.
	desired map[string]map[string]bool
	// deleted holds the API pods this writer deleted (→ namespace/name)
	// while the informer still has them: a removal told again (the
	// pod's final status echoed back to the node) deletes nothing twice.
	deleted map[types.UID]string
}

type entry struct {
	pod     *v1.Pod
	status  *v1.PodStatus // nil until the first status
	removed bool
}

// NewStatusWriter registers the writer's handlers on the informer.
func NewStatusWriter(cfg StatusConfig) (*StatusWriter, error) {
	if cfg.Client == nil || cfg.Pods == nil || cfg.NodeName == "" || cfg.NodeUID == nil || cfg.Logger == nil {
		return nil, errors.New("status writer: Client, Pods, NodeName, NodeUID and Logger are required")
	}
	w := &StatusWriter{cfg: cfg, log: cfg.Logger.Named("apistatus"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](200*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "podstatus"}),
		want: map[types.UID]*entry{}, static: map[string]types.UID{}, desired: map[string]map[string]bool{}, deleted: map[types.UID]string{}}
	// Events as client-go's recorder posts them: aggregated (similar
	// events within 10 minutes become one with a count) and rate-limited
	// per object.
	w.bcast = record.NewBroadcaster()
	w.bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
	w.rec = w.bcast.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: cfg.NodeName})
	onPod := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				p, _ = t.Obj.(*v1.Pod)
			}
		}
		if p == nil {
			return
		}
		w.mu.Lock()
		uid, isStatic := w.static[p.Namespace+"/"+p.Name]
		_, isOurs := w.want[p.UID]
		w.mu.Unlock()
		switch {
		case isStatic && podsource.IsMirror(p):
			w.queue.Add(uid) // created, changed or deleted: re-check the mirror
		case isOurs:
			w.queue.Add(p.UID)
		case podsource.IsMirror(p):
			w.queue.Add(orphanKey) // maybe an orphan
		}
	}
	_, err := cfg.Pods.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, n any) { onPod(n) }, DeleteFunc: onPod,
	})
	return w, err
}

// orphanKey queues a pass over the mirror pods no static pod owns.
const orphanKey = types.UID("\x00orphans")

// StaticPods records the pods a static source hands over (its whole set).
func (w *StatusWriter) StaticPods(source string, pods []*v1.Pod) {
	names := make(map[string]bool, len(pods))
	for _, p := range pods {
		names[p.Namespace+"/"+p.Name] = true
	}
	w.mu.Lock()
	w.desired[source] = names
	w.mu.Unlock()
	w.queue.Add(orphanKey)
}

// Recorder is the API event recorder ("kubelet" source, this node).
func (w *StatusWriter) Recorder() record.EventRecorder { return w.rec }

// PodStatus records p's newest status (called on every change).
func (w *StatusWriter) PodStatus(p *v1.Pod, s v1.PodStatus) {
	s = *s.DeepCopy()
	w.mu.Lock()
	e := w.want[p.UID]
	if e == nil {
		e = &entry{}
		w.want[p.UID] = e
	}
	e.pod, e.status, e.removed = p, &s, false
	if !podsource.IsAPIPod(p) {
		w.static[p.Namespace+"/"+p.Name] = p.UID
	}
	w.mu.Unlock()
	w.queue.Add(p.UID)
}

// PodRemoved records that p is gone from the node: an API pod whose
// deletion was asked for is deleted for good; a static pod's mirror pod
// is deleted.
func (w *StatusWriter) PodRemoved(p *v1.Pod) {
	w.mu.Lock()
	if _, done := w.deleted[p.UID]; done {
		w.mu.Unlock()
		return
	}
	e := w.want[p.UID]
	if e == nil {
		e = &entry{pod: p}
		w.want[p.UID] = e
	}
	if p.DeletionTimestamp != nil || e.pod == nil {
		e.pod = p
	}
	e.removed = true
	w.mu.Unlock()
	w.queue.Add(p.UID)
}

// PodEvent posts an event about p; a static pod's events are about its
// mirror pod, so that `kubectl describe` shows them.
func (w *StatusWriter) PodEvent(p *v1.Pod, eventType, reason, message string) {
	obj := p
	if !podsource.IsAPIPod(p) {
		if m, ok := w.cfg.Pods.Get(p.Namespace, p.Name); ok && podsource.IsMirror(m) {
			obj = m
		}
	}
	w.rec.Event(obj, eventType, reason, message)
}

// Run writes until ctx ends.
func (w *StatusWriter) Run(ctx context.Context) {
	defer w.bcast.Shutdown()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		<-ctx.Done()
		w.queue.ShutDown()
	})
	// Orphaned mirror pods are looked for now and then too: a static pod
	// removed while the agent was down leaves one.
	clk := w.cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	wg.Go(func() {
		t := clk.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				w.queue.Add(orphanKey)
			}
		}
	})
	for {
		uid, quit := w.queue.Get()
		if quit {
			return
		}
		err := w.sync(ctx, uid)
		switch {
		case err == nil:
			w.queue.Forget(uid)
		case ctx.Err() != nil:
		default:
			w.log.Warn("write pod to the API server failed; retrying", zap.String("uid", string(uid)), zap.Error(err))
			w.queue.AddRateLimited(uid)
		}
		w.queue.Done(uid)
	}
}

func (w *StatusWriter) sync(ctx context.Context, uid types.UID) error {
	if uid == orphanKey {
		w.forgetDeleted()
		return w.deleteOrphanedMirrors(ctx)
	}
	w.mu.Lock()
	e, ok := w.want[uid]
	var p *v1.Pod
	var s *v1.PodStatus
	removed := false
	if ok {
		p, s, removed = e.pod, e.status, e.removed
	}
	w.mu.Unlock()
	if !ok {
		return nil
	}
	if removed {
		if podsource.IsAPIPod(p) && p.DeletionTimestamp != nil && s != nil {
			// The final status goes before the object.
			if cur, ok := w.cfg.Pods.Get(p.Namespace, p.Name); ok && cur.UID == p.UID {
				if err := w.patchStatus(ctx, cur, *s, observed(p, cur)); err != nil {
					return err
				}
			}
		}
		if err := w.finish(ctx, p); err != nil {
			return err
		}
		w.mu.Lock()
		if e := w.want[uid]; e != nil && e.removed {
			delete(w.want, uid)
			if w.static[p.Namespace+"/"+p.Name] == uid {
				delete(w.static, p.Namespace+"/"+p.Name)
			}
		}
		w.mu.Unlock()
		return nil
	}
	var target *v1.Pod
	if podsource.IsAPIPod(p) {
		cur, ok := w.cfg.Pods.Get(p.Namespace, p.Name)
		if !ok || cur.UID != p.UID {
			return nil // gone from the API (or replaced): nothing to write to
		}
		target = cur
	} else {
		m, err := w.ensureMirror(ctx, p)
		if err != nil || m == nil {
			return err
		}
		target = m
	}
	if s == nil {
		return nil
	}
	return w.patchStatus(ctx, target, *s, observed(p, target))
}

// forgetDeleted forgets the deleted pods the informer no longer has.
func (w *StatusWriter) forgetDeleted() {
	w.mu.Lock()
	deleted := maps.Clone(w.deleted)
	w.mu.Unlock()
	for uid, key := range deleted {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		if p, ok := w.cfg.Pods.Get(ns, name); ok && p.UID == uid {
			continue
		}
		w.mu.Lock()
		delete(w.deleted, uid)
		w.mu.Unlock()
	}
}

// observed is the generation a status computed for p reflects: p's own
// (the spec the agent acted on), not the API's newest — a status must
// not claim a spec change (a resize) the agent has not seen yet. A
// mirror pod's is its own.
func observed(p, target *v1.Pod) int64 {
	if podsource.IsAPIPod(p) && p.Generation != 0 {
		return p.Generation
	}
	return target.Generation
}

// ownedConditions are the pod conditions the node sets (the kubelet's
// PodConditionsByKubelet, the resize ones included: one the node no
// longer reports is removed); others (set by the scheduler, controllers
// or readiness gates) are kept as they are.
var ownedConditions = map[v1.PodConditionType]bool{
	v1.PodReadyToStartContainers: true, v1.PodInitialized: true, v1.ContainersReady: true, v1.PodReady: true, v1.PodScheduled: true,
	v1.PodResizePending: true, v1.PodResizeInProgress: true,
}

func isTerminal(ph v1.PodPhase) bool { return ph == v1.PodSucceeded || ph == v1.PodFailed }

// patchStatus writes s to target when it differs, as a strategic merge
// patch that also carries target's UID: applied to any other pod of that
// name it fails (the UID is immutable).
func (w *StatusWriter) patchStatus(ctx context.Context, target *v1.Pod, s v1.PodStatus, generation int64) error {
	old := target.Status
	if isTerminal(old.Phase) && !isTerminal(s.Phase) {
		return nil // a finished pod stays finished
	}
	s = merged(old, s, generation)
	if isTerminal(old.Phase) {
		// A finished pod stays as it finished: how it ended and its
		// containers' last states are final (an agent that restarted
		// after the runtime lost them must not overwrite them); only the
		// node's conditions follow (the sandbox stopped).
		s.Phase, s.Reason, s.Message = old.Phase, old.Reason, old.Message
		s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses =
			old.InitContainerStatuses, old.ContainerStatuses, old.EphemeralContainerStatuses
		if len(old.PodIPs) > 0 {
			s.PodIP, s.PodIPs = old.PodIP, old.PodIPs
		}
	}
	oldJSON, err := json.Marshal(v1.Pod{Status: old})
	if err != nil {
		return err
	}
	newJSON, err := json.Marshal(v1.Pod{Status: s})
	if err != nil {
		return err
	}
	if string(oldJSON) == string(newJSON) {
		return nil
	}
	withUID, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: target.UID}, Status: s})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, withUID, v1.Pod{})
	if err != nil {
		return fmt.Errorf("status patch: %w", err)
	}
	_, err = w.cfg.Client.CoreV1().Pods(target.Namespace).Patch(ctx, target.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("patch status of %s/%s: %w", target.Namespace, target.Name, err)
	}
	if old.Phase != s.Phase {
		w.log.Info("pod status written", zap.String("pod", target.Namespace+"/"+target.Name), zap.String("phase", string(s.Phase)))
	}
	return nil
}

// merged is the status to write: the node's fields from s (the
// containers' allocatedResources and resources with their statuses), and
// what others own (nominatedNodeName, resource claim statuses,
// conditions of readiness gates or the scheduler, …) as old has it. The
// API's startTime and the transition times of unchanged conditions are
// kept (a resize condition's only while its reason is the same, as the
// kubelet moves it). observedGeneration is the pod's generation.
func merged(old, s v1.PodStatus, generation int64) v1.PodStatus {
	out := *old.DeepCopy()
	out.Phase, out.Message, out.Reason = s.Phase, s.Message, s.Reason
	out.HostIP, out.HostIPs, out.PodIP, out.PodIPs = s.HostIP, s.HostIPs, s.PodIP, s.PodIPs
	out.InitContainerStatuses, out.ContainerStatuses = s.InitContainerStatuses, s.ContainerStatuses
	out.EphemeralContainerStatuses = s.EphemeralContainerStatuses
	if s.QOSClass != "" {
		out.QOSClass = s.QOSClass
	}
	if out.StartTime == nil {
		out.StartTime = s.StartTime
	}
	out.ObservedGeneration = generation
	out.Conditions = nil
	for _, c := range s.Conditions {
		if c.Type == v1.PodScheduled {
			if oc := findCondition(old.Conditions, v1.PodScheduled); oc != nil {
				c = *oc // the scheduler's, when it set it
			}
		} else if oc := findCondition(old.Conditions, c.Type); oc != nil && oc.Status == c.Status && (!isResize(c.Type) || oc.Reason == c.Reason) {
			c.LastTransitionTime = oc.LastTransitionTime
		}
		out.Conditions = append(out.Conditions, c)
	}
	for _, oc := range old.Conditions {
		// Others' conditions stay, unless the node set that type too (a
		// DisruptionTarget the node's eviction or shutdown reports).
		if !ownedConditions[oc.Type] && findCondition(s.Conditions, oc.Type) == nil {
			out.Conditions = append(out.Conditions, oc)
		}
	}
	return out
}

func isResize(t v1.PodConditionType) bool {
	return t == v1.PodResizePending || t == v1.PodResizeInProgress
}

func findCondition(cs []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// finish ends a removed pod's life in the API: an API pod whose deletion
// was asked for is deleted with grace 0 (its containers are gone) and its
// UID as precondition; a static pod's mirror pod is deleted.
func (w *StatusWriter) finish(ctx context.Context, p *v1.Pod) error {
	if podsource.IsAPIPod(p) {
		if p.DeletionTimestamp == nil {
			return nil
		}
		err := w.deletePod(ctx, p.Namespace, p.Name, p.UID)
		if err == nil {
			w.mu.Lock()
			w.deleted[p.UID] = p.Namespace + "/" + p.Name
			w.mu.Unlock()
			w.log.Info("pod deleted from the API server", zap.String("pod", p.Namespace+"/"+p.Name), zap.String("uid", string(p.UID)))
		}
		return err
	}
	w.mu.Lock()
	owner, owned := w.static[p.Namespace+"/"+p.Name]
	w.mu.Unlock()
	if owned && owner != p.UID {
		return nil // a newer static pod of that name owns the mirror now
	}
	if m, ok := w.cfg.Pods.Get(p.Namespace, p.Name); ok && podsource.IsMirror(m) {
		return w.deletePod(ctx, m.Namespace, m.Name, m.UID)
	}
	return nil
}

func (w *StatusWriter) deletePod(ctx context.Context, ns, name string, uid types.UID) error {
	zero := int64(0)
	err := w.cfg.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	return nil
}
