package pleg

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// inspectLister lists pods and answers PodStatus with a marked copy, and
// counts inspections per pod.
type inspectLister struct {
	fakeLister
	inspected map[pod.UID]int
	failFor   pod.UID
}

func (l *inspectLister) InspectPod(_ context.Context, listed, _ *pod.RuntimeStatus) (*pod.RuntimeStatus, error) {
	l.mu.Lock()
	l.inspected[listed.UID]++
	fail := listed.UID == l.failFor
	l.mu.Unlock()
	if fail {
		return nil, errors.New("inspect failed")
	}
	cp := *listed
	cp.Name = "inspected"
	return &cp, nil
}

func TestRelistInspectsOnlyChangedPodsIntoTheCache(t *testing.T) {
	l := &inspectLister{inspected: map[pod.UID]int{}}
	g, clk := newGeneric(t, l, 100)
	ctx := context.Background()
	l.set(snapshot(podOf("a", sbs(sandbox("s1", ready)), ctr("c1", pod.ContainerRunning)), podOf("b", sbs(sandbox("s2", ready)))), nil)
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	before := clk.Now()
	st, err := g.GetNewerThan(ctx, "a", before.Add(-time.Second))
	if err != nil || st.Name != "inspected" {
		t.Fatalf("GetNewerThan(a) = %+v, %v; want the inspected status", st, err)
	}
	clk.Step(time.Second)
	// Only a's container changes.
	l.set(snapshot(podOf("a", sbs(sandbox("s1", ready)), ctr("c1", pod.ContainerExited)), podOf("b", sbs(sandbox("s2", ready)))), nil)
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if l.inspected["a"] != 2 || l.inspected["b"] != 1 {
		t.Fatalf("inspections = %v, want a twice and b once", l.inspected)
	}
	// b's entry is current as of the second relist without a new inspection.
	if _, err := g.GetNewerThan(ctx, "b", before); err != nil {
		t.Fatal(err)
	}
	// A pod the runtime never had is empty, not an error.
	st, err = g.GetNewerThan(ctx, "zz", before)
	if err != nil || st.UID != "zz" || len(st.Containers) != 0 {
		t.Fatalf("unknown pod = %+v, %v", st, err)
	}
}

func TestRelistRetriesFailedInspections(t *testing.T) {
	l := &inspectLister{inspected: map[pod.UID]int{}, failFor: "a"}
	g, clk := newGeneric(t, l, 100)
	ctx := context.Background()
	l.set(snapshot(podOf("a", sbs(sandbox("s1", ready)))), nil)
	g.Relist(ctx)
	if _, err := g.GetNewerThan(ctx, "a", time.Time{}); err == nil {
		t.Fatal("want the inspection error")
	}
	clk.Step(time.Second)
	l.mu.Lock()
	l.failFor = ""
	l.mu.Unlock()
	g.Relist(ctx) // no list-level change, but the failed pod is inspected again
	st, err := g.GetNewerThan(ctx, "a", time.Time{})
	if err != nil || st.Name != "inspected" || l.inspected["a"] != 2 {
		t.Fatalf("got %+v, %v after %d inspections", st, err, l.inspected["a"])
	}
}

func TestGetNewerThanTriggersARelistAndWaits(t *testing.T) {
	l := &inspectLister{inspected: map[pod.UID]int{}}
	g, clk := newGeneric(t, l, 100)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g.Relist(ctx)
	clk.Step(time.Second)
	lastSync := clk.Now()
	got := make(chan error, 1)
	go func() {
		_, err := g.GetNewerThan(ctx, "a", lastSync)
		got <- err
	}()
	// The waiter asks for a relist: the cache (a second old) is not newer
	// than its last sync.
	recv(t, g.trigger, "GetNewerThan triggering a relist")
	// A relist that started at lastSync, not after it, wakes the waiter
	// but does not release it: it asks for another relist. (Either the
	// trigger or a return happens, so this is decided without a wait.)
	g.Relist(ctx)
	select {
	case err := <-got:
		t.Fatalf("GetNewerThan returned (%v) after a relist that is not newer than min", err)
	case <-g.trigger:
	case <-time.After(within):
		t.Fatal("GetNewerThan neither returned nor asked for a relist")
	}
	clk.Step(time.Millisecond)
	g.Relist(ctx)
	if err := recv(t, got, "GetNewerThan returning after a newer relist"); err != nil {
		t.Fatal(err)
	}
}
