//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

// startLocalPath runs k3s's local-path provisioner
// (hack/install-controlplane.sh builds it) as a host process with the
// admin kubeconfig, for StorageClass class (WaitForFirstConsumer):
// volumes are directories under base, made and removed by its helper
// pods, which run on the node as any pod (the busybox test image).
func startLocalPath(t *testing.T, c *cluster.Cluster, ns, class, base string) {
	t.Helper()
	bin, err := exec.LookPath("local-path-provisioner")
	if err != nil {
		t.Fatalf("the local-path provisioner (hack/install-controlplane.sh builds it): %v", err)
	}
	ctx := context.Background()
	if _, err := c.Admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	eventually(t, 30*time.Second, "the namespace's default service account", func() bool {
		_, err := c.Admin.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	config, _ := json.Marshal(map[string]any{"nodePathMap": []map[string]any{{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES", "paths": []string{base}}}})
	helper := `apiVersion: v1
kind: Pod
metadata: {name: helper-pod}
spec:
  containers:
  - name: helper-pod
    image: ` + busybox + `
    imagePullPolicy: IfNotPresent
`
	if _, err := c.Admin.CoreV1().ConfigMaps(ns).Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "local-path-config"}, Data: map[string]string{
		"config.json":    string(config),
		"setup":          "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
		"teardown":       "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
		"helperPod.yaml": helper,
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	del := v1.PersistentVolumeReclaimDelete
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := c.Admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Provisioner: "rancher.io/local-path", ReclaimPolicy: &del, VolumeBindingMode: &wait}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Admin.StorageV1().StorageClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	cmd := exec.Command(bin, "--debug", "start", "--kubeconfig", c.AdminKubeconfig, "--namespace", ns,
		"--provisioner-name", "rancher.io/local-path", "--configmap-name", "local-path-config",
		"--helper-image", busybox, "--service-account-name", "default")
	startHostProcess(t, "local-path provisioner", cmd)
}

// selectNode plays the scheduler's part for a WaitForFirstConsumer
// claim (the e2e control plane has no scheduler; its pods name their
// node): the claim is annotated with the node its pod runs on, which
// starts the provisioning.
func selectNode(t *testing.T, c *cluster.Cluster, ns, claim, node string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":%q}}}`, node)
	eventually(t, 30*time.Second, "claim "+claim+" annotated with its node", func() bool {
		_, err := c.Admin.CoreV1().PersistentVolumeClaims(ns).Patch(context.Background(), claim, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err == nil
	})
}

func claimPod(a *agent, name string, vol v1.VolumeSource, cmd string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: a.podName(name), Namespace: "default"},
		Spec: v1.PodSpec{NodeName: a.node, RestartPolicy: v1.RestartPolicyNever,
			Volumes: []v1.Volume{{Name: "data", VolumeSource: vol}},
			Containers: []v1.Container{{Name: "main", Image: busybox, Command: []string{"sh", "-c", cmd},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}}},
	}
}

func podSucceeded(t *testing.T, c *cluster.Cluster, p *v1.Pod, within time.Duration) {
	t.Helper()
	eventually(t, within, p.Name+" Succeeded", func() bool {
		got := apiPod(c, t, p.Namespace, p.Name)
		return got != nil && got.Status.Phase == v1.PodSucceeded
	})
}

// PersistentVolumeClaims on a real control plane with k3s's local-path
// provisioner, unchanged: a claim binds once its pod's node is chosen,
// a pod writes a file and goes, a second pod on the same claim reads it;
// a pod whose claim does not exist waits and says why, and starts once
// the claim exists and binds; a generic ephemeral volume's claim is made
// for its pod, bound, used, and goes with the pod (its directory
// removed by the provisioner).
func TestAPIPersistentVolumeClaims(t *testing.T) {
	t.Parallel()
	c := apiCluster(t)
	a := joined(t, c)
	base := t.TempDir()
	class := "local-path-" + a.node
	startLocalPath(t, c, "local-path-"+a.node, class, base)
	ctx := context.Background()
	claim := func(name string) *v1.PersistentVolumeClaim {
		pvc, err := c.Admin.CoreV1().PersistentVolumeClaims("default").Create(ctx, &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
				Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("64Mi")}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.Admin.CoreV1().PersistentVolumeClaims("default").Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		return pvc
	}
	name := "data-" + a.node
	// The writer is created before its claim: it waits, saying why.
	writer := createPod(t, c, claimPod(a, "pvc-writer", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name}},
		"echo kept > /data/file"))
	eventually(t, 60*time.Second, "the writer ContainerCreating on its missing claim, with a FailedMount event", func() bool {
		p := apiPod(c, t, writer.Namespace, writer.Name)
		if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil ||
			p.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
			return false
		}
		evs, err := c.Admin.CoreV1().Events(writer.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + writer.Name})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, `persistentvolumeclaims "`+name+`" not found`) {
				return true
			}
		}
		return false
	})
	claim(name)
	selectNode(t, c, "default", name, a.node)
	podSucceeded(t, c, writer, 120*time.Second)
	pvc, err := c.Admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil || pvc.Status.Phase != v1.ClaimBound {
		t.Fatalf("claim: %v %v", err, pvc.Status.Phase)
	}
	pv, err := c.Admin.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.HostPath == nil || !strings.HasPrefix(pv.Spec.HostPath.Path, base) {
		t.Fatalf("provisioned volume: %v %+v", err, pv.Spec.PersistentVolumeSource)
	}
	if b, err := os.ReadFile(filepath.Join(pv.Spec.HostPath.Path, "file")); err != nil || strings.TrimSpace(string(b)) != "kept" {
		t.Fatalf("the writer's file on the node: %q %v", b, err)
	}
	zero := int64(0)
	c.Admin.CoreV1().Pods(writer.Namespace).Delete(ctx, writer.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})

	reader := createPod(t, c, claimPod(a, "pvc-reader", v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name, ReadOnly: true}},
		"grep -q kept /data/file && ! touch /data/other 2>/dev/null"))
	podSucceeded(t, c, reader, 60*time.Second)

	// A generic ephemeral volume: its claim is the pod's, and goes with it.
	eph := createPod(t, c, claimPod(a, "pvc-eph", v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{VolumeClaimTemplate: &v1.PersistentVolumeClaimTemplate{
		Spec: v1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("16Mi")}}}}}},
		"echo scratch > /data/file && grep -q scratch /data/file"))
	ephClaim := eph.Name + "-data"
	selectNode(t, c, "default", ephClaim, a.node)
	podSucceeded(t, c, eph, 120*time.Second)
	ephPVC, err := c.Admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, ephClaim, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ephemeral claim: %v", err)
	}
	if !metav1.IsControlledBy(ephPVC, eph) {
		t.Fatalf("the ephemeral claim is not the pod's: %+v", ephPVC.OwnerReferences)
	}
	ephPV, err := c.Admin.CoreV1().PersistentVolumes().Get(ctx, ephPVC.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || ephPV.Spec.HostPath == nil {
		t.Fatalf("the ephemeral claim's volume: %v", err)
	}
	if err := c.Admin.CoreV1().Pods(eph.Namespace).Delete(ctx, eph.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, "the ephemeral claim, its volume and its directory gone with the pod", func() bool {
		_, err := c.Admin.CoreV1().PersistentVolumeClaims("default").Get(ctx, ephClaim, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false
		}
		_, err = os.Stat(ephPV.Spec.HostPath.Path)
		return os.IsNotExist(err)
	})

	// The claim deleted once its pods are: its volume and directory go
	// (reclaim policy Delete), while the provisioner still runs.
	c.Admin.CoreV1().Pods(reader.Namespace).Delete(ctx, reader.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	eventually(t, 60*time.Second, "the pods on the claim gone", func() bool {
		return apiPod(c, t, reader.Namespace, reader.Name) == nil && apiPod(c, t, writer.Namespace, writer.Name) == nil
	})
	if err := c.Admin.CoreV1().PersistentVolumeClaims("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 120*time.Second, "the claim's volume and directory deleted", func() bool {
		_, err := c.Admin.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false
		}
		_, err = os.Stat(pv.Spec.HostPath.Path)
		return os.IsNotExist(err)
	})
}
