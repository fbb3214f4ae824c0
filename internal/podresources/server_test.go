package podresources

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"
)

type fakeDevices map[types.UID]map[string]map[string]map[int64][]string

func (f fakeDevices) ContainerDevicesByNUMA(uid types.UID, c string) map[string]map[int64][]string {
	return f[uid][c]
}
func (f fakeDevices) HealthyDevices() map[string][]*pluginapi.Device {
	return map[string][]*pluginapi.Device{"example.com/r": {{ID: "d1"}, {ID: "d2"}}}
}

type fakeCPUs struct{}

func (fakeCPUs) Assignments() map[string]map[string]cpuset.CPUSet {
	return map[string]map[string]cpuset.CPUSet{"u1": {"app": cpuset.New(2, 3)}}
}
func (fakeCPUs) AllocatableCPUs() cpuset.CPUSet { return cpuset.New(1, 2, 3) }

// List names each pod's containers (sidecars too, plain init containers
// not) with their devices and exclusive CPUs; Get one pod;
// GetAllocatableResources the healthy devices and the allocatable CPUs.
func TestListGetAllocatable(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pods := []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{UID: "u1", Name: "p1", Namespace: "ns"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "setup"}, {Name: "side", RestartPolicy: &always}},
		Containers:     []v1.Container{{Name: "app"}},
	}}}
	s, err := New(Config{Dir: t.TempDir(), Pods: func() []*v1.Pod { return pods }, Logger: zaptest.NewLogger(t),
		Devices: fakeDevices{"u1": {"app": {"example.com/r": {-1: {"d1"}, 1: {"d2"}}}}}, CPUs: fakeCPUs{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	list, _ := s.List(ctx, &api.ListPodResourcesRequest{})
	p1 := &api.PodResources{Name: "p1", Namespace: "ns", Containers: []*api.ContainerResources{
		{Name: "side"},
		{Name: "app", Devices: []*api.ContainerDevices{{ResourceName: "example.com/r", DeviceIds: []string{"d1"}},
			{ResourceName: "example.com/r", DeviceIds: []string{"d2"}, Topology: &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: 1}}}}}, CpuIds: []int64{2, 3}},
	}}
	if diff := cmp.Diff(&api.ListPodResourcesResponse{PodResources: []*api.PodResources{p1}}, list, protocmp.Transform()); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	got, err := s.Get(ctx, &api.GetPodResourcesRequest{PodName: "p1", PodNamespace: "ns"})
	if err != nil || !cmp.Equal(p1, got.PodResources, protocmp.Transform()) {
		t.Errorf("Get: %v %v", got, err)
	}
	if _, err := s.Get(ctx, &api.GetPodResourcesRequest{PodName: "p1", PodNamespace: "other"}); err == nil {
		t.Error("Get of a pod not on the node: no error")
	}
	alloc, _ := s.GetAllocatableResources(ctx, &api.AllocatableResourcesRequest{})
	want := &api.AllocatableResourcesResponse{Devices: []*api.ContainerDevices{{ResourceName: "example.com/r", DeviceIds: []string{"d1", "d2"}}}, CpuIds: []int64{1, 2, 3}}
	if diff := cmp.Diff(want, alloc, protocmp.Transform()); diff != "" {
		t.Errorf("GetAllocatableResources (-want +got):\n%s", diff)
	}
}
