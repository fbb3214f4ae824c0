package csi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/volume"
)

// fakeNode is a CSI node service that records its calls.
type fakeNode struct {
	csipb.UnimplementedNodeServer
	backing string // the volume's data, bind-mounted
	mu      sync.Mutex
	calls   []string
	ctx     map[string]string // the last publish's volume context
	pctx    map[string]string // the last publish's publish context
}

func (f *fakeNode) rec(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeNode) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: "id-1", MaxVolumesPerNode: 3, AccessibleTopology: &csipb.Topology{Segments: map[string]string{"zone": "a"}}}, nil
}

func (f *fakeNode) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csipb.NodeServiceCapability_RPC_Type) *csipb.NodeServiceCapability {
		return &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{
		rpc(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), rpc(csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)}}, nil
}

func (f *fakeNode) NodeGetVolumeStats(_ context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 100, Available: 60, Used: 40}, {Unit: csipb.VolumeUsage_INODES, Total: 10, Available: 7, Used: 3}}}, nil
}

// bind bind-mounts from onto to (made), as a driver mounts a volume.
func bind(from, to string) error {
	if err := os.MkdirAll(to, 0o750); err != nil {
		return err
	}
	return unix.Mount(from, to, "", unix.MS_BIND, "")
}

func (f *fakeNode) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	f.rec("stage " + r.VolumeId)
	return &csipb.NodeStageVolumeResponse{}, bind(f.backing, r.StagingTargetPath)
}

func (f *fakeNode) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	f.rec("unstage " + r.VolumeId)
	unix.Unmount(r.StagingTargetPath, 0)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (f *fakeNode) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	f.rec("publish " + r.VolumeId + " " + filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(r.TargetPath))))))
	f.mu.Lock()
	f.ctx, f.pctx = r.VolumeContext, r.PublishContext
	f.mu.Unlock()
	from := r.StagingTargetPath
	if from == "" {
		from = f.backing
	}
	return &csipb.NodePublishVolumeResponse{}, bind(from, r.TargetPath)
}

func (f *fakeNode) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	f.rec("unpublish " + r.VolumeId)
	unix.Unmount(r.TargetPath, 0)
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (f *fakeNode) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// testRoot is an agent root whose mounts are undone before it goes.
func testRoot(t *testing.T) string {
	root := t.TempDir()
	t.Cleanup(func() { volume.UnmountUnder(root) })
	return root
}

func serveNode(t *testing.T, f *fakeNode) string {
	t.Helper()
	f.backing = t.TempDir()
	sock := filepath.Join(t.TempDir(), "csi.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	csipb.RegisterNodeServer(s, f)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return sock
}

// registered is a Manager of node n1 with driver d.test (a fakeNode)
// registered; objs are more API objects beside the Node.
func registered(t *testing.T, objs ...runtime.Object) (*Manager, *fakeNode, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(append([]runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, objs...)...)
	f := &fakeNode{}
	sock := serveNode(t, f)
	m, err := New(Config{RootDir: testRoot(t), NodeName: "n1", Client: cs, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.RegisterDriver(context.Background(), "d.test", sock); err != nil {
		t.Fatal(err)
	}
	return m, f, cs
}

func csiPV(name, handle string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d.test", VolumeHandle: handle}}}}
}

func pod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid)}}
}

// A registered driver is in the CSINode (owned by the Node); a volume is
// staged once for the two pods that use it and published into each,
// with the pod's identity as the CSIDriver asks; it is unstaged when the
// last of them goes — also by a Manager started again over the same
// directories.
func TestRegisterPublishUnpublish(t *testing.T) {
	root := testRoot(t)
	cs := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "node-uid"}},
		&storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "d.test"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
			TokenRequests: []storagev1.TokenRequest{{Audience: "vault", ExpirationSeconds: ptr.To(int64(600))}}}})
	f := &fakeNode{}
	sock := serveNode(t, f)
	token := func(_ context.Context, p *v1.Pod, audience string, seconds int64) (string, time.Time, error) {
		return "tok-" + string(p.UID) + "-" + audience, time.Unix(seconds, 0).UTC(), nil
	}
	m, err := New(Config{RootDir: root, NodeName: "n1", Client: cs, Token: token, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.RegisterDriver(ctx, "d.test", sock); err != nil {
		t.Fatal(err)
	}
	cn, err := cs.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || len(cn.Spec.Drivers) != 1 || cn.Spec.Drivers[0].NodeID != "id-1" || cn.Spec.Drivers[0].TopologyKeys[0] != "zone" ||
		*cn.Spec.Drivers[0].Allocatable.Count != 3 || cn.OwnerReferences[0].UID != "node-uid" {
		t.Fatalf("CSINode: %v %+v", err, cn)
	}
	node, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if node.Labels["zone"] != "a" || node.Annotations["csi.volume.kubernetes.io/nodeid"] != `{"d.test":"id-1"}` {
		t.Errorf("Node labels %v annotations %v: want the driver's topology and node ID", node.Labels, node.Annotations)
	}
	p1, p2 := pod("u1"), pod("u2")
	target, err := m.Publish(ctx, p1, csiPV("pv", "h"), false)
	if err != nil || !strings.HasSuffix(target, filepath.Join("pods", "u1", "volumes", "kubernetes.io~csi", "pv", "mount")) {
		t.Fatalf("publish: %q %v", target, err)
	}
	if want := `{"vault":{"token":"tok-u1-vault","expirationTimestamp":"1970-01-01T00:10:00Z"}}`; f.ctx["csi.storage.k8s.io/serviceAccount.tokens"] != want {
		t.Errorf("tokens %s, want %s", f.ctx["csi.storage.k8s.io/serviceAccount.tokens"], want)
	}
	if f.ctx["csi.storage.k8s.io/pod.name"] != "p-u1" || f.ctx["csi.storage.k8s.io/ephemeral"] != "false" {
		t.Errorf("volume context %v: want the pod's identity", f.ctx)
	}
	if fs, ok, err := m.VolumeStats(ctx, "u1", "pv"); err != nil || !ok || *fs.UsedBytes != 40 || *fs.CapacityBytes != 100 || *fs.InodesUsed != 3 {
		t.Errorf("volume stats: %v %v %+v", ok, err, fs)
	}
	if _, ok, _ := m.VolumeStats(ctx, "u1", "other"); ok {
		t.Error("stats of a volume not published")
	}
	if again, err := m.Publish(ctx, p1, csiPV("pv", "h"), false); err != nil || again != target {
		t.Errorf("published again: %q %v", again, err)
	}
	if _, err := m.Publish(ctx, p2, csiPV("pv", "h"), false); err != nil {
		t.Fatal(err)
	}
	if got, want := f.got(), []string{"stage h", "publish h u1", "publish h u2"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("calls %q, want %q", got, want)
	}
	if err := m.Unpublish(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if got := f.got(); got[len(got)-1] != "unpublish h" {
		t.Errorf("after the first pod: %q (no unstage while u2 uses it)", got)
	}

	// A new Manager (an agent restart) finds u2's volume, and unstages
	// it once u2 goes.
	m2, _ := New(Config{RootDir: root, NodeName: "n1", Client: cs, Logger: zaptest.NewLogger(t)})
	if pods := m2.Pods(); len(pods) != 1 || pods[0] != "u2" {
		t.Fatalf("recovered pods %v", pods)
	}
	if err := m2.Unpublish(ctx, "u2"); err == nil || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("unpublish before the driver registered again: %v", err)
	}
	if err := m2.RegisterDriver(ctx, "d.test", sock); err != nil {
		t.Fatal(err)
	}
	if err := m2.Unpublish(ctx, "u2"); err != nil {
		t.Fatal(err)
	}
	if got := f.got(); strings.Join(got[len(got)-2:], ",") != "unpublish h,unstage h" {
		t.Errorf("calls %q: want the last pod's unpublish, then unstage", got)
	}
	if len(m2.Pods()) != 0 {
		t.Errorf("pods left: %v", m2.Pods())
	}
	m2.DeregisterDriver(ctx, "d.test")
	if cn, _ := cs.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{}); len(cn.Spec.Drivers) != 0 {
		t.Errorf("CSINode after deregistration: %+v", cn.Spec.Drivers)
	}
	if node, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); node.Annotations["csi.volume.kubernetes.io/nodeid"] != "" {
		t.Errorf("node ID annotation after deregistration: %v", node.Annotations)
	}
}

// Without a CSIDriver object attachment is required: the volume waits
// for its VolumeAttachment, and is published with its metadata once
// attached.
func TestPublishWaitsForAttachment(t *testing.T) {
	m, f, cs := registered(t)
	ctx := context.Background()
	if _, err := m.Publish(ctx, pod("u1"), csiPV("pv", "h"), false); err == nil || !strings.Contains(err.Error(), "volume attachment csi-") {
		t.Fatalf("publish without an attachment: %v", err)
	}
	name := attachmentName("h", "d.test", "n1")
	cs.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"dev": "/dev/x"}}}, metav1.CreateOptions{})
	if _, err := m.Publish(ctx, pod("u1"), csiPV("pv", "h"), false); err != nil {
		t.Fatal(err)
	}
	if f.pctx["dev"] != "/dev/x" {
		t.Errorf("publish context %v", f.pctx)
	}
	if _, err := m.Publish(ctx, pod("u2"), &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: v1.PersistentVolumeSpec{
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "other", VolumeHandle: "h"}}}}, false); err == nil ||
		err.Error() != "driver name other not found in the list of registered CSI drivers" {
		t.Errorf("unregistered driver: %v", err)
	}
}

// An inline ephemeral volume is published, never staged, with the
// kubelet's handle, only for a driver whose CSIDriver allows it.
func TestPublishInline(t *testing.T) {
	m, f, cs := registered(t, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "d.test"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}})
	ctx := context.Background()
	v := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "d.test"}}}
	if _, err := m.PublishInline(ctx, pod("u1"), v); err == nil || !strings.Contains(err.Error(), `volume mode "Ephemeral" not supported by driver d.test`) {
		t.Fatalf("inline volume of a persistent-only driver: %v", err)
	}
	obj, _ := cs.StorageV1().CSIDrivers().Get(ctx, "d.test", metav1.GetOptions{})
	obj.Spec.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}
	cs.StorageV1().CSIDrivers().Update(ctx, obj, metav1.UpdateOptions{})
	if _, err := m.PublishInline(ctx, pod("u1"), v); err != nil {
		t.Fatal(err)
	}
	handle := "csi-" + fmt.Sprintf("%x", sha256.Sum256([]byte("u1scratch")))
	if got := f.got(); len(got) != 1 || got[0] != "publish "+handle+" u1" || f.ctx["csi.storage.k8s.io/ephemeral"] != "true" {
		t.Errorf("calls %q context %v", got, f.ctx)
	}
	if err := m.Unpublish(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
	if got := f.got(); got[len(got)-1] != "unpublish "+handle {
		t.Errorf("calls %q: want the unpublish, no unstage", got)
	}
}

// A publication whose mount went (a node reboot: the record survives in
// vol_data.json) is published again, and staged again when its staging
// went too.
func TestRepublishWhenMountWent(t *testing.T) {
	m, f, _ := registered(t, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "d.test"}, Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}})
	ctx := context.Background()
	target, err := m.Publish(ctx, pod("u1"), csiPV("pv", "h"), false)
	if err != nil {
		t.Fatal(err)
	}
	staging := m.stagingPath("d.test", "h")
	unix.Unmount(target, 0)
	unix.Unmount(staging, 0)
	if _, err := m.Publish(ctx, pod("u1"), csiPV("pv", "h"), false); err != nil {
		t.Fatal(err)
	}
	if got, want := f.got(), []string{"stage h", "publish h u1", "stage h", "publish h u1"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("calls %q, want %q", got, want)
	}
	if err := m.Unpublish(ctx, "u1"); err != nil {
		t.Fatal(err)
	}
}
