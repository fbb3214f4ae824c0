package podvolumes_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/podvolumes"
)

type claims struct {
	pvcs map[string]*v1.PersistentVolumeClaim
	pvs  map[string]*v1.PersistentVolume
}

func (c claims) Node(context.Context) (*v1.Node, error) {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"}}}, nil
}

func (c claims) PersistentVolumeClaim(_ context.Context, ns, name string) (*v1.PersistentVolumeClaim, error) {
	if pvc := c.pvcs[ns+"/"+name]; pvc != nil {
		return pvc, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (c claims) PersistentVolume(_ context.Context, name string) (*v1.PersistentVolume, error) {
	if pv := c.pvs[name]; pv != nil {
		return pv, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

func boundPair(claim, pvName string, src v1.PersistentVolumeSource) (*v1.PersistentVolumeClaim, *v1.PersistentVolume) {
	pvc := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claim, UID: types.UID("pvc-" + claimUID(claim))},
		Spec: v1.PersistentVolumeClaimSpec{VolumeName: pvName}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: src, ClaimRef: &v1.ObjectReference{Namespace: "default", Name: claim, UID: pvc.UID}}}
	return pvc, pv
}

func claimUID(s string) string { return strings.ReplaceAll(s, "-", "") }

// A bound claim's hostPath or local volume is mounted from its path
// (read-only when the pod's volume says so); an unbound or missing
// claim, a volume for another node, an ephemeral claim the pod does not
// own, a CSI volume and standalone mode are errors that say why.
func TestClaimVolumes(t *testing.T) {
	dir := t.TempDir()
	c := claims{pvcs: map[string]*v1.PersistentVolumeClaim{}, pvs: map[string]*v1.PersistentVolume{}}
	add := func(pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume) {
		c.pvcs["default/"+pvc.Name] = pvc
		if pv != nil {
			c.pvs[pv.Name] = pv
		}
	}
	add(boundPair("host", "pv-host", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: ptr.To(v1.HostPathDirectory)}}))
	pvc, pv := boundPair("local", "pv-local", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}})
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"n1"}}}}}}}
	add(pvc, pv)
	pvc, pv = boundPair("elsewhere", "pv-elsewhere", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}})
	pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
		MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{"n2"}}}}}}}
	add(pvc, pv)
	add(&v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pending"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}, nil)
	add(boundPair("csi", "pv-csi", v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "hostpath.csi.k8s.io", VolumeHandle: "v"}}))
	add(boundPair("web-scratch", "pv-scratch", v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}})) // not owned by the pod

	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	m, err := podvolumes.New(podvolumes.Config{RootDir: t.TempDir(), Claims: c, Clock: clk, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	pods := 0
	mount := func(m *podvolumes.Manager, v v1.Volume) (string, bool, error) {
		p := volPod([]v1.Volume{v}, []v1.VolumeMount{{Name: v.Name, MountPath: "/data"}})
		pods++
		p.UID = types.UID(fmt.Sprintf("uid-%d", pods)) // a claim is resolved once per pod
		ms, err := m.Mounts(context.Background(), p, &p.Spec.Containers[0], "", nil, noExpand)
		if err != nil {
			return "", false, err
		}
		return ms[0].HostPath, ms[0].Readonly, nil
	}
	claim := func(name string, ro bool) v1.Volume {
		return v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name, ReadOnly: ro}}}
	}
	if path, ro, err := mount(m, claim("host", true)); err != nil || path != dir || !ro {
		t.Errorf("hostPath PV: %q %v %v", path, ro, err)
	}
	if path, ro, err := mount(m, claim("local", false)); err != nil || path != dir || ro {
		t.Errorf("local PV for this node: %q %v %v", path, ro, err)
	}
	// Its stats are read where it is.
	p := volPod([]v1.Volume{claim("local", false)}, nil)
	p.UID = types.UID(fmt.Sprintf("uid-%d", pods))
	if got, memory := m.LocalDir(p, &p.Spec.Volumes[0]); got != dir || memory {
		t.Errorf("LocalDir of a mounted claim: %q %v", got, memory)
	}
	if got := podvolumes.ClaimName(p, &p.Spec.Volumes[0]); got != "local" {
		t.Errorf("ClaimName %q", got)
	}
	for _, tc := range []struct {
		v    v1.Volume
		want string
	}{
		{claim("missing", false), `error processing PVC default/missing: persistentvolumeclaims "missing" not found`},
		{claim("pending", false), `PVC default/pending has non-bound phase ("Pending") or empty pvc.Spec.VolumeName ("")`},
		{claim("elsewhere", false), "volume node affinity conflict: PV pv-elsewhere is not for node n1"},
		{claim("csi", false), "CSI volumes (driver hostpath.csi.k8s.io) need an API server"},
		{v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}, "PVC default/web-scratch was not created for pod default/web (pod is not owner)"},
	} {
		if _, _, err := mount(m, tc.v); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.v.Name, err, tc.want)
		}
	}
	// Resolved once per pod: the claim gone from the API, a container
	// started again still gets its volume.
	first := volPod([]v1.Volume{claim("host", false)}, []v1.VolumeMount{{Name: "data", MountPath: "/data"}})
	first.UID = "uid-once"
	if _, err := m.Mounts(context.Background(), first, &first.Spec.Containers[0], "", nil, noExpand); err != nil {
		t.Fatal(err)
	}
	saved := c.pvcs["default/host"]
	delete(c.pvcs, "default/host")
	if ms, err := m.Mounts(context.Background(), first, &first.Spec.Containers[0], "", nil, noExpand); err != nil || ms[0].HostPath != dir {
		t.Errorf("second start without the API's claim: %v %v", ms, err)
	}
	c.pvcs["default/host"] = saved
	// A claim being deleted without its protection is refused.
	deleting := *saved
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	c.pvcs["default/host"] = &deleting
	if _, _, err := mount(m, claim("host", false)); err == nil || !strings.Contains(err.Error(), "can't start pod because PVC default/host is being deleted") {
		t.Errorf("claim being deleted: %v", err)
	}
	c.pvcs["default/host"] = saved

	// The pod owns its ephemeral claim: mounted.
	c.pvcs["default/web-scratch"].OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "web",
		UID: types.UID(fmt.Sprintf("uid-%d", pods+1)), Controller: ptr.To(true)}} // the next mount's pod
	if path, _, err := mount(m, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}); err != nil || path != dir {
		t.Errorf("owned ephemeral claim: %q %v", path, err)
	}
	standalone, _ := podvolumes.New(podvolumes.Config{RootDir: t.TempDir(), Clock: clk, Logger: zaptest.NewLogger(t)})
	if _, _, err := mount(standalone, claim("host", false)); err == nil || !strings.Contains(err.Error(), "standalone") {
		t.Errorf("standalone: %v", err)
	}
}

// A pod's fsGroup owns its emptyDir (and configMap, secret, …, local
// volumes), not a hostPath volume.
func TestFSGroupOwnsVolumes(t *testing.T) {
	host := t.TempDir()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	m, err := podvolumes.New(podvolumes.Config{RootDir: t.TempDir(), Clock: clk, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	p := volPod([]v1.Volume{
		{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}},
	}, []v1.VolumeMount{{Name: "scratch", MountPath: "/s"}, {Name: "host", MountPath: "/h"}})
	p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: ptr.To(int64(2345))}
	ms, err := m.Mounts(context.Background(), p, &p.Spec.Containers[0], "", nil, noExpand)
	if err != nil {
		t.Fatal(err)
	}
	gid := func(path string) uint32 {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return info.Sys().(*syscall.Stat_t).Gid
	}
	if got := gid(ms[0].HostPath); got != 2345 {
		t.Errorf("emptyDir group %d, want the fsGroup", got)
	}
	if got := gid(host); got == 2345 {
		t.Error("a hostPath volume was given to the fsGroup")
	}
}
