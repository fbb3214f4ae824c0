package eviction

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"
)

// CRIStats is Stats from CRI ListContainerStats: each pod's memory
// working set and writable layers, summed over its containers (known by
// the kubelet's pod UID and container name labels).
type CRIStats struct {
	Client runtimeapi.RuntimeServiceClient
	// Selector marks this agent's containers for the runtime's filter;
	// Owns, if set, is also asked of each one's labels.
	Selector map[string]string
	Owns     func(labels map[string]string) bool
	Timeout  time.Duration
}

// PodUsage implements Stats.
func (s CRIStats) PodUsage(ctx context.Context) (map[types.UID]Usage, error) {
	cctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	resp, err := s.Client.ListContainerStats(cctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{
		LabelSelector: s.Selector}})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]Usage{}
	for _, st := range resp.Stats {
		labels := st.GetAttributes().GetLabels()
		if s.Owns != nil && !s.Owns(labels) {
			continue
		}
		uid := types.UID(labels[kubelettypes.KubernetesPodUIDLabel])
		var cu Usage
		cu.Memory = int64(st.GetMemory().GetWorkingSetBytes().GetValue())
		cu.Disk = int64(st.GetWritableLayer().GetUsedBytes().GetValue())
		u := out[uid]
		u.Memory += cu.Memory
		u.Disk += cu.Disk
		if u.Containers == nil {
			u.Containers = map[string]Usage{}
		}
		name := labels[kubelettypes.KubernetesContainerNameLabel]
		prev := u.Containers[name]
		u.Containers[name] = Usage{Memory: prev.Memory + cu.Memory, Disk: prev.Disk + cu.Disk}
		out[uid] = u
	}
	return out, nil
}

// CRIImageFs is Host.ImageFs from CRI ImageFsInfo: the mount point of
// the runtime's image file system ("" when it names none).
func CRIImageFs(c runtimeapi.ImageServiceClient, timeout time.Duration) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		info, err := c.ImageFsInfo(cctx, &runtimeapi.ImageFsInfoRequest{})
		if err != nil || len(info.ImageFilesystems) == 0 {
			return "", err
		}
		return info.ImageFilesystems[0].GetFsId().GetMountpoint(), nil
	}
}
