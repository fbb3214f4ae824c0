//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodeagent/nodeagent/internal/devicemanager/checkpoint"
	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

const sampleResource = "example.com/resource"

// startSamplePlugin runs the kubelet's sample device plugin
// (hack/install-controlplane.sh builds it) for agent a. The plugin
// registers at the kubelet's fixed /var/lib/kubelet/device-plugins: it
// runs in a mount namespace of its own where that path is a's plugin
// directory (over a tmpfs on /var/lib, so nothing is made on the host).
// Its fake devices are files /tmp/Dev-1 and /tmp/Dev-2 it creates on
// Allocate.
func startSamplePlugin(t *testing.T, a *agent) {
	t.Helper()
	bin, err := exec.LookPath("sample-device-plugin")
	if err != nil {
		t.Fatalf("the kubelet's sample device plugin (hack/install-controlplane.sh builds it): %v", err)
	}
	dir := filepath.Join(a.root, "device-plugins")
	eventually(t, 30*time.Second, "the agent's device plugin registration socket", func() bool {
		_, err := os.Stat(filepath.Join(dir, "kubelet.sock"))
		return err == nil
	})
	script := fmt.Sprintf("mount -t tmpfs tmpfs /var/lib && mkdir -p /var/lib/kubelet/device-plugins && "+
		"mount --bind %s /var/lib/kubelet/device-plugins && exec %s", dir, bin)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "PLUGIN_SOCK_DIR=/var/lib/kubelet/device-plugins")
	t.Cleanup(func() { // its fake devices, once it stopped (cleanups run last first)
		os.Remove("/tmp/Dev-1")
		os.Remove("/tmp/Dev-2")
	})
	startHostProcess(t, "sample device plugin", cmd)
}

// nodeDevices is the Node's capacity and allocatable of the sample
// resource (-1 when absent).
func nodeDevices(c *cluster.Cluster, node string) (int64, int64) {
	n, err := c.Admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		return -1, -1
	}
	get := func(l v1.ResourceList) int64 {
		if q, ok := l[sampleResource]; ok {
			return q.Value()
		}
		return -1
	}
	return get(n.Status.Capacity), get(n.Status.Allocatable)
}

func devicePod(a *agent, name string, n int64) *v1.Pod {
	p := apiSleeper(a, name)
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: v1.ResourceList{sampleResource: *resource.NewQuantity(n, resource.DecimalSI)}}
	return p
}

// podResources calls the agent's pod resources API.
func podResources(a *agent) (*podresourcesapi.ListPodResourcesResponse, *podresourcesapi.AllocatableResourcesResponse, error) {
	conn, err := grpc.NewClient("unix://"+filepath.Join(a.root, "pod-resources", "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := podresourcesapi.NewPodResourcesListerClient(conn)
	list, err := cl.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("pod resources List: %w", err)
	}
	alloc, err := cl.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("pod resources GetAllocatableResources: %w", err)
	}
	return list, alloc, nil
}

func mustPodResources(t *testing.T, a *agent) (*podresourcesapi.ListPodResourcesResponse, *podresourcesapi.AllocatableResourcesResponse) {
	t.Helper()
	list, alloc, err := podResources(a)
	if err != nil {
		t.Fatal(err)
	}
	return list, alloc
}

// listedDevices is the devices the pod resources API lists for a pod's
// container.
func listedDevices(list *podresourcesapi.ListPodResourcesResponse, pod, container string) []string {
	for _, p := range list.PodResources {
		if p.Name != pod {
			continue
		}
		for _, c := range p.Containers {
			if c.Name != container {
				continue
			}
			var ids []string
			for _, d := range c.Devices { // one entry per NUMA node
				if d.ResourceName == sampleResource {
					ids = append(ids, d.DeviceIds...)
				}
			}
			return ids
		}
	}
	return nil
}

// The kubelet's sample device plugin on a real control plane: it
// registers, the Node advertises its two devices, a pod asking for one
// gets it (the plugin's mount), a pod asking for more than exist is
// refused, the pod resources API lists the allocation, an agent restart
// keeps the container and its device (the plugin registers again with
// the new agent), and a gone pod's device is free for the next.
func TestAPIDevicePlugin(t *testing.T) {
	t.Parallel()
	c := apiCluster(t)
	a := joined(t, c)
	startSamplePlugin(t, a)
	eventually(t, 30*time.Second, "the Node advertises 2 example.com/resource", func() bool {
		capacity, allocatable := nodeDevices(c, a.node)
		return capacity == 2 && allocatable == 2
	})

	one := createRunning(t, c, devicePod(a, "dev-one", 1))
	ids := a.containers("dev-one", "main")
	if len(ids) != 1 {
		t.Fatalf("containers of dev-one: %v", ids)
	}
	id := ids[0].Id
	ls := execIn(t, id, "ls", "/tmp")
	if !strings.Contains(ls, "Dev-1") && !strings.Contains(ls, "Dev-2") {
		t.Errorf("the device's mount is not in the container: ls /tmp = %q", ls)
	}
	list, alloc := mustPodResources(t, a)
	held := listedDevices(list, one.Name, "main")
	if len(held) != 1 {
		t.Errorf("pod resources List for dev-one: %v", list)
	}
	if len(alloc.Devices) != 1 || alloc.Devices[0].ResourceName != sampleResource || len(alloc.Devices[0].DeviceIds) != 2 {
		t.Errorf("pod resources GetAllocatableResources: %v", alloc)
	}
	if cp, err := checkpoint.Read(filepath.Join(a.root, "device-plugins")); err != nil || cp == nil || len(cp.Entries()) != 1 {
		t.Errorf("device manager checkpoint (the kubelet's format): %v %+v", err, cp)
	}

	// More than exist: refused as the kubelet's resource fit refuses.
	three := createPod(t, c, devicePod(a, "dev-three", 3))
	eventually(t, 30*time.Second, "dev-three refused OutOfexample.com/resource", func() bool {
		p := apiPod(c, t, three.Namespace, three.Name)
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOf"+sampleResource
	})

	// An agent restart: the container and its device stay; the plugin
	// registers with the new agent (the sample plugin retries after 10s).
	listed := strings.Count(a.out.String(), "device plugin listed its devices")
	a.stop()
	a.start()
	// Listed once the API's pods are admitted again (the socket is served
	// from the start).
	eventually(t, 30*time.Second, "dev-one listed with its device after the restart", func() bool {
		var err error
		list, _, err = podResources(a)
		return err == nil && len(listedDevices(list, one.Name, "main")) > 0
	})
	if got := listedDevices(list, one.Name, "main"); len(got) != 1 || got[0] != held[0] {
		t.Errorf("after the restart dev-one holds %v, want %v", got, held)
	}
	// The Node's status still shows what the agent before the restart
	// posted: the new agent's log tells when the plugin is back.
	eventually(t, 60*time.Second, "the plugin registered again with the new agent", func() bool {
		return strings.Count(a.out.String(), "device plugin listed its devices") > listed
	})
	eventually(t, 30*time.Second, "2 allocatable again", func() bool {
		capacity, allocatable := nodeDevices(c, a.node)
		return capacity == 2 && allocatable == 2
	})
	if ids := a.containers("dev-one", "main"); len(ids) != 1 || ids[0].Id != id || ids[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after the restart: containers %v, want %s still running", ids, id)
	}

	// The gone pod's device is free: a pod asking for both runs.
	zero := int64(0)
	if err := c.Admin.CoreV1().Pods(one.Namespace).Delete(context.Background(), one.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// Force-deleted: gone from the API at once, and, as with the kubelet,
	// its device is free for the next pod while it is being killed.
	eventually(t, 60*time.Second, "dev-one gone from the API", func() bool { return apiPod(c, t, one.Namespace, one.Name) == nil })
	createRunning(t, c, devicePod(a, "dev-two", 2))
	list, _ = mustPodResources(t, a)
	if got := listedDevices(list, a.podName("dev-two"), "main"); len(got) != 2 {
		t.Errorf("dev-two holds %v, want both devices", got)
	}
}
