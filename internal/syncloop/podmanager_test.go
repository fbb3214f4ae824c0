package syncloop

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/admit"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podmanager"
)

// desired is what the pod manager's Reader shows of some UIDs.
type desired struct {
	States      map[pod.UID]podmanager.State
	Terminating []pod.UID
	Pods        []pod.UID
	Active      []pod.UID
}

func readDesired(r podmanager.Reader, uids ...pod.UID) desired {
	d := desired{States: map[pod.UID]podmanager.State{}}
	for _, uid := range uids {
		if s := r.State(uid); s != podmanager.Unknown {
			d.States[uid] = s
		}
		if r.IsTerminating(uid) {
			d.Terminating = append(d.Terminating, uid)
		}
	}
	for _, p := range r.Pods() {
		d.Pods = append(d.Pods, p.UID)
	}
	for _, p := range r.ActivePods() {
		d.Active = append(d.Active, p.UID)
	}
	return d
}

// The loop's decisions are the pod manager's states, read through
// Loop.Pods from outside the loop.
func TestLoopKeepsTheDesiredSetInThePodManager(t *testing.T) {
	tests := []struct {
		name  string
		chain admit.Chain
		// run drives the loop and checks the views on the way (check).
		run func(t *testing.T, r *rig, check func(what string, want desired))
	}{
		{
			name:  "admitted and refused",
			chain: admit.Chain{admit.MaxPods(1)},
			run: func(t *testing.T, r *rig, check func(string, desired)) {
				r.step(t, add(r, testPod("u1", "a"), testPod("u2", "b")))
				r.next(t)
				check("after admission", desired{States: map[pod.UID]podmanager.State{"u1": podmanager.Admitted, "u2": podmanager.Refused},
					Pods: []pod.UID{"u1"}, Active: []pod.UID{"u1"}})
				if p, ok := r.loop.Pods().GetPodByFullName("default/a"); !ok || p.UID != "u1" {
					t.Errorf("GetPodByFullName(default/a) = %v, %v; want u1", p, ok)
				}
				r.step(t, remove(r, testPod("u2", "b")))
				check("after the refused pod's removal", desired{States: map[pod.UID]podmanager.State{"u1": podmanager.Admitted},
					Pods: []pod.UID{"u1"}, Active: []pod.UID{"u1"}})
			},
		},
		{
			name: "an edited pod held behind its predecessor",
			run: func(t *testing.T, r *rig, check func(string, desired)) {
				old := testPod("old", "etcd")
				r.step(t, add(r, old))
				r.next(t)
				gate := make(chan struct{})
				r.rt.mu.Lock()
				r.rt.killGate = gate
				r.rt.mu.Unlock()
				r.step(t, remove(r, old))
				r.step(t, add(r, testPod("new", "etcd")))
				r.next(t) // the old pod's kill, at the gate
				check("while the old pod is killed", desired{States: map[pod.UID]podmanager.State{"old": podmanager.Terminating, "new": podmanager.Held},
					Terminating: []pod.UID{"old"}, Pods: []pod.UID{"new"}})
				close(gate)
				if c := r.next(t); c.op != "sync" || c.uid != "new" {
					t.Fatalf("got %+v, want the new pod synced", c)
				}
				check("once it is gone", desired{States: map[pod.UID]podmanager.State{"new": podmanager.Admitted},
					Pods: []pod.UID{"new"}, Active: []pod.UID{"new"}})
			},
		},
		{
			name: "evicted, then dropped by its source",
			run: func(t *testing.T, r *rig, check func(string, desired)) {
				p := testPod("u1", "a")
				r.step(t, add(r, p))
				r.next(t)
				gate := make(chan struct{})
				r.rt.mu.Lock()
				r.rt.killGate = gate
				r.rt.mu.Unlock()
				r.step(t, func() { r.loop.Evict(p, 0, "low on memory") })
				r.next(t) // the stop, at the gate
				check("while its kill runs", desired{States: map[pod.UID]podmanager.State{"u1": podmanager.Evicted},
					Terminating: []pod.UID{"u1"}})
				close(gate)
				r.next(t) // the kill
				r.waitWorkersExit(t)
				check("killed", desired{States: map[pod.UID]podmanager.State{"u1": podmanager.Evicted}})
				r.step(t, remove(r, p))
				check("dropped", desired{States: map[pod.UID]podmanager.State{}})
			},
		},
		{
			name: "finished",
			run: func(t *testing.T, r *rig, check func(string, desired)) {
				r.pleg.Publish(r.clock.Now(), stoppedStatus("u1"))
				over := testPod("u1", "a")
				over.Status.Phase = v1.PodSucceeded // its source shows it over
				r.step(t, add(r, over))
				recv(t, r.status.finished, "final status")
				check("finished", desired{States: map[pod.UID]podmanager.State{"u1": podmanager.Finished}, Pods: []pod.UID{"u1"}})
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, tt.chain)
			tt.run(t, r, func(what string, want desired) {
				t.Helper()
				if diff := cmp.Diff(want, readDesired(r.loop.Pods(), "u1", "u2", "old", "new")); diff != "" {
					t.Errorf("%s: pod manager mismatch (-want +got):\n%s", what, diff)
				}
			})
		})
	}
}
