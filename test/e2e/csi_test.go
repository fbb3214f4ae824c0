//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

// csiDriver is the tests' CSI node plugin (test/e2e/csidriver) for agent
// a: its volumes are directories of state, its calls logged there.
type csiDriver struct {
	name, state string
}

func startCSIDriver(t *testing.T, a *agent) *csiDriver {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "csidriver")
	if out, err := exec.Command("go", "build", "-o", bin, "./csidriver").CombinedOutput(); err != nil {
		t.Fatalf("build the test CSI driver: %v\n%s", err, out)
	}
	d := &csiDriver{name: "csi.nodeagent.test-" + a.node, state: t.TempDir()}
	reg := filepath.Join(a.root, "plugins_registry")
	eventually(t, 30*time.Second, "the agent's plugin registration directory", func() bool {
		_, err := os.Stat(reg)
		return err == nil
	})
	cmd := exec.Command(bin, "--name", d.name, "--node-id", a.node, "--state", d.state,
		"--csi-socket", filepath.Join(d.state, "csi.sock"), "--registration-socket", filepath.Join(reg, d.name+"-reg.sock"))
	startHostProcess(t, "test CSI driver", cmd)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("test CSI driver's calls:\n%s", d.calls())
		}
	})
	return d
}

func (d *csiDriver) calls() string {
	b, _ := os.ReadFile(filepath.Join(d.state, "calls.log"))
	return string(b)
}

// count is how many calls of method the driver got.
func (d *csiDriver) count(method string) int {
	n := 0
	for _, l := range strings.Split(d.calls(), "\n") {
		if strings.HasPrefix(l, method+" ") {
			n++
		}
	}
	return n
}

// csiMounts lists the CSI mount points beneath dir: the staging
// (plugins/kubernetes.io/csi) and the pods' (kubernetes.io~csi).
func csiMounts(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") &&
			(strings.Contains(f[4], "/kubernetes.io~csi/") || strings.Contains(f[4], "/plugins/kubernetes.io/csi/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// A CSI node plugin on a real control plane: it registers through the
// plugin registration directory and the CSINode lists it; a pod's CSI
// persistent volume is staged once and published into the pod (with the
// pod's identity, as the CSIDriver asks), and an inline ephemeral volume
// of the driver published beside it; the driver's topology is the
// Node's label, its node ID the Node's annotation; the agent SIGKILLed and
// started again finds the driver and the published volume, publishes
// nothing twice, and, once the pod goes, unpublishes and unstages it:
// nothing stays mounted.
func TestAPICSIVolume(t *testing.T) {
	t.Parallel()
	c := apiCluster(t)
	roPort := freePort(t)
	a := joined(t, c, "--read-only-port", strconv.Itoa(roPort))
	d := startCSIDriver(t, a)
	ctx := context.Background()
	eventually(t, 30*time.Second, "the CSINode lists the driver", func() bool {
		n, err := c.Admin.StorageV1().CSINodes().Get(ctx, a.node, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, dr := range n.Spec.Drivers {
			if dr.Name == d.name {
				return dr.NodeID == a.node && len(dr.TopologyKeys) == 1 && dr.Allocatable != nil && *dr.Allocatable.Count == 5
			}
		}
		return false
	})
	eventually(t, 10*time.Second, "the driver told it registered", func() bool {
		return strings.Contains(d.calls(), "NotifyRegistrationStatus - - error= registered=true")
	})

	createCSIObjects(t, c, d.name, a.node)
	p := claimPod(a, "csi", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "csi-" + a.node}},
		"echo hello > /data/file && sleep 3600")
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	// An inline ephemeral volume of the same driver beside it.
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: d.name}}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, v1.VolumeMount{Name: "scratch", MountPath: "/scratch"})
	p.Spec.Containers[0].Command = []string{"sh", "-c", "echo hello > /data/file && echo inline > /scratch/file && sleep 3600"}
	p = createRunning(t, c, p)
	volume := filepath.Join(d.state, "volumes", "vol-"+a.node)
	eventually(t, 30*time.Second, "the pod's file in the driver's volume", func() bool {
		b, err := os.ReadFile(filepath.Join(volume, "file"))
		return err == nil && strings.TrimSpace(string(b)) == "hello"
	})
	if d.count("NodeStageVolume") != 1 || d.count("NodePublishVolume") != 2 || !strings.Contains(d.calls(), "pod="+p.Name) ||
		!strings.Contains(d.calls(), "ephemeral=true") {
		t.Errorf("want one stage, and two publishes (one inline ephemeral) with the pod's name:\n%s", d.calls())
	}
	if len(csiMounts(a.root)) != 3 {
		t.Errorf("mounts beneath the agent's root: %v, want the staging and the pod's two", csiMounts(a.root))
	}
	n, _ := c.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if n.Labels["topology.nodeagent.test/node"] != a.node || !strings.Contains(n.Annotations["csi.volume.kubernetes.io/nodeid"], d.name) {
		t.Errorf("the Node's topology label and node ID annotation: %v %v", n.Labels, n.Annotations)
	}

	// The volume's stats are the driver's (NodeGetVolumeStats), with the
	// claim's reference.
	eventually(t, 30*time.Second, "the CSI volume's stats in /stats/summary", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/stats/summary", roPort))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var s statsapi.Summary
		if json.NewDecoder(resp.Body).Decode(&s) != nil {
			return false
		}
		for _, ps := range s.Pods {
			for _, vs := range ps.VolumeStats {
				if ps.PodRef.Name == p.Name && vs.Name == "data" && vs.UsedBytes != nil && *vs.UsedBytes == 4242 &&
					vs.PVCRef != nil && vs.PVCRef.Name == "csi-"+a.node {
					return true
				}
			}
		}
		return false
	})

	// SIGKILLed and back: the driver registers again, nothing is
	// published twice, the container runs on.
	id := a.running("csi", "main")
	if id == nil {
		t.Fatal("the pod's container is not running")
	}
	admitted := admissions(a, p.Name)
	a.kill9()
	a.start()
	eventually(t, 60*time.Second, "the driver registered with the new agent", func() bool {
		return strings.Count(d.calls(), "NotifyRegistrationStatus - - error= registered=true") == 2
	})
	// The new agent admitted the pod again, and synced it at once (a
	// publish would come with that sync).
	eventually(t, 60*time.Second, "the pod admitted by the new agent", func() bool {
		return admissions(a, p.Name) > admitted
	})
	if got := a.running("csi", "main"); got == nil || got.Id != id.Id {
		t.Errorf("the container did not run on across the agent's restart: %v", got)
	}
	if d.count("NodePublishVolume") != 2 || d.count("NodeStageVolume") != 1 {
		t.Errorf("published or staged again after the restart:\n%s", d.calls())
	}

	// The pod goes: unpublished, unstaged, nothing left mounted.
	if err := c.Admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "unpublished and unstaged, nothing mounted", func() bool {
		return d.count("NodeUnpublishVolume") >= 2 && d.count("NodeUnstageVolume") >= 1 && len(csiMounts(a.root)) == 0
	})
	if b, err := os.ReadFile(filepath.Join(volume, "file")); err != nil || strings.TrimSpace(string(b)) != "hello" {
		t.Errorf("the volume's data after the pod: %q %v", b, err)
	}
}

// createCSIObjects makes the CSIDriver (no attach, the pod's identity
// on mount) and a PV of the driver pre-bound to its claim.
func createCSIObjects(t *testing.T, c *cluster.Cluster, drv, node string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Admin.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: drv},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false), PodInfoOnMount: ptr.To(true),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Admin.StorageV1().CSIDrivers().Delete(context.Background(), drv, metav1.DeleteOptions{}) })
	claim, empty := "csi-"+node, ""
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "csi-" + node},
		Spec: v1.PersistentVolumeSpec{
			Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			ClaimRef:    &v1.ObjectReference{Namespace: "default", Name: claim},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
				Driver: drv, VolumeHandle: "vol-" + node}},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
		}}
	if _, err := c.Admin.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Admin.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	if _, err := c.Admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim},
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &empty, VolumeName: pv.Name, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Admin.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), claim, metav1.DeleteOptions{})
	})
	eventually(t, 60*time.Second, "the claim bound", func() bool {
		pvc, err := c.Admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, claim, metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == v1.ClaimBound
	})
}

// admissions counts the agent's "pod admitted" log lines of a pod.
func admissions(a *agent, pod string) int {
	n := 0
	for _, l := range strings.Split(a.out.String(), "\n") {
		if strings.Contains(l, "pod admitted") && strings.Contains(l, pod) {
			n++
		}
	}
	return n
}
