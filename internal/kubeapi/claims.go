package kubeapi

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeagent/nodeagent/internal/podvolumes"
)

// Claims reads PersistentVolumeClaims and PersistentVolumes for pod
// volumes, with a GET each time a container starts, as the kubelet's
// volume manager does (its populator reads them from the API server).
type Claims struct {
	cs   kubernetes.Interface
	node string
}

// PersistentVolumeClaim implements podvolumes.Claims.
func (c Claims) PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	return c.cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// PersistentVolume implements podvolumes.Claims.
func (c Claims) PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	return c.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// Node implements podvolumes.Claims.
func (c Claims) Node(ctx context.Context) (*v1.Node, error) {
	return c.cs.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{ResourceVersion: "0"})
}

// Claims gives pods' persistent volume claims (nil standalone).
func (m *Mode) Claims() podvolumes.Claims {
	if m == nil {
		return nil
	}
	return Claims{cs: m.Client.Clientset, node: m.cfg.Client.NodeName}
}
