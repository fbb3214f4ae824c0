package kubeapi

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/podmanager"
	"github.com/nodeagent/nodeagent/internal/podsource"
)

// ensureMirror returns static pod p's mirror pod, creating it when there
// is none and replacing one that belongs to an older version of p or is
// being deleted (deleting a mirror pod never touches the static pod: it
// comes back). It returns nil while the Node is not registered yet.
func (w *StatusWriter) ensureMirror(ctx context.Context, p *v1.Pod) (*v1.Pod, error) {
	m, ok := w.cfg.Pods.Get(p.Namespace, p.Name)
	if ok {
		if podmanager.IsMirrorOf(m, p) && m.DeletionTimestamp == nil {
			return m, nil
		}
		if !podsource.IsMirror(m) {
			// An API pod holds the name: the kubelet leaves it alone too.
			return nil, nil
		}
		w.log.Info("replacing mirror pod", zap.String("pod", p.Namespace+"/"+p.Name), zap.Bool("deleted", m.DeletionTimestamp != nil))
		if err := w.deletePod(ctx, m.Namespace, m.Name, m.UID); err != nil {
			return nil, err
		}
	}
	nodeUID := w.cfg.NodeUID()
	if nodeUID == "" {
		return nil, fmt.Errorf("mirror pod for %s/%s: node not registered yet", p.Namespace, p.Name)
	}
	mirror := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace,
			Labels:      p.Labels,
			Annotations: map[string]string{},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: w.cfg.NodeName, UID: nodeUID, Controller: ptrTo(true),
			}},
		},
		Spec: *p.Spec.DeepCopy(),
	}
	for k, v := range p.Annotations {
		mirror.Annotations[k] = v
	}
	mirror.Annotations[podsource.ConfigMirrorAnnotation] = podmanager.StaticHash(p)
	created, err := w.cfg.Client.CoreV1().Pods(p.Namespace).Create(ctx, mirror, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// The old one is still being deleted, or the cache lags: retry.
		return nil, fmt.Errorf("mirror pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	if err != nil {
		return nil, fmt.Errorf("create mirror pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	w.log.Info("mirror pod created", zap.String("pod", p.Namespace+"/"+p.Name), zap.String("uid", string(created.UID)))
	return created, nil
}

// deleteOrphanedMirrors deletes mirror pods on this node that no static
// pod of any source wants, once every static source has handed over its
// pods and the informer has listed the node's pods.
func (w *StatusWriter) deleteOrphanedMirrors(ctx context.Context) error {
	if !w.cfg.Pods.Synced() {
		return nil
	}
	wanted := map[string]bool{}
	w.mu.Lock()
	for _, src := range w.cfg.StaticSources {
		names, seen := w.desired[src]
		if !seen {
			w.mu.Unlock()
			return nil
		}
		for n := range names {
			wanted[n] = true
		}
	}
	for n := range w.static {
		wanted[n] = true
	}
	w.mu.Unlock()
	all, _ := w.cfg.Pods.Lister.List(labels.Everything())
	var firstErr error
	for _, m := range all {
		if !podsource.IsMirror(m) || wanted[m.Namespace+"/"+m.Name] {
			continue
		}
		w.log.Info("deleting orphaned mirror pod", zap.String("pod", m.Namespace+"/"+m.Name))
		if err := w.deletePod(ctx, m.Namespace, m.Name, m.UID); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func ptrTo[T any](v T) *T { return &v }

// NodeRegistered retries at once the mirror pods that waited for the
// Node to exist (their owner is the Node, by UID); without it their
// retries would have backed off for up to 30 s.
func (w *StatusWriter) NodeRegistered() {
	w.mu.Lock()
	uids := make([]types.UID, 0, len(w.want))
	for uid, e := range w.want {
		if e.pod != nil && !podsource.IsAPIPod(e.pod) {
			uids = append(uids, uid)
		}
	}
	w.mu.Unlock()
	for _, uid := range uids {
		w.queue.Forget(uid)
		w.queue.Add(uid)
	}
}
