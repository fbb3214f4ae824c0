package podvolumes_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podvolumes"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// objects is a fake podvolumes.Objects: ConfigMaps by name in namespace
// "default", tokens numbered in request order, expiring after the
// requested lifetime.
type objects struct {
	clock      *testclock.FakeClock
	configMaps map[string]*v1.ConfigMap
	tokenErr   error
	tokens     int
}

func (o *objects) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	if cm, ok := o.configMaps[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (o *objects) Secret(_ context.Context, _, name string) (*v1.Secret, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (o *objects) ServiceAccountToken(_ context.Context, _ *v1.Pod, audience string, seconds int64) (string, time.Time, error) {
	if o.tokenErr != nil {
		return "", time.Time{}, o.tokenErr
	}
	o.tokens++
	return fmt.Sprintf("token-%d-%s", o.tokens, audience), o.clock.Now().Add(time.Duration(seconds) * time.Second), nil
}

type harness struct {
	root  string
	clock *testclock.FakeClock
	objs  *objects
	m     *podvolumes.Manager
}

// newHarness returns a Manager over a fresh root; objs nil is
// standalone mode.
func newHarness(t *testing.T, api bool) *harness {
	t.Helper()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &harness{root: t.TempDir(), clock: clk}
	// Secret and projected volumes are tmpfs mounts: unmounted before
	// the temporary directory goes.
	t.Cleanup(func() { volume.UnmountUnder(h.root) })
	cfg := podvolumes.Config{RootDir: h.root, NodeIP: "192.168.1.10", Clock: clk, Logger: zaptest.NewLogger(t)}
	if api {
		h.objs = &objects{clock: clk, configMaps: map[string]*v1.ConfigMap{}}
		cfg.Objects = h.objs
	}
	m, err := podvolumes.New(cfg)
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	h.m = m
	return h
}

func volPod(vols []v1.Volume, mounts []v1.VolumeMount) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-1", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			Volumes:    vols,
			Containers: []v1.Container{{Name: "app", VolumeMounts: mounts}},
		},
	}
	return p
}

func noExpand(s string) string { return s }

// read reads a rendered volume's file as a container sees it.
func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func TestNewRequiresConfig(t *testing.T) {
	if _, err := podvolumes.New(podvolumes.Config{RootDir: t.TempDir()}); err == nil {
		t.Fatal("New() without Clock and Logger succeeded")
	}
}

// A pod directory is always beneath its root, whatever UID a pod claims.
func TestDirStaysBeneathRoot(t *testing.T) {
	h := newHarness(t, false)
	for _, uid := range []string{"..", ".", "../../etc", "a/b", "", "x\x00y"} {
		dir := h.m.Dir(pod.UID(uid))
		if filepath.Dir(dir) != filepath.Join(h.root, "pods") {
			t.Errorf("Dir(%q) = %s, not directly beneath %s/pods", uid, dir, h.root)
		}
	}
	if got := h.m.Dir("abc-123"); got != filepath.Join(h.root, "pods", "abc-123") {
		t.Errorf("Dir(abc-123) = %s", got)
	}
}

// Cleanup deletes the pod directories of pods that are not active.
func TestCleanup(t *testing.T) {
	h := newHarness(t, false)
	for _, uid := range []string{"keep", "gone"} {
		if err := os.MkdirAll(filepath.Join(h.root, "pods", uid, "volumes"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.m.Cleanup(map[pod.UID]bool{"keep": true})
	for uid, want := range map[string]bool{"keep": true, "gone": false} {
		_, err := os.Stat(filepath.Join(h.root, "pods", uid))
		if got := err == nil; got != want {
			t.Errorf("pod directory %s exists = %v, want %v", uid, got, want)
		}
	}
}

func TestMounts(t *testing.T) {
	h := newHarness(t, true)
	h.objs.configMaps["default/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "alpha", "b": "beta"}}
	p := volPod([]v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			Items:                []v1.KeyToPath{{Key: "a", Path: "conf/a.txt", Mode: ptr.To[int32](0o600)}}}}},
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
			{Path: "host", FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}},
			{Path: "ip", FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}},
		}}}},
	}, []v1.VolumeMount{
		{Name: "scratch", MountPath: "/scratch"},
		{Name: "cfg", MountPath: "/etc/cfg"},
		{Name: "info", MountPath: "/info", ReadOnly: true},
	})
	got, err := h.m.Mounts(context.Background(), p, &p.Spec.Containers[0], "10.88.0.5", nil, noExpand)
	if err != nil {
		t.Fatalf("Mounts() error = %v", err)
	}
	dir := filepath.Join(h.root, "pods", "uid-1", "volumes")
	want := []string{
		"/scratch " + filepath.Join(dir, "kubernetes.io~empty-dir", "scratch") + " rw",
		"/etc/cfg " + filepath.Join(dir, "kubernetes.io~configmap", "cfg") + " ro",
		"/info " + filepath.Join(dir, "kubernetes.io~downward-api", "info") + " ro",
	}
	var gotS []string
	for _, m := range got {
		mode := "rw"
		if m.Readonly {
			mode = "ro"
		}
		gotS = append(gotS, m.ContainerPath+" "+m.HostPath+" "+mode)
	}
	if diff := cmp.Diff(want, gotS); diff != "" {
		t.Fatalf("mounts (-want +got):\n%s", diff)
	}
	if s := read(t, got[1].HostPath, "conf/a.txt"); s != "alpha" {
		t.Errorf("conf/a.txt = %q", s)
	}
	for name, want := range map[string]string{"labels": `app="web"`, "host": "192.168.1.10", "ip": "10.88.0.5"} {
		if s := read(t, got[2].HostPath, name); s != want {
			t.Errorf("%s = %q, want %q", name, s, want)
		}
	}
}

func TestMountsErrors(t *testing.T) {
	cfg := v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}}
	tests := []struct {
		name    string
		api     bool
		source  v1.VolumeSource
		wantErr string
	}{
		{name: "configMap standalone", source: cfg,
			wantErr: `volume "v": configMap volumes need an API server: nodeagent runs standalone (no --kubeconfig)`},
		{name: "secret standalone", source: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}},
			wantErr: `volume "v": secret volumes need an API server: nodeagent runs standalone (no --kubeconfig)`},
		{name: "projected token standalone", source: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}},
			wantErr: `volume "v": projected volumes with sources other than downwardAPI need an API server: nodeagent runs standalone (no --kubeconfig)`},
		{name: "missing configMap", api: true, source: cfg, wantErr: `volume "v": configmap "x" not found`},
		{name: "persistentVolumeClaim standalone", source: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}},
			wantErr: `MountVolume.SetUp failed for volume "v" : error processing PVC default/x: nodeagent runs standalone (no --kubeconfig)`},
		{name: "nfs", source: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}},
			wantErr: `volume "v": volume type not supported (emptyDir, hostPath, configMap, secret, downwardAPI, projected, image, persistentVolumeClaim, ephemeral and csi are)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.api)
			p := volPod([]v1.Volume{{Name: "v", VolumeSource: tt.source}}, []v1.VolumeMount{{Name: "v", MountPath: "/v"}})
			_, err := h.m.Mounts(context.Background(), p, &p.Spec.Containers[0], "", nil, noExpand)
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("Mounts() error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// Refresh re-renders the volumes that running containers of the sandbox
// mount, and only those; a token is asked for again after 80% of its
// life, and a failed refresh keeps the cached one while it is valid.
func TestRefresh(t *testing.T) {
	h := newHarness(t, true)
	token := v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](600)}}}}}
	p := volPod([]v1.Volume{
		{Name: "tok", VolumeSource: token},
		{Name: "unmounted", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}},
	}, []v1.VolumeMount{{Name: "tok", MountPath: "/var/run/secrets/token"}})
	log := zaptest.NewLogger(t)
	mounts, err := h.m.Mounts(context.Background(), p, &p.Spec.Containers[0], "", nil, noExpand)
	if err != nil {
		t.Fatalf("Mounts() error = %v", err)
	}
	dir := mounts[0].HostPath
	running := &pod.RuntimeStatus{UID: p.UID, Containers: []*pod.Container{{Name: "app", SandboxID: "sb1", State: pod.ContainerRunning}}}
	check := func(step, want string, requests int) {
		t.Helper()
		h.m.Refresh(context.Background(), p, running, "sb1", "", log)
		if got := read(t, dir, "token"); got != want {
			t.Errorf("%s: token = %q, want %q", step, got, want)
		}
		if h.objs.tokens != requests {
			t.Errorf("%s: %d token requests, want %d", step, h.objs.tokens, requests)
		}
	}
	check("fresh", "token-1-", 1)
	h.clock.Step(7 * time.Minute) // < 80% of 600s
	check("before 80%", "token-1-", 1)
	h.clock.Step(2 * time.Minute)
	check("after 80%", "token-2-", 2)
	h.objs.tokenErr = errors.New("apiserver down")
	h.clock.Step(9 * time.Minute) // due, still valid
	check("refresh failing", "token-2-", 2)
	if _, err := os.Stat(filepath.Join(h.root, "pods", "uid-1", "volumes", "kubernetes.io~downward-api")); !os.IsNotExist(err) {
		t.Errorf("a volume no container mounts was rendered: %v", err)
	}
	// A container of another sandbox, or not running, refreshes nothing.
	h.objs.tokenErr = nil
	h.clock.Step(time.Hour)
	h.m.Refresh(context.Background(), p, running, "sb2", "", log)
	if h.objs.tokens != 2 {
		t.Errorf("refresh for another sandbox asked for a token")
	}
}

// A volume only an ephemeral container (kubectl debug) mounts is
// refreshed while it runs, as the others'.
func TestRefreshEphemeralContainerMounts(t *testing.T) {
	h := newHarness(t, true)
	p := volPod([]v1.Volume{{Name: "tok", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](600)}}}}}}}, nil)
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "dbg", VolumeMounts: []v1.VolumeMount{{Name: "tok", MountPath: "/var/run/secrets/token"}}}}}
	mounts, err := h.m.Mounts(context.Background(), p, (*v1.Container)(&p.Spec.EphemeralContainers[0].EphemeralContainerCommon), "", nil, noExpand)
	if err != nil || len(mounts) != 1 {
		t.Fatalf("Mounts() = %v, %v", mounts, err)
	}
	st := &pod.RuntimeStatus{UID: p.UID, Containers: []*pod.Container{
		{Name: "app", SandboxID: "sb1", State: pod.ContainerRunning},
		{Name: "dbg", SandboxID: "sb1", State: pod.ContainerRunning, Ephemeral: true},
	}}
	h.clock.Step(9 * time.Minute)
	h.m.Refresh(context.Background(), p, st, "sb1", "", zaptest.NewLogger(t))
	if got := read(t, mounts[0].HostPath, "token"); got != "token-2-" {
		t.Errorf("token = %q, want the refreshed token-2-", got)
	}
}

func TestHostsMount(t *testing.T) {
	h := newHarness(t, false)
	p := volPod(nil, nil)
	p.Spec.Subdomain = "svc"
	p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db", "db.local"}}}
	hosts := podvolumes.Hosts{Hostname: "web", ClusterDomain: "corp.example"}
	if m, err := h.m.HostsMount(p, &p.Spec.Containers[0], "", hosts); m != nil || err != nil {
		t.Fatalf("HostsMount() without a pod IP = %v, %v; want none", m, err)
	}
	m, err := h.m.HostsMount(p, &p.Spec.Containers[0], "10.88.0.5", hosts)
	if err != nil {
		t.Fatalf("HostsMount() error = %v", err)
	}
	if want := filepath.Join(h.root, "pods", "uid-1", "etc-hosts"); m.ContainerPath != "/etc/hosts" || m.HostPath != want || m.Readonly {
		t.Errorf("mount = %v, want %s at /etc/hosts read-write", m, want)
	}
	b, err := os.ReadFile(m.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"10.88.0.5\tweb.svc.default.svc.corp.example\tweb\n", "10.1.2.3\tdb\tdb.local\n"} {
		if !strings.Contains(string(b), line) {
			t.Errorf("hosts file lacks %q:\n%s", line, b)
		}
	}
}

// A container that fills its /etc/hosts does not make the agent read it
// back whole: the file is rewritten (in place) with what it should hold,
// reading no more than that.
func TestHostsMountReadsAFilledFileBounded(t *testing.T) {
	h := newHarness(t, false)
	p := volPod(nil, nil)
	hosts := podvolumes.Hosts{Hostname: "web", ClusterDomain: "cluster.local"}
	m, err := h.m.HostsMount(p, &p.Spec.Containers[0], "10.88.0.5", hosts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(m.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(m.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	// The container writes 64 MiB into it.
	if err := os.WriteFile(m.HostPath, bytes.Repeat([]byte("x"), 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	if _, err := h.m.HostsMount(p, &p.Spec.Containers[0], "10.88.0.5", hosts); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms1)
	if alloc := ms1.TotalAlloc - ms0.TotalAlloc; alloc > 1<<20 {
		t.Errorf("HostsMount allocated %d bytes for a 64 MiB hosts file, want it bounded by the file's due content", alloc)
	}
	got, err := os.ReadFile(m.HostPath)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("hosts file after the rewrite: %d bytes, err %v; want its due %d bytes", len(got), err, len(want))
	}
	if after, _ := os.Stat(m.HostPath); !os.SameFile(before, after) {
		t.Error("the hosts file was replaced, not rewritten in place: running containers would keep the old inode")
	}
	// Same size, other content: rewritten too.
	bad := bytes.Repeat([]byte("y"), len(want))
	os.WriteFile(m.HostPath, bad, 0o644)
	h.m.HostsMount(p, &p.Spec.Containers[0], "10.88.0.5", hosts)
	if got, _ := os.ReadFile(m.HostPath); !bytes.Equal(got, want) {
		t.Error("a same-size hosts file with other content was kept")
	}
}

// Release tears down a finished pod's volumes (a tmpfs secret volume
// unmounted) and keeps the rest of its directory (its hosts file).
func TestReleaseTearsDownVolumes(t *testing.T) {
	h := newHarness(t, false)
	p := volPod(nil, nil)
	if _, err := h.m.HostsMount(p, &p.Spec.Containers[0], "10.88.0.5", podvolumes.Hosts{Hostname: "web"}); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(h.m.Dir(p.UID), "volumes", "kubernetes.io~secret", "creds")
	if err := volume.EnsureTmpfs(secret, 0, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Release(p.UID); err != nil {
		t.Fatal(err)
	}
	if mps, _ := volume.MountsUnder(h.m.Dir(p.UID)); len(mps) != 0 {
		t.Fatalf("still mounted: %v", mps)
	}
	if _, err := os.Stat(filepath.Join(h.m.Dir(p.UID), "volumes")); !os.IsNotExist(err) {
		t.Fatalf("volumes left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.m.Dir(p.UID), "etc-hosts")); err != nil {
		t.Fatalf("the pod's hosts file went too: %v", err)
	}
}

// Image volumes are the runtime's: the mount names the pulled image,
// read-only; an expanded subPathExpr that leaves the image, or an image
// that was not pulled, is an error.
func TestImageVolumeMounts(t *testing.T) {
	spec := &runtimeapi.ImageSpec{Image: "sha256:abc", UserSpecifiedImage: "tools:1.0"}
	tests := []struct {
		name    string
		mount   v1.VolumeMount
		images  map[string]*runtimeapi.ImageSpec
		want    *runtimeapi.Mount
		wantErr string
	}{
		{name: "whole image", mount: v1.VolumeMount{Name: "v", MountPath: "/t"}, images: map[string]*runtimeapi.ImageSpec{"v": spec},
			want: &runtimeapi.Mount{ContainerPath: "/t", Image: spec, Readonly: true}},
		{name: "subPathExpr", mount: v1.VolumeMount{Name: "v", MountPath: "/t", SubPathExpr: "$(DIR)"}, images: map[string]*runtimeapi.ImageSpec{"v": spec},
			want: &runtimeapi.Mount{ContainerPath: "/t", Image: spec, ImageSubPath: "expanded", Readonly: true}},
		{name: "subPathExpr leaving the image", mount: v1.VolumeMount{Name: "v", MountPath: "/t", SubPathExpr: "$(UP)"}, images: map[string]*runtimeapi.ImageSpec{"v": spec},
			wantErr: `volume "v": subPath "../etc" must be a relative path without '..'`},
		{name: "not pulled", mount: v1.VolumeMount{Name: "v", MountPath: "/t"}, wantErr: `volume "v": image volume not pulled`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, false)
			p := volPod([]v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "tools:1.0"}}}}, []v1.VolumeMount{tt.mount})
			expand := func(s string) string {
				if s == "$(UP)" {
					return "../etc"
				}
				return "expanded"
			}
			got, err := h.m.Mounts(context.Background(), p, &p.Spec.Containers[0], "", tt.images, expand)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Mounts() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]*runtimeapi.Mount{tt.want}, got, protocmp.Transform()); diff != "" {
				t.Errorf("Mounts() (-want +got):\n%s", diff)
			}
		})
	}
}

// blockingCSI is a CSI driver whose Unpublish waits for its context: a
// driver that takes its time.
type blockingCSI struct {
	pods    []types.UID
	started chan types.UID
	ended   chan error
}

func (c *blockingCSI) Publish(context.Context, *v1.Pod, *v1.PersistentVolume, bool) (string, error) {
	return "", errors.New("not used")
}
func (c *blockingCSI) PublishInline(context.Context, *v1.Pod, *v1.Volume) (string, error) {
	return "", errors.New("not used")
}
func (c *blockingCSI) VolumeStats(context.Context, types.UID, string) (*statsapi.FsStats, bool, error) {
	return nil, false, nil
}
func (c *blockingCSI) Pods() []types.UID { return c.pods }
func (c *blockingCSI) Unpublish(ctx context.Context, uid types.UID) error {
	c.started <- uid
	<-ctx.Done()
	c.ended <- ctx.Err()
	return ctx.Err()
}

// A gone pod's CSI volumes are unpublished in the background; Close
// cancels that unpublish, waits for it, and none starts after it.
func TestCloseEndsBackgroundUnpublishes(t *testing.T) {
	csi := &blockingCSI{pods: []types.UID{"gone"}, started: make(chan types.UID, 1), ended: make(chan error, 1)}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pods", "gone"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := podvolumes.New(podvolumes.Config{RootDir: root, CSI: csi,
		Clock: testclock.NewFakeClock(time.Unix(1_700_000_000, 0)), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	m.Cleanup(map[pod.UID]bool{})
	if uid := <-csi.started; uid != "gone" {
		t.Fatalf("unpublished %s, want the gone pod", uid)
	}
	m.Close() // returns only once the unpublish ended
	select {
	case err := <-csi.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the unpublish ended with %v, want its context cancelled", err)
		}
	default:
		t.Fatal("Close returned before the unpublish in flight ended")
	}
	m.Cleanup(map[pod.UID]bool{})
	select {
	case uid := <-csi.started:
		t.Errorf("an unpublish of %s started after Close", uid)
	default:
	}
}
