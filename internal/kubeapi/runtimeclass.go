package kubeapi

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	nodelisters "k8s.io/client-go/listers/node/v1"
)

// RuntimeClasses gives the runtime handler of a RuntimeClass
// (node.k8s.io/v1) from an informer's cache, as the kubelet's
// runtimeclass.Manager: it satisfies cri.RuntimeClasses. The Node
// authorizer lets a node get, list and watch RuntimeClasses.
//
// Handler is safe for concurrent use, before Start too (it then answers
// that nothing was read yet).
type RuntimeClasses struct {
	factory informers.SharedInformerFactory
	lister  nodelisters.RuntimeClassLister
	synced  func() bool
}

// NewRuntimeClasses returns RuntimeClasses over cs; Start starts its
// informer.
func NewRuntimeClasses(cs kubernetes.Interface) *RuntimeClasses {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(stripManagedFields))
	rc := f.Node().V1().RuntimeClasses()
	return &RuntimeClasses{factory: f, lister: rc.Lister(), synced: rc.Informer().HasSynced}
}

// Start starts the informer; it stops with ctx.
func (r *RuntimeClasses) Start(ctx context.Context) {
	r.factory.Start(ctx.Done())
}

// errRuntimeClassesNotSynced is returned while the RuntimeClasses were not
// listed yet: the pod's next sync asks again.
var errRuntimeClassesNotSynced = errors.New("RuntimeClasses have not yet been read from the API server")

// Handler returns the handler of the RuntimeClass called name; an error
// saying `RuntimeClass "name" not found` when there is none.
func (r *RuntimeClasses) Handler(name string) (string, error) {
	if !r.synced() {
		return "", fmt.Errorf("RuntimeClass %q: %w", name, errRuntimeClassesNotSynced)
	}
	rc, err := r.lister.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("RuntimeClass %q not found", name)
	case err != nil:
		return "", fmt.Errorf("get RuntimeClass %q: %w", name, err)
	}
	return rc.Handler, nil
}
