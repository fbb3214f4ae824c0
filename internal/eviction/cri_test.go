package eviction

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// statsRuntime answers ListContainerStats only, recording the filter.
type statsRuntime struct {
	runtimeapi.RuntimeServiceClient
	stats  []*runtimeapi.ContainerStats
	filter *map[string]string
}

func (r statsRuntime) ListContainerStats(_ context.Context, in *runtimeapi.ListContainerStatsRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	*r.filter = in.GetFilter().GetLabelSelector()
	return &runtimeapi.ListContainerStatsResponse{Stats: r.stats}, nil
}

func containerStats(uid, name string, memory, disk uint64) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes:    &runtimeapi.ContainerAttributes{Labels: map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name}},
		Memory:        &runtimeapi.MemoryUsage{WorkingSetBytes: &runtimeapi.UInt64Value{Value: memory}},
		WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: &runtimeapi.UInt64Value{Value: disk}},
	}
}

// Usage is summed by pod and by container name (two instances of one
// container add up).
func TestCRIStats(t *testing.T) {
	var filter map[string]string
	s := CRIStats{Selector: map[string]string{"io.nodeagent.managed": "true"}, Timeout: time.Second, Client: statsRuntime{filter: &filter,
		stats: []*runtimeapi.ContainerStats{
			containerStats("a", "web", 100, 10), containerStats("a", "web", 50, 5), containerStats("a", "side", 1, 1),
			containerStats("b", "db", 7, 0),
		}}}
	got, err := s.PodUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[types.UID]Usage{
		"a": {Memory: 151, Disk: 16, Containers: map[string]Usage{"web": {Memory: 150, Disk: 15}, "side": {Memory: 1, Disk: 1}}},
		"b": {Memory: 7, Containers: map[string]Usage{"db": {Memory: 7}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(s.Selector, filter); diff != "" {
		t.Errorf("filter (-want +got):\n%s", diff)
	}
}
