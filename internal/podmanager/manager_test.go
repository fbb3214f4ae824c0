package podmanager

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podsource"
)

// newPod is a pod of namespace "ns"; annotations as key, value pairs.
func newPod(uid, name string, annotations ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID(uid), Namespace: "ns", Name: name}}
	if len(annotations) > 0 {
		p.Annotations = map[string]string{}
		for i := 0; i+1 < len(annotations); i += 2 {
			p.Annotations[annotations[i]] = annotations[i+1]
		}
	}
	return p
}

// Fixtures: a, b and c are unrelated pods; a2 is an edited a (same full
// name, new UID).
var (
	podA  = newPod("a", "a")
	podA2 = newPod("a2", "a")
	podB  = newPod("b", "b")
	podC  = newPod("c", "c")
)

// workers is a fake WorkerView: uid → whether its worker syncs; absent:
// no worker.
type workers map[pod.UID]bool

func (w workers) view(uid pod.UID) (syncing, ok bool) {
	s, ok := w[uid]
	return s, ok
}

// views is everything the Reader shows about some UIDs and full names.
type views struct {
	States      map[pod.UID]State
	ByUID       map[pod.UID]pod.UID // uid → the UID of the pod GetPodByUID returns
	ByName      map[string]pod.UID  // full name → the UID of GetPodByFullName's pod
	Terminating []pod.UID
	Pods        []pod.UID
	Active      []pod.UID
}

func uids(pods []*v1.Pod) []pod.UID {
	out := []pod.UID{}
	for _, p := range pods {
		out = append(out, p.UID)
	}
	return out
}

func read(r Reader) views {
	v := views{States: map[pod.UID]State{}, ByUID: map[pod.UID]pod.UID{}, ByName: map[string]pod.UID{},
		Terminating: []pod.UID{}, Pods: uids(r.Pods()), Active: uids(r.ActivePods())}
	for _, uid := range []pod.UID{"a", "a2", "b", "c"} {
		if s := r.State(uid); s != Unknown {
			v.States[uid] = s
		}
		if p, ok := r.GetPodByUID(uid); ok {
			v.ByUID[uid] = p.UID
		}
		if r.IsTerminating(uid) {
			v.Terminating = append(v.Terminating, uid)
		}
	}
	for _, name := range []string{"ns/a", "ns/b", "ns/c"} {
		if p, ok := r.GetPodByFullName(name); ok {
			v.ByName[name] = p.UID
		}
	}
	return v
}

func TestManagerStates(t *testing.T) {
	tests := []struct {
		name    string
		workers workers // nil: no view set
		steps   func(t *testing.T, m *Manager)
		want    views
	}{
		{
			name: "empty",
			want: views{States: map[pod.UID]State{}, ByUID: map[pod.UID]pod.UID{}, ByName: map[string]pod.UID{},
				Terminating: []pod.UID{}, Pods: []pod.UID{}, Active: []pod.UID{}},
		},
		{
			name:    "admitted pods are desired and active while their workers sync them",
			workers: workers{"a": true, "b": true},
			steps:   func(t *testing.T, m *Manager) { m.Set(podB); m.Set(podA) },
			want: views{States: map[pod.UID]State{"a": Admitted, "b": Admitted}, ByUID: map[pod.UID]pod.UID{"a": "a", "b": "b"},
				ByName: map[string]pod.UID{"ns/a": "a", "ns/b": "b"}, Terminating: []pod.UID{},
				Pods: []pod.UID{"a", "b"}, Active: []pod.UID{"a", "b"}},
		},
		{
			name:    "without a view every admitted pod that is not held is active",
			workers: nil,
			steps:   func(t *testing.T, m *Manager) { m.Set(podA) },
			want: views{States: map[pod.UID]State{"a": Admitted}, ByUID: map[pod.UID]pod.UID{"a": "a"},
				ByName: map[string]pod.UID{"ns/a": "a"}, Terminating: []pod.UID{}, Pods: []pod.UID{"a"}, Active: []pod.UID{"a"}},
		},
		{
			name:    "a finished pod stays desired but is not active",
			workers: workers{"a": false, "b": true},
			steps:   func(t *testing.T, m *Manager) { m.Set(podA); m.Set(podB) },
			want: views{States: map[pod.UID]State{"a": Finished, "b": Admitted}, ByUID: map[pod.UID]pod.UID{"a": "a", "b": "b"},
				ByName: map[string]pod.UID{"ns/a": "a", "ns/b": "b"}, Terminating: []pod.UID{},
				Pods: []pod.UID{"a", "b"}, Active: []pod.UID{"b"}},
		},
		{
			name:    "an admitted pod without a worker is not active",
			workers: workers{},
			steps:   func(t *testing.T, m *Manager) { m.Set(podA) },
			want: views{States: map[pod.UID]State{"a": Admitted}, ByUID: map[pod.UID]pod.UID{"a": "a"},
				ByName: map[string]pod.UID{"ns/a": "a"}, Terminating: []pod.UID{}, Pods: []pod.UID{"a"}, Active: []pod.UID{}},
		},
		{
			name:    "a refused pod is known but not desired",
			workers: workers{},
			steps:   func(t *testing.T, m *Manager) { m.Refuse(podC) },
			want: views{States: map[pod.UID]State{"c": Refused}, ByUID: map[pod.UID]pod.UID{"c": "c"},
				ByName: map[string]pod.UID{}, Terminating: []pod.UID{}, Pods: []pod.UID{}, Active: []pod.UID{}},
		},
		{
			name:    "an edited pod is held while its predecessor is killed",
			workers: workers{"a": false},
			steps: func(t *testing.T, m *Manager) {
				m.StartTermination("ns/a", "a", podA)
				m.Set(podA2)
				held, first, n := m.Hold(podA2)
				if diff := cmp.Diff([]any{true, true, 1}, []any{held, first, n}); diff != "" {
					t.Errorf("Hold() (held, first, terminating) mismatch (-want +got):\n%s", diff)
				}
				if held, first, _ := m.Hold(podA2); !held || first {
					t.Errorf("Hold() again = held %v, first %v; want held, not first", held, first)
				}
			},
			want: views{States: map[pod.UID]State{"a": Terminating, "a2": Held}, ByUID: map[pod.UID]pod.UID{"a": "a", "a2": "a2"},
				ByName: map[string]pod.UID{"ns/a": "a2"}, Terminating: []pod.UID{"a"}, Pods: []pod.UID{"a2"}, Active: []pod.UID{}},
		},
		{
			name:    "the held pod is handed back when its predecessor's kill ends",
			workers: workers{"a2": true},
			steps: func(t *testing.T, m *Manager) {
				m.StartTermination("ns/a", "a", podA)
				m.Set(podA2)
				m.Hold(podA2)
				if next := m.EndTermination("ns/a", "b"); next != nil {
					t.Errorf("EndTermination() of a pod not being killed = %v; want nil", next.UID)
				}
				if next := m.EndTermination("ns/a", "a"); next != podA2 {
					t.Errorf("EndTermination() = %v; want the held pod a2", next)
				}
			},
			want: views{States: map[pod.UID]State{"a2": Admitted}, ByUID: map[pod.UID]pod.UID{"a2": "a2"},
				ByName: map[string]pod.UID{"ns/a": "a2"}, Terminating: []pod.UID{}, Pods: []pod.UID{"a2"}, Active: []pod.UID{"a2"}},
		},
		{
			name:    "a pod of a name nobody kills is not held",
			workers: workers{"a": true},
			steps: func(t *testing.T, m *Manager) {
				m.Set(podA)
				if held, _, _ := m.Hold(podA); held {
					t.Error("Hold() = held; want not")
				}
			},
			want: views{States: map[pod.UID]State{"a": Admitted}, ByUID: map[pod.UID]pod.UID{"a": "a"},
				ByName: map[string]pod.UID{"ns/a": "a"}, Terminating: []pod.UID{}, Pods: []pod.UID{"a"}, Active: []pod.UID{"a"}},
		},
		{
			name:    "deleting a held pod drops it: it never started",
			workers: workers{},
			steps: func(t *testing.T, m *Manager) {
				m.StartTermination("ns/a", "a", nil)
				m.Set(podA2)
				m.Hold(podA2)
				if !m.Delete(podA2) {
					t.Error("Delete() = not held; want held")
				}
				if m.Delete(podB) {
					t.Error("Delete() of a pod never admitted = held; want not")
				}
			},
			want: views{States: map[pod.UID]State{"a": Terminating}, ByUID: map[pod.UID]pod.UID{},
				ByName: map[string]pod.UID{}, Terminating: []pod.UID{"a"}, Pods: []pod.UID{}, Active: []pod.UID{}},
		},
		{
			name:    "an evicted pod is being killed and kept until its source drops it",
			workers: workers{"b": false},
			steps: func(t *testing.T, m *Manager) {
				m.Set(podB)
				if p, ok := m.Evict("b"); !ok || p != podB {
					t.Errorf("Evict() = %v, %v; want b", p, ok)
				}
				if _, ok := m.Evict("c"); ok {
					t.Error("Evict() of a pod not admitted = ok; want not")
				}
				m.StartTermination("ns/b", "b", podB)
			},
			want: views{States: map[pod.UID]State{"b": Evicted}, ByUID: map[pod.UID]pod.UID{"b": "b"},
				ByName: map[string]pod.UID{}, Terminating: []pod.UID{"b"}, Pods: []pod.UID{}, Active: []pod.UID{}},
		},
		{
			name:    "an evicted pod its source dropped is terminating until its kill ends",
			workers: workers{"b": false},
			steps: func(t *testing.T, m *Manager) {
				m.Set(podB)
				m.Evict("b")
				m.StartTermination("ns/b", "b", podB)
				if !m.Forget("b") {
					t.Error("Forget() = not refused; want refused")
				}
				if m.Forget("b") {
					t.Error("Forget() again = refused; want not")
				}
			},
			want: views{States: map[pod.UID]State{"b": Terminating}, ByUID: map[pod.UID]pod.UID{"b": "b"},
				ByName: map[string]pod.UID{}, Terminating: []pod.UID{"b"}, Pods: []pod.UID{}, Active: []pod.UID{}},
		},
		{
			name:    "an orphan's kill has no spec; a later kill's spec is kept, an orphan's never replaces it",
			workers: workers{"c": false},
			steps: func(t *testing.T, m *Manager) {
				m.StartTermination("ns/c", "c", nil)
				if _, ok := m.GetPodByUID("c"); ok {
					t.Error("GetPodByUID() of an orphan = found; want not")
				}
				m.StartTermination("ns/c", "c", podC)
				m.StartTermination("ns/c", "c", nil)
			},
			want: views{States: map[pod.UID]State{"c": Terminating}, ByUID: map[pod.UID]pod.UID{"c": "c"},
				ByName: map[string]pod.UID{}, Terminating: []pod.UID{"c"}, Pods: []pod.UID{}, Active: []pod.UID{}},
		},
		{
			name:    "a pod re-added before its kill ended is admitted again",
			workers: workers{"a": true},
			steps: func(t *testing.T, m *Manager) {
				m.Set(podA)
				m.Delete(podA)
				m.StartTermination("ns/a", "a", podA)
				m.Set(podA)
				m.EndTermination("ns/a", "a")
			},
			want: views{States: map[pod.UID]State{"a": Admitted}, ByUID: map[pod.UID]pod.UID{"a": "a"},
				ByName: map[string]pod.UID{"ns/a": "a"}, Terminating: []pod.UID{}, Pods: []pod.UID{"a"}, Active: []pod.UID{"a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			if tt.workers != nil {
				m.SetWorkers(tt.workers.view)
			}
			if tt.steps != nil {
				tt.steps(t, m)
			}
			if diff := cmp.Diff(tt.want, read(m)); diff != "" {
				t.Errorf("views mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetPodByMirrorPod(t *testing.T) {
	static := newPod("s1", "etcd-node1", configSourceAnnotation, pod.SourceFile, configHashAnnotation, "h1")
	noHash := newPod("s2", "proxy-node1", configSourceAnnotation, pod.SourceHTTP)
	api := newPod("p1", "web", configSourceAnnotation, pod.SourceAPI)
	refused := newPod("s3", "big-node1", configSourceAnnotation, pod.SourceFile, configHashAnnotation, "h3")
	mirror := func(name, hash string) *v1.Pod { return newPod("m-"+name, name, configMirrorAnnotation, hash) }
	m := New()
	m.Set(static)
	m.Set(noHash)
	m.Set(api)
	m.Refuse(refused)
	tests := []struct {
		name   string
		mirror *v1.Pod
		want   pod.UID // "": none
	}{
		{name: "mirror of the static pod's hash", mirror: mirror("etcd-node1", "h1"), want: "s1"},
		{name: "mirror of an older version", mirror: mirror("etcd-node1", "h0")},
		{name: "a static pod without a hash is mirrored by its UID", mirror: mirror("proxy-node1", "s2"), want: "s2"},
		{name: "a refused static pod has its mirror too", mirror: mirror("big-node1", "h3"), want: "s3"},
		{name: "an API pod is never mirrored", mirror: mirror("web", "p1")},
		{name: "not a mirror pod", mirror: newPod("x", "etcd-node1")},
		{name: "no static pod of that name", mirror: mirror("gone-node1", "h1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got pod.UID
			if p, ok := m.GetPodByMirrorPod(tt.mirror); ok {
				got = p.UID
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("GetPodByMirrorPod() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The annotations are podsource's (this package may not import it).
func TestAnnotationsAgreeWithPodsource(t *testing.T) {
	got := []string{configHashAnnotation, configSourceAnnotation, configMirrorAnnotation}
	want := []string{podsource.ConfigHashAnnotation, podsource.ConfigSourceAnnotation, podsource.ConfigMirrorAnnotation}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations mismatch (-want +got):\n%s", diff)
	}
}

// concurrentPods are the pods the concurrency test's writer churns.
var concurrentPods = func() []*v1.Pod {
	pods := make([]*v1.Pod, 50)
	for i := range pods {
		pods[i] = newPod(fmt.Sprintf("u%02d", i), fmt.Sprintf("p%02d", i))
	}
	return pods
}()

// sortedPods checks a returned list: no nil pods, by full name.
func sortedPods(list []*v1.Pod) error {
	for i, p := range list {
		if p == nil {
			return fmt.Errorf("nil pod at %d", i)
		}
		if i > 0 && pod.FullName(list[i-1]) >= pod.FullName(p) {
			return fmt.Errorf("not sorted at %d: %s after %s", i, pod.FullName(p), pod.FullName(list[i-1]))
		}
	}
	return nil
}

// churn is the concurrency test's writer: every pod through every state
// many times, then a known end — every pod admitted and synced.
func churn(m *Manager, setFinished func(uid pod.UID, finished bool)) {
	for round := 0; round < 20; round++ {
		for i, p := range concurrentPods {
			switch (round + i) % 5 {
			case 0:
				m.Set(p)
			case 1:
				setFinished(p.UID, round%2 == 0)
			case 2:
				m.Evict(p.UID)
				m.StartTermination(pod.FullName(p), p.UID, p)
			case 3:
				m.Forget(p.UID)
				m.EndTermination(pod.FullName(p), p.UID)
			case 4:
				m.Refuse(p)
				m.Delete(p)
			}
		}
	}
	for _, p := range concurrentPods {
		setFinished(p.UID, false)
		m.Forget(p.UID)
		m.EndTermination(pod.FullName(p), p.UID)
		m.Set(p)
	}
}

// Readers on many goroutines while the writer changes the set (run with
// -race): each of the Reader's views is consistent in itself, and what a
// reader does to a returned slice never reaches the Manager.
func TestReadersConcurrentWithWriter(t *testing.T) {
	tests := []struct {
		name string
		// read is one reader's look; an error fails the test.
		read func(r Reader) error
	}{
		{name: "Pods", read: func(r Reader) error {
			list := r.Pods()
			err := sortedPods(list)
			clear(list) // the caller's slice: the Manager must not see this
			return err
		}},
		{name: "ActivePods", read: func(r Reader) error {
			list := r.ActivePods()
			err := sortedPods(list)
			clear(list)
			return err
		}},
		{name: "State", read: func(r Reader) error {
			for _, p := range concurrentPods {
				if s := r.State(p.UID); s == Held {
					return fmt.Errorf("%s held; nothing holds it", p.UID)
				}
			}
			return nil
		}},
		{name: "GetPodByUID", read: func(r Reader) error {
			for _, p := range concurrentPods {
				if q, ok := r.GetPodByUID(p.UID); ok && q != p {
					return fmt.Errorf("GetPodByUID(%s) = another pod", p.UID)
				}
			}
			return nil
		}},
		{name: "GetPodByFullName", read: func(r Reader) error {
			for _, p := range concurrentPods {
				if q, ok := r.GetPodByFullName(pod.FullName(p)); ok && q != p {
					return fmt.Errorf("GetPodByFullName(%s) = another pod", pod.FullName(p))
				}
			}
			return nil
		}},
		{name: "IsAdmitted, IsTerminating, GetPodByMirrorPod", read: func(r Reader) error {
			for _, p := range concurrentPods {
				r.IsAdmitted(p.UID)
				r.IsTerminating(p.UID)
				if _, ok := r.GetPodByMirrorPod(p); ok {
					return fmt.Errorf("GetPodByMirrorPod(%s): found a static pod; none is static", p.UID)
				}
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wmu sync.Mutex
			finished := map[pod.UID]bool{}
			m := New()
			m.SetWorkers(func(uid pod.UID) (bool, bool) {
				wmu.Lock()
				defer wmu.Unlock()
				return !finished[uid], true
			})
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			stop := make(chan struct{})
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						if err := tt.read(m); err != nil {
							errs <- err
							return
						}
						select {
						case <-stop:
							return
						default:
						}
					}
				}()
			}
			churn(m, func(uid pod.UID, fin bool) {
				wmu.Lock()
				finished[uid] = fin
				wmu.Unlock()
			})
			close(stop)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			want := uids(concurrentPods)
			if diff := cmp.Diff(want, uids(m.Pods())); diff != "" {
				t.Errorf("Pods() at the end mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, uids(m.ActivePods())); diff != "" {
				t.Errorf("ActivePods() at the end mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The worker view is called without the Manager's lock: the loop holds
// its own lock while it writes, and the view takes that lock.
func TestWorkerViewCalledWithoutTheLock(t *testing.T) {
	tests := []struct {
		name string
		read func(r Reader)
	}{
		{name: "State", read: func(r Reader) { r.State("a") }},
		{name: "ActivePods", read: func(r Reader) { r.ActivePods() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			m.Set(podA)
			m.SetWorkers(func(uid pod.UID) (bool, bool) {
				m.Refuse(podC) // a write: it would wait forever for a held lock
				return true, true
			})
			done := make(chan struct{})
			go func() { tt.read(m); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second): // only turns a hang into a failure
				t.Fatal("a Reader method held the Manager's lock while calling the worker view")
			}
		})
	}
}
