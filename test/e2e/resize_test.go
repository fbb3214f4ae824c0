//go:build integration

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestAPIInPlaceResize: a Burstable pod's cpu resized through the pod's
// resize subresource (kubectl patch --subresource resize) is applied in
// place, as by the kubelet: the same container, never restarted, with
// the new cpu in status.containerStatuses[0].resources and
// allocatedResources, in the container's CRI resources (its CFS quota)
// and in its cgroup, and no PodResizePending or PodResizeInProgress left.
func TestAPIInPlaceResize(t *testing.T) {
	c := apiCluster(t)
	a := joined(t, c)
	p := apiSleeper(a, "resizeme")
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	p = createRunning(t, c, p)
	before := apiPod(c, t, p.Namespace, p.Name)
	if before == nil || len(before.Status.ContainerStatuses) != 1 || before.Status.ContainerStatuses[0].ContainerID == "" {
		t.Fatalf("pod before the resize: %+v", before)
	}
	if got := before.Status.QOSClass; got != v1.PodQOSBurstable {
		t.Fatalf("QoS class %s, want Burstable", got)
	}
	id := before.Status.ContainerStatuses[0].ContainerID
	ctr := a.running("resizeme", "main")
	if ctr == nil || !strings.HasSuffix(id, "://"+ctr.Id) {
		t.Fatalf("running container %+v, want the API's %s", ctr, id)
	}
	if q := criQuota(t, ctr.Id); q != 0 && q != 20000 {
		t.Fatalf("CFS quota before the resize %d, want 20000 (200m)", q)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := before.DeepCopy()
	want.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("200m")
	want.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("400m")
	resized, err := c.Admin.CoreV1().Pods(p.Namespace).UpdateResize(ctx, p.Name, want, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("resize: %v", err)
	}
	if resized.Generation <= before.Generation {
		t.Fatalf("generation %d after the resize, want more than %d", resized.Generation, before.Generation)
	}

	var after *v1.Pod
	eventually(t, 60*time.Second, "the resize applied in the API status", func() bool {
		got := apiPod(c, t, p.Namespace, p.Name)
		if got == nil || len(got.Status.ContainerStatuses) != 1 || got.Status.ObservedGeneration < resized.Generation {
			return false
		}
		cs := got.Status.ContainerStatuses[0]
		if cs.Resources == nil || !cs.Resources.Limits.Cpu().Equal(resource.MustParse("400m")) ||
			!cs.Resources.Requests.Cpu().Equal(resource.MustParse("200m")) || !cs.AllocatedResources.Cpu().Equal(resource.MustParse("200m")) {
			return false
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == v1.PodResizeInProgress || cond.Type == v1.PodResizePending {
				return false
			}
		}
		after = got
		return true
	})
	cs := after.Status.ContainerStatuses[0]
	if cs.ContainerID != id || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("container after the resize %s restarts %d running %v, want %s never restarted", cs.ContainerID, cs.RestartCount, cs.State.Running != nil, id)
	}
	if !cs.Resources.Limits.Memory().Equal(resource.MustParse("64Mi")) || !cs.Resources.Requests.Memory().Equal(resource.MustParse("32Mi")) {
		t.Errorf("memory in effect %+v, want unchanged 32Mi/64Mi", cs.Resources)
	}
	if n := len(a.containers("resizeme", "main")); n != 1 {
		t.Errorf("%d runtime instances of the container, want the one", n)
	}
	// In the runtime: its reported resources, when it reports them, and
	// the cgroup as the container sees it.
	if q := criQuota(t, ctr.Id); q != 0 && q != 40000 {
		t.Errorf("CRI CFS quota %d, want 40000 (400m)", q)
	}
	quota := execIn(t, ctr.Id, "sh", "-c", "cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	if f := strings.Fields(quota); len(f) == 0 || f[0] != "40000" {
		t.Errorf("the container's cgroup cpu quota %q, want 40000", strings.TrimSpace(quota))
	}
}

// criQuota is the container's CFS quota as the runtime reports it in its
// status (0 when it reports no resources).
func criQuota(t *testing.T, id string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("container status %s: %v", id, err)
	}
	return r.GetStatus().GetResources().GetLinux().GetCpuQuota()
}
