package kubeapi

import (
	"context"
	"encoding/json"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podsource"
)

// These tests call the writer's sync for one pod directly and look at the
// requests the fake clientset received; the informer is not started: its
// store is filled by the test, so what the writer reads is exact.

type statusRig struct {
	w    *StatusWriter
	cs   *fake.Clientset
	pods *NodePods
}

func newStatusRig(t *testing.T, objs ...*v1.Pod) *statusRig {
	t.Helper()
	cs := fake.NewClientset()
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().Pods()
	np := &NodePods{Informer: inf.Informer(), Lister: inf.Lister(), factory: f, synced: func() bool { return true }}
	r := &statusRig{cs: cs, pods: np}
	for _, p := range objs {
		r.put(t, p)
	}
	w, err := NewStatusWriter(StatusConfig{Client: cs, Pods: np, NodeName: "n1",
		NodeUID: func() types.UID { return "node-uid" }, StaticSources: []string{pod.SourceFile},
		Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.bcast.Shutdown)
	r.w = w
	return r
}

// put stores p in the API (fake clientset) and the informer's cache.
func (r *statusRig) put(t *testing.T, p *v1.Pod) {
	t.Helper()
	if err := r.pods.Informer.GetStore().Add(p); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cs.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), p.Namespace, p.Name); err == nil {
		if err := r.cs.Tracker().Update(v1.SchemeGroupVersion.WithResource("pods"), p, p.Namespace); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := r.cs.Tracker().Add(p); err != nil {
		t.Fatal(err)
	}
}

// refresh copies the API's version of the pod into the cache, as the
// informer would.
func (r *statusRig) refresh(t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	p, err := r.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.pods.Informer.GetStore().Update(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *statusRig) sync(t *testing.T, uid types.UID) {
	t.Helper()
	if err := r.w.sync(context.Background(), uid); err != nil {
		t.Fatalf("sync %s: %v", uid, err)
	}
}

// writes returns the non-read requests made since the last call.
func (r *statusRig) writes() []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range r.cs.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			out = append(out, a)
		}
	}
	r.cs.ClearActions()
	return out
}

func apiPod(uid, name string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "default", Generation: 3},
		Spec:   v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}},
		Status: v1.PodStatus{Phase: phase}}
}

func running() v1.PodStatus {
	return v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.5", Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
}

func TestStatusIsPatchedOnlyWhenItChanges(t *testing.T) {
	stored := apiPod("u1", "a", v1.PodPending)
	stored.Status.Conditions = []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}
	r := newStatusRig(t, stored)
	r.w.PodStatus(podsource.MarkAPI(stored), running())
	r.sync(t, "u1")
	ws := r.writes()
	if len(ws) != 1 || ws[0].GetVerb() != "patch" || ws[0].GetSubresource() != "status" {
		t.Fatalf("writes = %v, want one status patch", ws)
	}
	var body struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(ws[0].(k8stesting.PatchAction).GetPatch(), &body); err != nil || body.Metadata.UID != "u1" {
		t.Fatalf("patch %s: want the pod's UID in it (a precondition), err %v", ws[0].(k8stesting.PatchAction).GetPatch(), err)
	}
	got := r.refresh(t, "default", "a")
	if got.Status.Phase != v1.PodRunning || got.Status.PodIP != "10.0.0.5" || got.Status.ObservedGeneration != 3 {
		t.Fatalf("API status = %+v", got.Status)
	}
	if findCondition(got.Status.Conditions, "example.com/gate") == nil {
		t.Fatalf("a condition the node does not own was dropped: %+v", got.Status.Conditions)
	}
	// The same status again: nothing to write.
	r.w.PodStatus(podsource.MarkAPI(stored), running())
	r.sync(t, "u1")
	if ws := r.writes(); len(ws) != 0 {
		t.Fatalf("writes = %v for an unchanged status, want none", ws)
	}
}

// The ephemeral containers' statuses (kubectl debug) are the node's to
// write, as the others': kubectl waits on them.
func TestEphemeralContainerStatusesAreWritten(t *testing.T) {
	stored := apiPod("u1", "a", v1.PodRunning)
	stored.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox"}}}
	r := newStatusRig(t, stored)
	s := running()
	s.EphemeralContainerStatuses = []v1.ContainerStatus{{Name: "dbg", Image: "busybox", ContainerID: "containerd://e1",
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	r.w.PodStatus(podsource.MarkAPI(stored), s)
	r.sync(t, "u1")
	got := r.refresh(t, "default", "a")
	if len(got.Status.EphemeralContainerStatuses) != 1 || got.Status.EphemeralContainerStatuses[0].ContainerID != "containerd://e1" ||
		got.Status.EphemeralContainerStatuses[0].State.Running == nil {
		t.Fatalf("API ephemeralContainerStatuses = %+v, want dbg running", got.Status.EphemeralContainerStatuses)
	}
	s = *s.DeepCopy()
	s.EphemeralContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}
	r.w.PodStatus(podsource.MarkAPI(got), s)
	r.sync(t, "u1")
	got = r.refresh(t, "default", "a")
	if len(got.Status.EphemeralContainerStatuses) != 1 || got.Status.EphemeralContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("API ephemeralContainerStatuses = %+v, want dbg terminated", got.Status.EphemeralContainerStatuses)
	}
}

func TestFinishedPodIsNeverWrittenBackToRunning(t *testing.T) {
	stored := apiPod("u1", "a", v1.PodSucceeded)
	r := newStatusRig(t, stored)
	r.w.PodStatus(podsource.MarkAPI(stored), running())
	r.sync(t, "u1")
	if ws := r.writes(); len(ws) != 0 {
		t.Fatalf("writes = %v, want none for a Succeeded pod", ws)
	}
}

// A pod the API shows finished keeps how it ended and its containers'
// last states (an agent restarted after the runtime lost them reports
// them unknown); only the node's conditions follow.
func TestFinishedPodKeepsItsEndAndOnlyItsConditionsFollow(t *testing.T) {
	stored := apiPod("u1", "a", v1.PodFailed)
	stored.Status.Reason = "DeadlineExceeded"
	stored.Status.PodIP, stored.Status.PodIPs = "10.0.0.5", []v1.PodIP{{IP: "10.0.0.5"}}
	exited := v1.ContainerStatus{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}
	stored.Status.ContainerStatuses = []v1.ContainerStatus{exited}
	stored.Status.Conditions = []v1.PodCondition{{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}}
	r := newStatusRig(t, stored)
	lost := v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown"}}}}}
	r.w.PodStatus(podsource.MarkAPI(stored), lost)
	r.sync(t, "u1")
	got := r.refresh(t, "default", "a")
	if got.Status.Reason != "DeadlineExceeded" || got.Status.PodIP != "10.0.0.5" || len(got.Status.ContainerStatuses) != 1 ||
		got.Status.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
		t.Fatalf("API status = %+v, want the pod's end as it was", got.Status)
	}
	if c := findCondition(got.Status.Conditions, v1.PodReadyToStartContainers); c == nil || c.Status != v1.ConditionFalse {
		t.Fatalf("conditions = %+v, want PodReadyToStartContainers False", got.Status.Conditions)
	}
}

func TestStatusOfAReplacedPodIsNotWritten(t *testing.T) {
	// The API holds a newer pod of the same name (another UID).
	r := newStatusRig(t, apiPod("u2", "a", v1.PodPending))
	r.w.PodStatus(podsource.MarkAPI(apiPod("u1", "a", v1.PodPending)), running())
	r.sync(t, "u1")
	if ws := r.writes(); len(ws) != 0 {
		t.Fatalf("writes = %v, want none to another pod of the name", ws)
	}
}

func TestDeletedPodIsRemovedWithGraceZeroAndItsUID(t *testing.T) {
	stored := apiPod("u1", "a", v1.PodRunning)
	now := metav1.Now()
	stored.DeletionTimestamp = &now
	r := newStatusRig(t, stored)
	r.w.PodRemoved(podsource.MarkAPI(stored))
	r.sync(t, "u1")
	ws := r.writes()
	if len(ws) != 1 || ws[0].GetVerb() != "delete" {
		t.Fatalf("writes = %v, want one delete", ws)
	}
	opts := ws[0].(k8stesting.DeleteAction).GetDeleteOptions()
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != "u1" {
		t.Fatalf("delete options = %+v, want grace 0 and UID u1", opts)
	}
	// Told again (its final status came back to the node while the
	// informer still has it), the writer deletes nothing twice; once the
	// informer has it no more, it is forgotten.
	r.w.PodRemoved(podsource.MarkAPI(stored))
	r.sync(t, "u1")
	if ws := r.writes(); len(ws) != 0 {
		t.Fatalf("writes = %v after the removal was told again, want none", ws)
	}
	if err := r.pods.Informer.GetStore().Delete(stored); err != nil {
		t.Fatal(err)
	}
	r.sync(t, orphanKey)
	if len(r.w.deleted) != 0 {
		t.Fatalf("deleted = %v once the informer dropped the pod, want none", r.w.deleted)
	}
	// A pod removed from the node without a deletion (it finished) stays.
	r2 := newStatusRig(t, apiPod("u3", "b", v1.PodSucceeded))
	r2.w.PodRemoved(podsource.MarkAPI(apiPod("u3", "b", v1.PodSucceeded)))
	r2.sync(t, "u3")
	if ws := r2.writes(); len(ws) != 0 {
		t.Fatalf("writes = %v, want none", ws)
	}
}

func staticPod(uid, name, hash string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "kube-system",
		Annotations: map[string]string{podsource.ConfigHashAnnotation: hash, podsource.ConfigSourceAnnotation: pod.SourceFile}},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Image: "i"}}}}
	return p
}

func TestMirrorPodIsCreatedReplacedAndGetsTheStatus(t *testing.T) {
	r := newStatusRig(t)
	sp := staticPod("s1", "etcd-n1", "h1")
	r.w.PodStatus(sp, running())
	r.sync(t, "s1")
	ws := r.writes()
	if len(ws) != 2 || ws[0].GetVerb() != "create" || ws[1].GetVerb() != "patch" || ws[1].GetSubresource() != "status" {
		t.Fatalf("writes = %v, want the mirror pod created and the static pod's status written to it", ws)
	}
	m := ws[0].(k8stesting.CreateAction).GetObject().(*v1.Pod)
	if m.Annotations[podsource.ConfigMirrorAnnotation] != "h1" || len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "Node" || m.OwnerReferences[0].UID != "node-uid" {
		t.Fatalf("mirror pod = %+v", m.ObjectMeta)
	}
	// The informer sees it (the fake API gives no UID: the test does);
	// nothing more to write.
	m = r.refresh(t, "kube-system", "etcd-n1")
	m.UID = "m1"
	r.put(t, m)
	r.sync(t, "s1")
	if ws = r.writes(); len(ws) != 0 {
		t.Fatalf("writes = %v, want none: the mirror pod shows the status", ws)
	}
	// kubectl delete of the mirror pod: it is replaced, the static pod
	// untouched.
	m = r.refresh(t, "kube-system", "etcd-n1")
	now := metav1.Now()
	m.DeletionTimestamp = &now
	r.put(t, m)
	r.sync(t, "s1")
	ws = r.writes()
	if len(ws) < 2 || ws[0].GetVerb() != "delete" || ws[1].GetVerb() != "create" {
		t.Fatalf("writes = %v, want the deleted mirror replaced (delete, create)", ws)
	}
	// An edited static pod (new UID and hash) replaces its mirror pod.
	m = r.refresh(t, "kube-system", "etcd-n1")
	m.UID = "m2"
	r.put(t, m)
	sp2 := staticPod("s2", "etcd-n1", "h2")
	r.w.PodStatus(sp2, running())
	r.w.PodRemoved(sp)
	r.sync(t, "s1") // the old static pod's removal leaves the new one's mirror
	if ws := r.writes(); len(ws) != 0 {
		t.Fatalf("writes = %v; the old static pod's removal must not touch the new one's mirror", ws)
	}
	r.sync(t, "s2")
	ws = r.writes()
	if len(ws) < 2 || ws[0].GetVerb() != "delete" || ws[1].GetVerb() != "create" {
		t.Fatalf("writes = %v, want the old mirror replaced", ws)
	}
	if got := ws[1].(k8stesting.CreateAction).GetObject().(*v1.Pod).Annotations[podsource.ConfigMirrorAnnotation]; got != "h2" {
		t.Fatalf("new mirror's hash = %q, want h2", got)
	}
}

func TestOrphanedMirrorPodsAreDeletedOnlyOnceSourcesAreReady(t *testing.T) {
	orphan := staticPod("m9", "gone-n1", "h9")
	orphan.Annotations[podsource.ConfigMirrorAnnotation] = "h9"
	kept := staticPod("m8", "wanted-n1", "h8")
	kept.Annotations[podsource.ConfigMirrorAnnotation] = "h8"
	r := newStatusRig(t, orphan, kept, apiPod("u1", "a", v1.PodRunning))
	r.sync(t, orphanKey)
	if ws := r.writes(); len(ws) != 0 {
		t.Fatalf("writes = %v before the static source was heard from, want none", ws)
	}
	// The source hands over a static pod not admitted (nor published) yet:
	// its mirror pod is not an orphan.
	r.w.StaticPods(pod.SourceFile, []*v1.Pod{staticPod("s8", "wanted-n1", "h8")})
	r.sync(t, orphanKey)
	ws := r.writes()
	if len(ws) != 1 || ws[0].GetVerb() != "delete" || ws[0].(k8stesting.DeleteAction).GetName() != "gone-n1" {
		t.Fatalf("writes = %v, want the orphaned mirror (only) deleted", ws)
	}
}

func TestDeletedPodGetsItsFinalStatusBeforeTheDelete(t *testing.T) {
	stored := apiPod("u1", "a", v1.PodRunning)
	now := metav1.Now()
	stored.DeletionTimestamp = &now
	r := newStatusRig(t, stored)
	final := v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{{Name: "c",
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}}
	r.w.PodStatus(podsource.MarkAPI(stored), final)
	r.w.PodRemoved(podsource.MarkAPI(stored))
	r.sync(t, "u1")
	ws := r.writes()
	if len(ws) != 2 || ws[0].GetVerb() != "patch" || ws[1].GetVerb() != "delete" {
		t.Fatalf("writes = %v, want the final status patched, then the delete", ws)
	}
}

// Mirror pods that waited for the Node are retried the moment it is
// registered, not after their backoff (up to 30 s).
func TestNodeRegisteredRetriesMirrorPodsAtOnce(t *testing.T) {
	r := newStatusRig(t)
	static := staticPod("s1", "etcd-n1", "h1")
	r.w.PodStatus(static, running())
	r.w.PodStatus(podsource.MarkAPI(apiPod("a1", "web", v1.PodRunning)), running())
	for r.w.queue.Len() > 0 { // drained, as the writer's loop would
		uid, _ := r.w.queue.Get()
		r.w.queue.Done(uid)
	}
	for range 5 { // five failures: the next retry is seconds away
		r.w.queue.AddRateLimited("s1")
	}
	r.w.NodeRegistered()
	if n := r.w.queue.Len(); n != 1 {
		t.Fatalf("%d queued, want the static pod's mirror only", n)
	}
	if uid, _ := r.w.queue.Get(); uid != "s1" || r.w.queue.NumRequeues("s1") != 0 {
		t.Fatalf("queued %s with %d requeues, want s1 with its backoff forgotten", uid, r.w.queue.NumRequeues("s1"))
	}
}

// A status computed for an older spec says so: observedGeneration is the
// generation the agent acted on, not the API's newest (a resize the
// agent has not seen yet is not reported as observed).
func TestObservedGenerationIsTheSpecsTheStatusReflects(t *testing.T) {
	stored := apiPod("u1", "a", v1.PodRunning)
	stored.Generation = 2 // resized in the API
	r := newStatusRig(t, stored)
	seen := stored.DeepCopy()
	seen.Generation = 1 // what the agent synced
	r.w.PodStatus(podsource.MarkAPI(seen), running())
	r.sync(t, "u1")
	if got := r.refresh(t, "default", "a"); got.Status.ObservedGeneration != 1 {
		t.Fatalf("observedGeneration = %d, want 1 (the spec the status reflects)", got.Status.ObservedGeneration)
	}
}
