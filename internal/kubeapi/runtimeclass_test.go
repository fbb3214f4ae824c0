package kubeapi

import (
	"context"
	"strings"
	"testing"
	"time"

	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodeagent/nodeagent/internal/cri"
)

var _ cri.RuntimeClasses = (*RuntimeClasses)(nil)

func runtimeClass(name, handler string) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
}

func TestRuntimeClassesHandler(t *testing.T) {
	r := NewRuntimeClasses(fake.NewClientset())
	if _, err := r.Handler("gvisor"); err == nil || !strings.Contains(err.Error(), `RuntimeClass "gvisor": RuntimeClasses have not yet been read`) {
		t.Errorf("Handler() before the informer synced: error = %v, want not yet read", err)
	}
	r.synced = func() bool { return true }
	cache := r.factory.Node().V1().RuntimeClasses().Informer().GetIndexer()
	if err := cache.Add(runtimeClass("gvisor", "runsc")); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Handler("gvisor"); err != nil || h != "runsc" {
		t.Errorf(`Handler("gvisor") = %q, %v; want "runsc"`, h, err)
	}
	if _, err := r.Handler("kata"); err == nil || err.Error() != `RuntimeClass "kata" not found` {
		t.Errorf(`Handler("kata") error = %v, want RuntimeClass "kata" not found`, err)
	}
	// One created later is seen once the informer has it.
	if err := cache.Add(runtimeClass("kata", "kata-qemu")); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Handler("kata"); err != nil || h != "kata-qemu" {
		t.Errorf(`Handler("kata") = %q, %v; want "kata-qemu"`, h, err)
	}
}

// TestRuntimeClassesStart: Start lists the RuntimeClasses from the API.
func TestRuntimeClassesStart(t *testing.T) {
	r := NewRuntimeClasses(fake.NewClientset(runtimeClass("gvisor", "runsc")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r.Start(ctx)
	for typ, ok := range r.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer of %v did not sync", typ)
		}
	}
	if h, err := r.Handler("gvisor"); err != nil || h != "runsc" {
		t.Errorf(`Handler("gvisor") = %q, %v; want "runsc"`, h, err)
	}
}
