package podvolumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/nodeagent/internal/volume"
)

// CSI stages and publishes CSI persistent volumes (csi.Manager).
type CSI interface {
	// Publish makes pv available to the pod and returns the path to
	// mount.
	Publish(ctx context.Context, p *v1.Pod, pv *v1.PersistentVolume, readOnly bool) (string, error)
	// Unpublish takes back every volume published for the pod.
	Unpublish(ctx context.Context, uid types.UID) error
	// PublishInline publishes a pod's CSI ephemeral inline volume.
	PublishInline(ctx context.Context, p *v1.Pod, v *v1.Volume) (string, error)
	// VolumeStats is a published volume's use as its driver reports it
	// (volume: the PV's name, or an inline volume's); ok false when the
	// driver does not report it.
	VolumeStats(ctx context.Context, uid types.UID, volume string) (fs *statsapi.FsStats, ok bool, err error)
	// Pods are the pods with published volumes.
	Pods() []types.UID
}

// Claims reads PersistentVolumeClaims and PersistentVolumes from the API
// server (nil in standalone mode). Errors for a missing object satisfy
// apierrors.IsNotFound.
type Claims interface {
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
	// Node is this node's Node object: a volume's node affinity is
	// matched against its labels, as the kubelet matches it.
	Node(ctx context.Context) (*v1.Node, error)
}

// claimPath resolves a persistentVolumeClaim volume, or a generic
// ephemeral one (the claim <pod>-<volume> the ephemeral volume
// controller makes, owned by the pod), to its PersistentVolume and
// returns the path to mount, as the kubelet's volume manager does: the
// claim must be bound, the volume bound to it, its node affinity this
// node's. hostPath volumes honour their type; local volumes are mounted
// from their path, which must exist. The errors are the kubelet's; the
// container waits (CreateContainerConfigError) and the next sync looks
// again, so a pod whose claim binds later starts then. A claim being
// deleted (without its protection finalizer) is refused.
func (m *Manager) claimPath(ctx context.Context, p *v1.Pod, v *v1.Volume) (string, bool, error) {
	name, readOnly := ClaimName(p, v), v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly
	if m.cfg.Claims == nil {
		return "", false, fmt.Errorf("error processing PVC %s/%s: %w", p.Namespace, name, errStandalone)
	}
	// Resolved once for the pod, as the kubelet mounts a claim once: a
	// container restarted later needs no API server.
	m.cmu.Lock()
	known, ok := m.claims[p.UID][v.Name]
	m.cmu.Unlock()
	if ok {
		return known.path, readOnly, nil
	}
	pvc, err := m.cfg.Claims.PersistentVolumeClaim(ctx, p.Namespace, name)
	if err != nil {
		return "", false, fmt.Errorf("error processing PVC %s/%s: %w", p.Namespace, name, err)
	}
	if pvc.DeletionTimestamp != nil && !slices.Contains(pvc.Finalizers, "kubernetes.io/pvc-protection") {
		return "", false, fmt.Errorf("can't start pod because PVC %s/%s is being deleted", p.Namespace, name)
	}
	if v.Ephemeral != nil && !metav1.IsControlledBy(pvc, p) {
		return "", false, fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", p.Namespace, name, p.Namespace, p.Name)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", false, fmt.Errorf("PVC %s/%s has non-bound phase (%q) or empty pvc.Spec.VolumeName (%q)", p.Namespace, name, pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	pv, err := m.cfg.Claims.PersistentVolume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return "", false, fmt.Errorf("error processing PVC %s/%s: failed to fetch PV %s from API server: %w", p.Namespace, name, pvc.Spec.VolumeName, err)
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != pvc.UID {
		return "", false, fmt.Errorf("error processing PVC %s/%s: PV %s is not bound to it", p.Namespace, name, pv.Name)
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		return "", false, fmt.Errorf("PV %s: volumeMode Block is not supported by nodeagent", pv.Name)
	}
	if a := pv.Spec.NodeAffinity; a != nil && a.Required != nil {
		node, err := m.cfg.Claims.Node(ctx)
		if err != nil {
			return "", false, fmt.Errorf("PV %s: read the Node for its node affinity: %w", pv.Name, err)
		}
		if ok, err := nodeaffinity.NewLazyErrorNodeSelector(a.Required).Match(node); err != nil || !ok {
			return "", false, fmt.Errorf("volume node affinity conflict: PV %s is not for node %s", pv.Name, node.Name)
		}
	}
	switch src := pv.Spec.PersistentVolumeSource; {
	case src.HostPath != nil:
		if err := volume.CheckHostPath(src.HostPath); err != nil {
			return "", false, err
		}
		m.claimed(p, v, claimVolume{path: src.HostPath.Path})
		return src.HostPath.Path, readOnly, nil
	case src.Local != nil:
		info, err := os.Stat(src.Local.Path)
		if err != nil {
			return "", false, fmt.Errorf("local volume %s: %w", pv.Name, err)
		}
		if !info.IsDir() {
			return "", false, fmt.Errorf("local volume %s: %s is not a directory (volumeMode Filesystem)", pv.Name, src.Local.Path)
		}
		m.claimed(p, v, claimVolume{path: src.Local.Path, local: true})
		return src.Local.Path, readOnly, nil
	case src.CSI != nil:
		if m.cfg.CSI == nil {
			return "", false, fmt.Errorf("PV %s: CSI volumes (driver %s) need an API server", pv.Name, src.CSI.Driver)
		}
		path, err := m.cfg.CSI.Publish(ctx, p, pv, readOnly)
		if err != nil {
			return "", false, err
		}
		m.claimed(p, v, claimVolume{path: path, csi: pv.Name})
		return path, readOnly, nil
	}
	return "", false, errors.New("PV " + pv.Name + ": volume source not supported (hostPath and local are)")
}

// claimVolume is where a pod's claim volume is (for its stats) and
// whether it is a local volume (its ownership is the fsGroup's).
type claimVolume struct {
	path  string
	local bool
	csi   string // the PV's name, for a CSI volume
}

// claimed records a pod's mounted claim volume.
func (m *Manager) claimed(p *v1.Pod, v *v1.Volume, c claimVolume) {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	if m.claims == nil {
		m.claims = map[types.UID]map[string]claimVolume{}
	}
	if m.claims[p.UID] == nil {
		m.claims[p.UID] = map[string]claimVolume{}
	}
	m.claims[p.UID][v.Name] = c
}

// ClaimName is the claim a persistentVolumeClaim or generic ephemeral
// volume uses, "" for other volumes.
func ClaimName(p *v1.Pod, v *v1.Volume) string {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName
	case v.Ephemeral != nil:
		return p.Name + "-" + v.Name
	}
	return ""
}

// CSIStats is a CSI volume's use as its driver reports it
// (NodeGetVolumeStats); ok false for another volume, or a driver that
// does not report it: the mount is measured as any other.
func (m *Manager) CSIStats(ctx context.Context, p *v1.Pod, v *v1.Volume) (*statsapi.FsStats, bool) {
	if m.cfg.CSI == nil {
		return nil, false
	}
	key := ""
	switch {
	case v.CSI != nil:
		key = v.Name
	case ClaimName(p, v) != "":
		m.cmu.Lock()
		key = m.claims[p.UID][v.Name].csi
		m.cmu.Unlock()
	}
	if key == "" {
		return nil, false
	}
	fs, ok, err := m.cfg.CSI.VolumeStats(ctx, p.UID, key)
	if err != nil {
		m.log.Debug("CSI volume stats", zap.String("pod", p.Namespace+"/"+p.Name), zap.String("volume", v.Name), zap.Error(err))
		return nil, false
	}
	return fs, ok
}
