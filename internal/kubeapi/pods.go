package kubeapi

import (
	"context"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// NodePods is the informer over the pods bound to this node (mirror pods
// included): one watch shared by the pod source, the status writer and
// the mirror pods.
type NodePods struct {
	Informer cache.SharedIndexInformer
	Lister   corelisters.PodLister
	factory  informers.SharedInformerFactory
	// synced reports whether the first list arrived (Informer.HasSynced).
	synced func() bool
}

// NewNodePods watches the pods with spec.nodeName = node.
func NewNodePods(cs kubernetes.Interface, node string) *NodePods {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", node).String()
	}), informers.WithTransform(stripManagedFields))
	inf := f.Core().V1().Pods()
	return &NodePods{Informer: inf.Informer(), Lister: inf.Lister(), factory: f, synced: inf.Informer().HasSynced}
}

// Synced reports whether the informer has listed the node's pods once.
func (n *NodePods) Synced() bool { return n.synced() }

// Start starts the watch.
func (n *NodePods) Start(ctx context.Context) { n.factory.Start(ctx.Done()) }

// Get returns the API's pod of that namespace and name, if cached.
func (n *NodePods) Get(namespace, name string) (*v1.Pod, bool) {
	p, err := n.Lister.Pods(namespace).Get(name)
	return p, err == nil
}

// writeFileAtomic writes a checkpoint durably, creating its directory.
func writeFileAtomic(path string, body []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, body, mode, true)
}

// stripManagedFields drops an object's managed fields before the
// informer caches it: no part of the agent reads them, and they are often
// the larger part of a pod's metadata.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
