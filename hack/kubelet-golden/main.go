//go:build ignore

// The kubelet's own code writing what nodeagent must read and write alike:
// CPU manager checkpoints (golden files for internal/cpumanager/state's
// tests) and container hashes. Run by hack/kubelet-golden.sh in a scratch
// module that requires k8s.io/kubernetes (not nodeagent's: the build tag
// keeps it out of ./...).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	allocstate "k8s.io/kubernetes/pkg/kubelet/allocation/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	devcheckpoint "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
	"k8s.io/kubernetes/pkg/kubelet/container"
)

func write(dir, name string, b []byte, err error) {
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		panic(err)
	}
}

func main() {
	dir := os.Args[1]
	// What a kubelet 1.37 writes: v4 (dual checksum).
	none := &state.CPUManagerCheckpoint{CheckpointData: state.CPUManagerCheckpointData{PolicyName: "none", DefaultCPUSet: "",
		Entries: map[string]map[string]string{}, PodEntries: state.PodCPUAssignments{}, Baselines: map[string]map[string]state.ContainerCPUs{}}}
	b, err := none.MarshalCheckpoint()
	write(dir, "kubelet-v4-none.json", b, err)
	static := &state.CPUManagerCheckpoint{CheckpointData: state.CPUManagerCheckpointData{PolicyName: "static", DefaultCPUSet: "0,3",
		Entries:    map[string]map[string]string{"6a1e3c1e-0000-4000-8000-000000000001": {"app": "1-2"}},
		PodEntries: state.PodCPUAssignments{}, Baselines: map[string]map[string]state.ContainerCPUs{}}}
	b, err = static.MarshalCheckpoint()
	write(dir, "kubelet-v4-static.json", b, err)
	// What an older kubelet wrote: v2.
	v2 := &state.CPUManagerCheckpointV2{PolicyName: "static", DefaultCPUSet: "0,3",
		Entries: map[string]map[string]string{"6a1e3c1e-0000-4000-8000-000000000001": {"app": "1-2"}}}
	b, err = v2.MarshalCheckpoint()
	write(dir, "kubelet-v2-static.json", b, err)
	v2none := &state.CPUManagerCheckpointV2{PolicyName: "none", Entries: map[string]map[string]string{}}
	b, err = v2none.MarshalCheckpoint()
	write(dir, "kubelet-v2-none.json", b, err)
	// The allocation manager's checkpoints (allocated_pods_state and
	// actuated_pods_state have this one format).
	alloc, err := allocstate.NewCheckpoint(&allocstate.PodResourceCheckpointInfo{Entries: allocstate.PodResourceInfoMap{
		types.UID("6a1e3c1e-0000-4000-8000-000000000001"): {ContainerResources: map[string]v1.ResourceRequirements{
			"app": {Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
				Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}},
			"side": {}}},
	}})
	if err != nil {
		panic(err)
	}
	b, err = alloc.MarshalCheckpoint()
	write(filepath.Join(dir, "..", "..", "..", "allocation", "testdata"), "kubelet-allocated_pods_state", b, err)
	// The device manager's checkpoint (kubelet_internal_checkpoint).
	devs := devcheckpoint.New([]devcheckpoint.PodDevicesEntry{{
		PodUID: "6a1e3c1e-0000-4000-8000-000000000001", ContainerName: "app", ResourceName: "example.com/resource",
		DeviceIDs: devcheckpoint.DevicesPerNUMA{0: {"Dev-1"}}, AllocResp: []byte{0x1a, 0x04, 0x0a, 0x02, 0x2f, 0x78},
	}}, map[string][]string{"example.com/resource": {"Dev-1", "Dev-2"}})
	b, err = devs.MarshalCheckpoint()
	write(filepath.Join(dir, "..", "..", "..", "devicemanager", "checkpoint", "testdata"), "kubelet_internal_checkpoint", b, err)
	// The kubelet's container hashes.
	for _, c := range []v1.Container{{Name: "app", Image: "127.0.0.1:5055/nodeagent/busybox:1.36"}, {Name: "etcd", Image: "registry.k8s.io/etcd:3.6.4-0"}} {
		fmt.Printf("%s\t%s\t%x\n", c.Name, c.Image, container.HashContainer(&c))
	}
}
