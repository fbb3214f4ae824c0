package kubeapi

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testclock "k8s.io/utils/clock/testing"
)

// A ConfigMap a pod reads is watched: reads come from the watch once it
// synced, an edit is announced with its namespace and read back, a
// missing one is NotFound, and an object nobody reads any more stops
// being watched.
func TestWatchedObjects(t *testing.T) {
	cs := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg", ResourceVersion: "1"}, Data: map[string]string{"k": "1"}})
	clk := testclock.NewFakeClock(time.Unix(1_000_000, 0))
	w := newWatchedObjects(cs, clk)
	if _, ok, _ := w.read("cm", "ns1", "cfg"); ok {
		t.Fatal("answered from a watch before watches started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.start(ctx)
	w.read("cm", "ns1", "cfg") // starts its watch
	w.read("cm", "ns2", "gone")
	w.mu.Lock()
	synced := []cache.InformerSynced{w.watches["cm/ns1/cfg"].synced, w.watches["cm/ns2/gone"].synced}
	w.mu.Unlock()
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if !cache.WaitForCacheSync(sctx.Done(), synced...) {
		t.Fatal("watches never synced")
	}
	obj, ok, err := w.read("cm", "ns1", "cfg")
	if !ok || err != nil || obj.(*v1.ConfigMap).Data["k"] != "1" {
		t.Fatalf("read = %v, %v, %v", obj, ok, err)
	}
	if _, ok, err := w.read("cm", "ns2", "gone"); !ok || !apierrors.IsNotFound(err) {
		t.Fatalf("read of a missing ConfigMap = %v, %v; want NotFound from the watch", ok, err)
	}
	// An edit: announced, then read back. (The fake API ignores field
	// selectors: the missing one is watched in another namespace, so that
	// only cfg's watch hears of the edit.)
	if _, err := cs.CoreV1().ConfigMaps("ns1").Update(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "cfg", ResourceVersion: "2"},
		Data: map[string]string{"k": "2"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ns := <-w.changes:
		if ns != "ns1" {
			t.Fatalf("change announced for %q, want ns1", ns)
		}
	case <-sctx.Done():
		t.Fatal("the edit was not announced")
	}
	if obj, _, _ := w.read("cm", "ns1", "cfg"); obj.(*v1.ConfigMap).Data["k"] != "2" {
		t.Fatalf("read after the edit = %v", obj)
	}
	// The missing one is created: announced too.
	if _, err := cs.CoreV1().ConfigMaps("ns2").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns2", Name: "gone"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ns := <-w.changes:
		if ns != "ns2" {
			t.Fatalf("creation announced for %q, want ns2", ns)
		}
	case <-sctx.Done():
		t.Fatal("the creation of a missing ConfigMap was not announced")
	}
	// Unread for watchIdle: the watch ends.
	clk.Step(watchIdle + time.Second)
	w.prune()
	if n := w.count(); n != 0 {
		t.Fatalf("%d watches left after they went unread", n)
	}
}

// stop ends every watch and returns only once their informers have
// returned; no watch starts after it.
func TestWatchedObjectsStopWaitsForTheWatches(t *testing.T) {
	cs := fake.NewClientset(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "s"}})
	w := newWatchedObjects(cs, testclock.NewFakeClock(time.Unix(1_000_000, 0)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.start(ctx)
	w.read("secret", "ns1", "s")
	w.read("cm", "ns1", "c")
	if w.count() != 2 {
		t.Fatalf("%d watches, want 2", w.count())
	}
	w.stop() // with ctx still live: stop ends them itself
	if w.count() != 0 {
		t.Fatalf("%d watches left after stop", w.count())
	}
	if _, ok, _ := w.read("secret", "ns1", "s"); ok || w.count() != 0 {
		t.Fatal("a watch started after stop")
	}
}
