package csi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/moby/sys/mountinfo"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodeagent/nodeagent/internal/volume"
)

// The kubelet's CSI plugin directory names and vol_data.json keys
// (pkg/volume/csi).
const (
	pluginName  = "kubernetes.io/csi"
	podPlugin   = "kubernetes.io~csi"
	globalMount = "globalmount"
	volDataFile = "vol_data.json"
)

// Config wires a Manager.
type Config struct {
	// RootDir is the agent's root: <RootDir>/plugins/kubernetes.io/csi
	// holds the staged volumes, <RootDir>/pods/<uid>/volumes/kubernetes.io~csi
	// the published ones.
	RootDir  string
	NodeName string
	// Client, set in API mode, reads CSIDriver objects, VolumeAttachments
	// and secrets, and writes the CSINode; nil standalone.
	Client kubernetes.Interface
	// CallTimeout bounds each call to a driver (the kubelet's 2m).
	CallTimeout time.Duration
	// Token, set in API mode, gives a token of the pod's service account
	// for an audience (TokenRequest bound to the pod), for drivers whose
	// CSIDriver asks for tokenRequests.
	Token  func(ctx context.Context, p *v1.Pod, audience string, expirationSeconds int64) (string, time.Time, error)
	Logger *zap.Logger
}

// Manager is the node side of CSI: the drivers registered through the
// plugin registration directory, the CSINode that lists them, and the
// volumes staged and published for pods.
type Manager struct {
	cfg Config
	log *zap.Logger

	mu        sync.Mutex
	drivers   map[string]*driver
	published map[types.UID]map[string]*volData // pod → PV name → its publication
	volLocks  map[string]*sync.Mutex            // driver^handle → its operations
}

// driver is a registered CSI driver.
type driver struct {
	name, endpoint string
	conn           *grpc.ClientConn
	node           csipb.NodeClient
	stage          bool // STAGE_UNSTAGE_VOLUME
	stats          bool // GET_VOLUME_STATS
}

// volData is a published volume, written beside its mount as the
// kubelet's vol_data.json (its keys), so a restarted agent (or the
// kubelet) finds it.
type volData struct {
	SpecVolID     string `json:"specVolID"`
	VolumeHandle  string `json:"volumeHandle"`
	DriverName    string `json:"driverName"`
	NodeName      string `json:"nodeName"`
	AttachmentID  string `json:"attachmentID,omitempty"`
	LifecycleMode string `json:"volumeLifecycleMode,omitempty"`
	// Not the kubelet's: whether it was staged, and where.
	Staging string `json:"nodeagentStagingPath,omitempty"`
	target  string
}

// New returns a Manager with the volumes published by an earlier run
// (their vol_data.json files).
func New(cfg Config) (*Manager, error) {
	if cfg.RootDir == "" || cfg.NodeName == "" || cfg.Logger == nil {
		return nil, errors.New("csi: RootDir, NodeName and Logger are required")
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.Named("csi"), drivers: map[string]*driver{}, published: map[types.UID]map[string]*volData{}}
	m.recover()
	return m, nil
}

// recover reads the vol_data.json of every volume published beneath the
// pod directories.
func (m *Manager) recover() {
	files, _ := filepath.Glob(filepath.Join(m.cfg.RootDir, "pods", "*", "volumes", podPlugin, "*", volDataFile))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var d volData
		if err := json.Unmarshal(b, &d); err != nil || d.DriverName == "" {
			m.log.Warn("unreadable CSI volume data; left as it is", zap.String("file", f), zap.Error(err))
			continue
		}
		d.target = filepath.Join(filepath.Dir(f), "mount")
		uid := types.UID(filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(f))))))
		if m.published[uid] == nil {
			m.published[uid] = map[string]*volData{}
		}
		m.published[uid][d.SpecVolID] = &d
	}
	if len(files) > 0 {
		m.log.Info("CSI volumes published by an earlier run", zap.Int("volumes", len(files)))
	}
}

// Pods are the pods with published volumes.
func (m *Manager) Pods() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.UID
	for uid := range m.published {
		out = append(out, uid)
	}
	return out
}

// stagingPath is the kubelet's global mount of a volume handle.
func (m *Manager) stagingPath(drv, handle string) string {
	return filepath.Join(m.cfg.RootDir, "plugins", pluginName, drv, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), globalMount)
}

// podVolumeDir is where a pod's volume is published (its "mount"
// beneath) and its vol_data.json kept.
func (m *Manager) podVolumeDir(uid types.UID, pv string) string {
	return filepath.Join(m.cfg.RootDir, "pods", string(uid), "volumes", podPlugin, pv)
}

// Publish stages (once per volume, when the driver stages) and publishes
// a CSI persistent volume into the pod's directory and returns the path
// to mount, as the kubelet's CSI volume plugin: the CSIDriver object
// says whether to wait for the VolumeAttachment (attachRequired, the
// default) and whether the driver wants the pod's identity
// (podInfoOnMount) and tokens; secrets are read as the volume names
// them; the pod's fsGroup owns the volume as the CSIDriver's
// fsGroupPolicy says. A volume already published (and still mounted)
// for the pod is returned as it is. Stage, publish, unpublish and
// unstage of one volume never overlap.
func (m *Manager) Publish(ctx context.Context, p *v1.Pod, pv *v1.PersistentVolume, readOnly bool) (string, error) {
	src := pv.Spec.CSI
	defer m.lockVolume(src.Driver, src.VolumeHandle)()
	if target, ok := m.stillPublished(p.UID, pv.Name); ok {
		return target, nil
	}
	drv, info, err := m.driverFor(ctx, src.Driver)
	if err != nil {
		return "", err
	}
	d := &volData{SpecVolID: pv.Name, VolumeHandle: src.VolumeHandle, DriverName: src.Driver, NodeName: m.cfg.NodeName,
		LifecycleMode: string(storagev1.VolumeLifecyclePersistent)}
	var publishContext map[string]string
	if info.attach {
		d.AttachmentID = attachmentName(src.VolumeHandle, src.Driver, m.cfg.NodeName)
		if publishContext, err = m.attached(ctx, d.AttachmentID); err != nil {
			return "", err
		}
	}
	capability := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: src.FSType, MountFlags: pv.Spec.MountOptions}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode(pv.Spec.AccessModes)},
	}
	readOnly = readOnly || src.ReadOnly
	// What the publication needs is gathered before anything is staged.
	attrs := map[string]string{}
	for k, v := range src.VolumeAttributes {
		attrs[k] = v
	}
	if info.podInfo {
		podInfo(p, attrs, false)
	}
	if err := m.addTokens(ctx, p, info, attrs); err != nil {
		return "", err
	}
	secrets, err := m.secrets(ctx, src.NodePublishSecretRef)
	if err != nil {
		return "", err
	}
	stagedNow := false
	if drv.stage {
		d.Staging = m.stagingPath(src.Driver, src.VolumeHandle)
		if stagedNow, err = m.stage(ctx, drv, pv, d.Staging, publishContext, capability); err != nil {
			return "", err
		}
	}
	dir := m.podVolumeDir(p.UID, pv.Name)
	d.target = filepath.Join(dir, "mount")
	err = m.publish(ctx, drv, p.UID, d, &csipb.NodePublishVolumeRequest{
		VolumeId: src.VolumeHandle, PublishContext: publishContext, StagingTargetPath: d.Staging, TargetPath: d.target,
		VolumeCapability: capability, Readonly: readOnly, Secrets: secrets, VolumeContext: attrs,
	})
	if err != nil {
		if stagedNow && !m.staged(src.Driver, src.VolumeHandle) {
			m.unstage(ctx, drv, d) // staged for nothing: taken back (best effort)
		}
		return "", fmt.Errorf("NodePublishVolume of %s: %w", pv.Name, err)
	}
	m.own(p, info, src.FSType, pv.Spec.AccessModes, d.target, readOnly)
	m.log.Info("CSI volume published", zap.String("pod", p.Namespace+"/"+p.Name), zap.String("pv", pv.Name),
		zap.String("driver", src.Driver), zap.String("target", d.target), zap.Bool("staged", d.Staging != ""))
	return d.target, nil
}

// driverFor is a registered driver and what its CSIDriver object asks.
func (m *Manager) driverFor(ctx context.Context, name string) (*driver, driverInfo, error) {
	m.mu.Lock()
	drv := m.drivers[name]
	m.mu.Unlock()
	if drv == nil {
		return nil, driverInfo{}, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
	}
	info, err := m.driverObject(ctx, name)
	return drv, info, err
}

// stillPublished returns the target of a volume published for the pod
// whose mount is still there; a record whose mount went (a reboot) is
// dropped, so the volume is published again.
func (m *Manager) stillPublished(uid types.UID, name string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.published[uid][name]
	if d == nil {
		return "", false
	}
	if ok, _ := mountinfo.Mounted(d.target); ok {
		return d.target, true
	}
	delete(m.published[uid], name)
	return "", false
}

// publish writes the volume's vol_data.json and calls NodePublishVolume;
// the volume is recorded once published, and also when the call ended
// without an answer (a timeout: it may be mounted), so that its pod's
// teardown unpublishes it. On a failure the target is taken away unless
// something is mounted there.
func (m *Manager) publish(ctx context.Context, drv *driver, uid types.UID, d *volData, req *csipb.NodePublishVolumeRequest) error {
	dir := filepath.Dir(d.target)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := writeVolData(dir, d); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	_, err := drv.node.NodePublishVolume(cctx, req)
	if err == nil || uncertain(err) {
		m.mu.Lock()
		if m.published[uid] == nil {
			m.published[uid] = map[string]*volData{}
		}
		m.published[uid][d.SpecVolID] = d
		m.mu.Unlock()
		return err
	}
	removeUnmounted(d.target)
	os.Remove(filepath.Join(dir, volDataFile))
	os.Remove(dir)
	return err
}

// uncertain: a call that ended without the driver's answer (the
// kubelet's uncertain mount): what it did is not known.
func uncertain(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Unknown:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// removeUnmounted removes an empty directory unless something is
// mounted there (never recursively: a volume's data is never touched).
func removeUnmounted(path string) {
	if ok, _ := mountinfo.Mounted(path); !ok {
		os.Remove(path)
	}
}

// lockVolume serialises the operations on one volume; it returns the
// unlock.
func (m *Manager) lockVolume(drv, handle string) func() {
	m.mu.Lock()
	if m.volLocks == nil {
		m.volLocks = map[string]*sync.Mutex{}
	}
	l := m.volLocks[drv+"^"+handle]
	if l == nil {
		l = &sync.Mutex{}
		m.volLocks[drv+"^"+handle] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// stage stages a volume unless it is staged (a published volume of the
// same handle is, and its staging path is mounted); staged tells whether
// this call did.
func (m *Manager) stage(ctx context.Context, drv *driver, pv *v1.PersistentVolume, staging string, publishContext map[string]string, capability *csipb.VolumeCapability) (staged bool, err error) {
	src := pv.Spec.CSI
	if mounted, _ := mountinfo.Mounted(staging); mounted && m.staged(src.Driver, src.VolumeHandle) {
		return false, nil
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return false, err
	}
	secrets, err := m.secrets(ctx, src.NodeStageSecretRef)
	if err != nil {
		return false, err
	}
	if err := writeVolData(filepath.Dir(staging), &volData{SpecVolID: pv.Name, VolumeHandle: src.VolumeHandle, DriverName: src.Driver, NodeName: m.cfg.NodeName}); err != nil {
		return false, err
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	if _, err := drv.node.NodeStageVolume(cctx, &csipb.NodeStageVolumeRequest{
		VolumeId: src.VolumeHandle, PublishContext: publishContext, StagingTargetPath: staging,
		VolumeCapability: capability, Secrets: secrets, VolumeContext: src.VolumeAttributes,
	}); err != nil {
		return false, fmt.Errorf("NodeStageVolume of %s: %w", pv.Name, err)
	}
	m.log.Info("CSI volume staged", zap.String("pv", pv.Name), zap.String("driver", src.Driver), zap.String("staging", staging))
	return true, nil
}

// unstage calls NodeUnstageVolume and removes what the staging left.
func (m *Manager) unstage(ctx context.Context, drv *driver, d *volData) error {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	if _, err := drv.node.NodeUnstageVolume(cctx, &csipb.NodeUnstageVolumeRequest{VolumeId: d.VolumeHandle, StagingTargetPath: d.Staging}); err != nil {
		return fmt.Errorf("NodeUnstageVolume of %s: %w", d.SpecVolID, err)
	}
	removeUnmounted(d.Staging)
	if ok, _ := mountinfo.Mounted(d.Staging); !ok {
		os.Remove(filepath.Join(filepath.Dir(d.Staging), volDataFile))
		os.Remove(filepath.Dir(d.Staging))
	}
	m.log.Info("CSI volume unstaged", zap.String("pv", d.SpecVolID), zap.String("driver", d.DriverName))
	return nil
}

// staged: a published volume of this handle is staged.
func (m *Manager) staged(drv, handle string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, vols := range m.published {
		for _, d := range vols {
			if d.DriverName == drv && d.VolumeHandle == handle && d.Staging != "" {
				return true
			}
		}
	}
	return false
}

// own gives the published volume to the pod's fsGroup as the kubelet's
// CSI mounter does, by the CSIDriver's fsGroupPolicy: File always, None
// never, ReadWriteOnceWithFSType (the default) when the volume has an
// fsType and is ReadWriteOnce. A failure is logged (the kubelet fails the
// mount; the container would then start on a volume it may not write).
func (m *Manager) own(p *v1.Pod, info driverInfo, fsType string, modes []v1.PersistentVolumeAccessMode, target string, readOnly bool) {
	sc := p.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return
	}
	switch info.fsGroupPolicy {
	case storagev1.NoneFSGroupPolicy:
		return
	case storagev1.FileFSGroupPolicy:
	default:
		if fsType == "" || len(modes) == 0 || slices.ContainsFunc(modes, func(a v1.PersistentVolumeAccessMode) bool {
			return a != v1.ReadWriteOnce && a != v1.ReadWriteOncePod
		}) {
			return
		}
	}
	onRootMismatch := sc.FSGroupChangePolicy != nil && *sc.FSGroupChangePolicy == v1.FSGroupChangeOnRootMismatch
	if err := volume.SetOwnership(target, *sc.FSGroup, readOnly, onRootMismatch); err != nil {
		m.log.Warn("give the CSI volume to the pod's fsGroup", zap.String("target", target), zap.Error(err))
	}
}

// VolumesInUse are the node's volumes of attachable drivers (those
// published through a VolumeAttachment), as the Node's
// status.volumesInUse names them (kubernetes.io/csi/<driver>^<handle>):
// the attach/detach controller detaches none of them while they are
// listed. Nil-safe (standalone: none).
func (m *Manager) VolumesInUse() []v1.UniqueVolumeName {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	set := map[v1.UniqueVolumeName]bool{}
	for _, vols := range m.published {
		for _, d := range vols {
			if d.AttachmentID != "" {
				set[v1.UniqueVolumeName(pluginName+"/"+d.DriverName+"^"+d.VolumeHandle)] = true
			}
		}
	}
	out := make([]v1.UniqueVolumeName, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Unpublish unpublishes every volume of a pod, and unstages each that no
// other pod uses; what the driver cannot do now (gone, or failing) is
// the error, kept for the next call.
func (m *Manager) Unpublish(ctx context.Context, uid types.UID) error {
	m.mu.Lock()
	vols := m.published[uid]
	names := make([]string, 0, len(vols))
	for n := range vols {
		names = append(names, n)
	}
	m.mu.Unlock()
	slices.Sort(names)
	var errs []error
	for _, n := range names {
		if err := m.unpublish(ctx, uid, vols[n]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) unpublish(ctx context.Context, uid types.UID, d *volData) error {
	defer m.lockVolume(d.DriverName, d.VolumeHandle)()
	m.mu.Lock()
	drv := m.drivers[d.DriverName]
	m.mu.Unlock()
	if drv == nil {
		return fmt.Errorf("unpublish CSI volume %s: driver %s not registered", d.SpecVolID, d.DriverName)
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	if _, err := drv.node.NodeUnpublishVolume(cctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: d.VolumeHandle, TargetPath: d.target}); err != nil {
		return fmt.Errorf("NodeUnpublishVolume of %s: %w", d.SpecVolID, err)
	}
	if ok, _ := mountinfo.Mounted(d.target); ok {
		return fmt.Errorf("NodeUnpublishVolume of %s: %s is still mounted", d.SpecVolID, d.target)
	}
	// Unstaged with its last pod, before this pod's record goes: a
	// failed unstage is tried again by the next call for the pod (its
	// record and vol_data.json kept), also after a restart.
	if d.Staging != "" && !m.stagedByOthers(uid, d) {
		if err := m.unstage(ctx, drv, d); err != nil {
			return err
		}
	}
	os.Remove(d.target)
	os.Remove(filepath.Join(filepath.Dir(d.target), volDataFile))
	os.Remove(filepath.Dir(d.target))
	m.mu.Lock()
	delete(m.published[uid], d.SpecVolID)
	if len(m.published[uid]) == 0 {
		delete(m.published, uid)
	}
	m.mu.Unlock()
	m.log.Info("CSI volume unpublished", zap.String("podUID", string(uid)), zap.String("pv", d.SpecVolID), zap.String("driver", d.DriverName))
	return nil
}

// stagedByOthers: another pod's publication of the volume uses its
// staging.
func (m *Manager) stagedByOthers(uid types.UID, d *volData) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for u, vols := range m.published {
		for name, o := range vols {
			if (u != uid || name != d.SpecVolID) && o.DriverName == d.DriverName && o.VolumeHandle == d.VolumeHandle && o.Staging != "" {
				return true
			}
		}
	}
	return false
}

// podInfo adds the pod's identity to a volume context (podInfoOnMount).
func podInfo(p *v1.Pod, attrs map[string]string, ephemeral bool) {
	attrs["csi.storage.k8s.io/pod.name"] = p.Name
	attrs["csi.storage.k8s.io/pod.namespace"] = p.Namespace
	attrs["csi.storage.k8s.io/pod.uid"] = string(p.UID)
	attrs["csi.storage.k8s.io/serviceAccount.name"] = p.Spec.ServiceAccountName
	attrs["csi.storage.k8s.io/ephemeral"] = fmt.Sprint(ephemeral)
}

// addTokens puts the tokens the CSIDriver asks for into a volume
// context, as the kubelet's csi.storage.k8s.io/serviceAccount.tokens:
// JSON, audience → {token, expirationTimestamp}.
func (m *Manager) addTokens(ctx context.Context, p *v1.Pod, info driverInfo, attrs map[string]string) error {
	if len(info.tokens) == 0 {
		return nil
	}
	if m.cfg.Token == nil {
		return errors.New("the CSI driver asks for service account tokens, which need an API server")
	}
	type tok struct {
		Token               string    `json:"token"`
		ExpirationTimestamp time.Time `json:"expirationTimestamp"`
	}
	out := map[string]tok{}
	for _, tr := range info.tokens {
		seconds := int64(3600)
		if tr.ExpirationSeconds != nil {
			seconds = *tr.ExpirationSeconds
		}
		t, exp, err := m.cfg.Token(ctx, p, tr.Audience, seconds)
		if err != nil {
			return fmt.Errorf("service account token for the CSI driver (audience %q): %w", tr.Audience, err)
		}
		out[tr.Audience] = tok{Token: t, ExpirationTimestamp: exp}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	attrs["csi.storage.k8s.io/serviceAccount.tokens"] = string(b)
	return nil
}

// PublishInline publishes a pod's CSI ephemeral inline volume (a csi
// volume in the pod spec), as the kubelet: only for a driver whose
// CSIDriver lists the Ephemeral lifecycle mode, with the kubelet's
// volume handle (csi-<sha256 of the pod UID and the volume name>),
// never staged; the volume context says it is ephemeral.
func (m *Manager) PublishInline(ctx context.Context, p *v1.Pod, v *v1.Volume) (string, error) {
	src := v.CSI
	handle := fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(p.UID)+v.Name)))
	defer m.lockVolume(src.Driver, handle)()
	if target, ok := m.stillPublished(p.UID, v.Name); ok {
		return target, nil
	}
	drv, info, err := m.driverFor(ctx, src.Driver)
	if err != nil {
		return "", err
	}
	if !info.ephemeral {
		return "", fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", storagev1.VolumeLifecycleEphemeral, src.Driver, storagev1.VolumeLifecyclePersistent)
	}
	d := &volData{SpecVolID: v.Name, VolumeHandle: handle, DriverName: src.Driver,
		NodeName: m.cfg.NodeName, LifecycleMode: string(storagev1.VolumeLifecycleEphemeral)}
	d.target = filepath.Join(m.podVolumeDir(p.UID, v.Name), "mount")
	attrs := map[string]string{"csi.storage.k8s.io/ephemeral": "true"}
	for k, val := range src.VolumeAttributes {
		attrs[k] = val
	}
	if info.podInfo {
		podInfo(p, attrs, true)
	}
	if err := m.addTokens(ctx, p, info, attrs); err != nil {
		return "", err
	}
	var secrets map[string]string
	if ref := src.NodePublishSecretRef; ref != nil {
		if secrets, err = m.secrets(ctx, &v1.SecretReference{Namespace: p.Namespace, Name: ref.Name}); err != nil {
			return "", err
		}
	}
	fsType := ""
	if src.FSType != nil {
		fsType = *src.FSType
	}
	readOnly := src.ReadOnly != nil && *src.ReadOnly
	if err := m.publish(ctx, drv, p.UID, d, &csipb.NodePublishVolumeRequest{
		VolumeId: d.VolumeHandle, TargetPath: d.target, Readonly: readOnly, Secrets: secrets, VolumeContext: attrs,
		VolumeCapability: &csipb.VolumeCapability{
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: fsType}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
	}); err != nil {
		return "", fmt.Errorf("NodePublishVolume of inline volume %s: %w", v.Name, err)
	}
	m.own(p, info, fsType, []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, d.target, readOnly)
	m.log.Info("CSI inline volume published", zap.String("pod", p.Namespace+"/"+p.Name), zap.String("volume", v.Name),
		zap.String("driver", src.Driver), zap.String("target", d.target))
	return d.target, nil
}

func writeVolData(dir string, d *volData) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, volDataFile), b, 0o644)
}

// driverInfo is what a CSIDriver object asks of the node.
type driverInfo struct {
	attach, podInfo bool
	ephemeral       bool // inline ephemeral volumes allowed
	tokens          []storagev1.TokenRequest
	fsGroupPolicy   storagev1.FSGroupPolicy // "" is the default, ReadWriteOnceWithFSType
}

// driverObject reads the driver's CSIDriver object: without one (or
// standalone), attachment is required, as the kubelet's default.
func (m *Manager) driverObject(ctx context.Context, name string) (driverInfo, error) {
	info := driverInfo{attach: true}
	if m.cfg.Client == nil {
		return info, nil
	}
	obj, err := m.cfg.Client.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return info, nil
	}
	if err != nil {
		return info, fmt.Errorf("read CSIDriver %s: %w", name, err)
	}
	if obj.Spec.AttachRequired != nil {
		info.attach = *obj.Spec.AttachRequired
	}
	info.podInfo = obj.Spec.PodInfoOnMount != nil && *obj.Spec.PodInfoOnMount
	info.ephemeral = slices.Contains(obj.Spec.VolumeLifecycleModes, storagev1.VolumeLifecycleEphemeral)
	info.tokens = obj.Spec.TokenRequests
	if obj.Spec.FSGroupPolicy != nil {
		info.fsGroupPolicy = *obj.Spec.FSGroupPolicy
	}
	return info, nil
}

// attachmentName is the kubelet's VolumeAttachment name for a volume on
// a node.
func attachmentName(handle, drv, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+drv+node)))
}

// attached returns the attachment's publish context once it is attached;
// an error (the container waits) until then.
func (m *Manager) attached(ctx context.Context, name string) (map[string]string, error) {
	if m.cfg.Client == nil {
		return nil, errors.New("the volume needs a VolumeAttachment, which needs an API server")
	}
	va, err := m.cfg.Client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("volume attachment %s: %w", name, err)
	}
	if !va.Status.Attached {
		if e := va.Status.AttachError; e != nil {
			return nil, fmt.Errorf("volume attachment %s failed: %s", name, e.Message)
		}
		return nil, fmt.Errorf("volume attachment %s is not attached yet", name)
	}
	return va.Status.AttachmentMetadata, nil
}

// secrets reads a secret a volume names (nil ref: none).
func (m *Manager) secrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	if m.cfg.Client == nil {
		return nil, errors.New("the volume's secret needs an API server")
	}
	s, err := m.cfg.Client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	out := map[string]string{}
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// accessMode is the CSI access mode of a PV's first access mode (the
// kubelet's asCSIAccessModeV1).
func accessMode(modes []v1.PersistentVolumeAccessMode) csipb.VolumeCapability_AccessMode_Mode {
	if len(modes) == 0 {
		return csipb.VolumeCapability_AccessMode_UNKNOWN
	}
	switch modes[0] {
	case v1.ReadWriteOnce, v1.ReadWriteOncePod:
		return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	case v1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	}
	return csipb.VolumeCapability_AccessMode_UNKNOWN
}

// RegisterDriver connects to a driver that registered (package
// pluginmanager): its node info goes into the CSINode, its capabilities
// decide staging. An error refuses the registration.
func (m *Manager) RegisterDriver(ctx context.Context, name, endpoint string) error {
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	drv := &driver{name: name, endpoint: endpoint, conn: conn, node: csipb.NewNodeClient(conn)}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	info, err := drv.node.NodeGetInfo(cctx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		conn.Close()
		return fmt.Errorf("error during CSI NodeGetInfo() call: %w", err)
	}
	caps, err := drv.node.NodeGetCapabilities(cctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		conn.Close()
		return fmt.Errorf("error during CSI NodeGetCapabilities() call: %w", err)
	}
	for _, c := range caps.Capabilities {
		switch c.GetRpc().GetType() {
		case csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			drv.stage = true
		case csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS:
			drv.stats = true
		}
	}
	if err := m.updateNode(ctx, name, info); err != nil {
		conn.Close()
		return err
	}
	if err := m.updateCSINode(ctx, name, info); err != nil {
		conn.Close()
		return err
	}
	m.mu.Lock()
	old := m.drivers[name]
	m.drivers[name] = drv
	m.mu.Unlock()
	if old != nil {
		old.conn.Close()
	}
	m.log.Info("CSI driver registered", zap.String("driver", name), zap.String("endpoint", endpoint),
		zap.String("nodeID", info.NodeId), zap.Bool("stageUnstage", drv.stage))
	return nil
}

// DeregisterDriver forgets a driver whose registration socket went: it
// leaves the CSINode.
func (m *Manager) DeregisterDriver(ctx context.Context, name string) {
	m.mu.Lock()
	drv := m.drivers[name]
	delete(m.drivers, name)
	m.mu.Unlock()
	if drv == nil {
		return
	}
	drv.conn.Close()
	if err := m.updateNode(ctx, name, nil); err != nil {
		m.log.Warn("remove the driver's node ID from the Node", zap.String("driver", name), zap.Error(err))
	}
	if err := m.updateCSINode(ctx, name, nil); err != nil {
		m.log.Warn("remove the driver from the CSINode", zap.String("driver", name), zap.Error(err))
	}
	m.log.Info("CSI driver deregistered", zap.String("driver", name))
}

// updateCSINode puts a driver into the node's CSINode (info nil: takes
// it out), made when missing and owned by the Node, as the kubelet's
// nodeinfomanager; its topology keys and volume limit come with it.
func (m *Manager) updateCSINode(ctx context.Context, name string, info *csipb.NodeGetInfoResponse) error {
	if m.cfg.Client == nil {
		return nil
	}
	api := m.cfg.Client.StorageV1().CSINodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if info == nil {
				return nil
			}
			node, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("read the Node for its CSINode: %w", err)
			}
			cur = &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: m.cfg.NodeName, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}}}
			cur.Spec.Drivers = []storagev1.CSINodeDriver{csiNodeDriver(name, info)}
			_, err = api.Create(ctx, cur, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		drivers := slices.DeleteFunc(slices.Clone(cur.Spec.Drivers), func(d storagev1.CSINodeDriver) bool { return d.Name == name })
		if info != nil {
			drivers = append(drivers, csiNodeDriver(name, info))
		}
		cur.Spec.Drivers = drivers
		_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func csiNodeDriver(name string, info *csipb.NodeGetInfoResponse) storagev1.CSINodeDriver {
	d := storagev1.CSINodeDriver{Name: name, NodeID: info.NodeId, TopologyKeys: []string{}}
	for k := range info.GetAccessibleTopology().GetSegments() {
		d.TopologyKeys = append(d.TopologyKeys, k)
	}
	slices.Sort(d.TopologyKeys)
	if info.MaxVolumesPerNode > 0 {
		n := int32(info.MaxVolumesPerNode)
		d.Allocatable = &storagev1.VolumeNodeResources{Count: &n}
	}
	return d
}

// ValidatePlugin accepts a driver that speaks CSI 1.x (the kubelet's
// highestSupportedVersion).
func (m *Manager) ValidatePlugin(name string, versions []string) error {
	for _, v := range versions {
		if strings.HasPrefix(strings.TrimPrefix(v, "v"), "1.") || strings.TrimPrefix(v, "v") == "1" {
			return nil
		}
	}
	return fmt.Errorf("none of the versions specified %q are supported by CSI driver %s", versions, name)
}

// RegisterPlugin implements pluginmanager.Handler.
func (m *Manager) RegisterPlugin(ctx context.Context, name, endpoint string) error {
	return m.RegisterDriver(ctx, name, endpoint)
}

// DeregisterPlugin implements pluginmanager.Handler.
func (m *Manager) DeregisterPlugin(ctx context.Context, name string) { m.DeregisterDriver(ctx, name) }

// nodeIDAnnotation is the kubelet's annotation of the Node with each CSI
// driver's node ID (JSON: driver → ID).
const nodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// updateNode records a driver's node ID in the Node's annotation and
// its topology segments as the Node's labels (info nil: takes the ID
// out, labels stay), as the kubelet's nodeinfomanager; a segment whose
// label the Node has with another value refuses the driver.
func (m *Manager) updateNode(ctx context.Context, name string, info *csipb.NodeGetInfoResponse) error {
	if m.cfg.Client == nil {
		return nil
	}
	nodes := m.cfg.Client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read the Node for CSI driver %s: %w", name, err)
		}
		ids := map[string]string{}
		if a := node.Annotations[nodeIDAnnotation]; a != "" {
			if err := json.Unmarshal([]byte(a), &ids); err != nil {
				return fmt.Errorf("the Node's %s annotation: %w", nodeIDAnnotation, err)
			}
		}
		changed := false
		if info == nil {
			if _, ok := ids[name]; ok {
				delete(ids, name)
				changed = true
			}
		} else {
			if ids[name] != info.NodeId {
				ids[name] = info.NodeId
				changed = true
			}
			for k, v := range info.GetAccessibleTopology().GetSegments() {
				if cur, ok := node.Labels[k]; ok && cur != v {
					return fmt.Errorf("topology label %s=%s of CSI driver %s conflicts with the Node's %s=%s", k, v, name, k, cur)
				} else if !ok {
					if node.Labels == nil {
						node.Labels = map[string]string{}
					}
					node.Labels[k] = v
					changed = true
				}
			}
		}
		if !changed {
			return nil
		}
		if len(ids) == 0 {
			delete(node.Annotations, nodeIDAnnotation)
		} else {
			b, _ := json.Marshal(ids)
			if node.Annotations == nil {
				node.Annotations = map[string]string{}
			}
			node.Annotations[nodeIDAnnotation] = string(b)
		}
		_, err = nodes.Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

// VolumeStats is a published volume's use as its driver reports it
// (NodeGetVolumeStats), as the kubelet's CSI metrics provider; ok is
// false when the volume is not published here or its driver does not
// report stats (the caller measures the mount itself).
func (m *Manager) VolumeStats(ctx context.Context, uid types.UID, volume string) (fs *statsapi.FsStats, ok bool, err error) {
	m.mu.Lock()
	d := m.published[uid][volume]
	var drv *driver
	if d != nil {
		drv = m.drivers[d.DriverName]
	}
	m.mu.Unlock()
	if d == nil || drv == nil || !drv.stats {
		return nil, false, nil
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	resp, err := drv.node.NodeGetVolumeStats(cctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: d.VolumeHandle, VolumePath: d.target, StagingTargetPath: d.Staging})
	if err != nil {
		return nil, true, fmt.Errorf("rpc error: NodeGetVolumeStats of %s: %w", volume, err)
	}
	fs = &statsapi.FsStats{Time: metav1.Now()}
	u := func(v int64) *uint64 {
		x := uint64(max(v, 0))
		return &x
	}
	for _, use := range resp.Usage {
		switch use.Unit {
		case csipb.VolumeUsage_BYTES:
			fs.AvailableBytes, fs.CapacityBytes, fs.UsedBytes = u(use.Available), u(use.Total), u(use.Used)
		case csipb.VolumeUsage_INODES:
			fs.InodesFree, fs.Inodes, fs.InodesUsed = u(use.Available), u(use.Total), u(use.Used)
		}
	}
	return fs, true, nil
}
