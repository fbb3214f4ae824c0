// Package podresources serves the kubelet's pod resources API
// (k8s.io/kubelet/pkg/apis/podresources/v1) on
// <root-dir>/pod-resources/kubelet.sock, which monitoring agents (GPU
// exporters, NUMA-aware schedulers' node agents) read: each pod's
// containers with their devices and exclusive CPUs (List, Get), and what
// the node can allocate (GetAllocatableResources). Memory (no memory
// manager here) and dynamic resources (no DRA) are left empty, as a
// kubelet without those managers leaves them.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	api "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/cpuset"
)

// SocketName is the API's socket in its directory.
const SocketName = "kubelet.sock"

// Devices gives containers' devices and the node's healthy devices
// (devicemanager.Manager).
type Devices interface {
	// ContainerDevicesByNUMA: resource → NUMA node (-1: none) → IDs.
	ContainerDevicesByNUMA(uid types.UID, container string) map[string]map[int64][]string
	HealthyDevices() map[string][]*pluginapi.Device
}

// CPUs gives the exclusive CPUs of containers and the CPUs exclusive
// allocation draws from (cpumanager.Manager).
type CPUs interface {
	Assignments() map[string]map[string]cpuset.CPUSet
	AllocatableCPUs() cpuset.CPUSet
}

// Config wires a Server.
type Config struct {
	// Dir is <root-dir>/pod-resources.
	Dir string
	// Pods are the node's active pods (the pod manager's view).
	Pods    func() []*v1.Pod
	Devices Devices
	CPUs    CPUs
	// OnRequest, if set, counts each call: list, get_allocatable or get
	// (the kubelet's pod resources metrics).
	OnRequest func(method string)
	Logger    *zap.Logger
}

// Server is the pod resources API.
type Server struct {
	api.UnimplementedPodResourcesListerServer
	cfg Config
}

// New returns a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Dir == "" || cfg.Pods == nil || cfg.Devices == nil || cfg.CPUs == nil || cfg.Logger == nil {
		return nil, errors.New("podresources: Dir, Pods, Devices, CPUs and Logger are required")
	}
	return &Server{cfg: cfg}, nil
}

// Run serves the socket until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	if err := os.MkdirAll(s.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("pod resources directory: %w", err)
	}
	path := filepath.Join(s.cfg.Dir, SocketName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("pod resources socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("pod resources socket: %w", err)
	}
	srv := grpc.NewServer()
	api.RegisterPodResourcesListerServer(srv, s)
	stop := context.AfterFunc(ctx, srv.Stop)
	defer stop()
	s.cfg.Logger.Named("podresources").Info("pod resources API serving", zap.String("socket", path))
	if err := srv.Serve(ln); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// List gives every active pod's resources.
func (s *Server) List(context.Context, *api.ListPodResourcesRequest) (*api.ListPodResourcesResponse, error) {
	s.count("list")
	assigned := s.cfg.CPUs.Assignments()
	out := &api.ListPodResourcesResponse{}
	for _, p := range s.cfg.Pods() {
		out.PodResources = append(out.PodResources, s.pod(p, assigned))
	}
	return out, nil
}

// Get gives one active pod's resources.
func (s *Server) Get(_ context.Context, req *api.GetPodResourcesRequest) (*api.GetPodResourcesResponse, error) {
	s.count("get")
	for _, p := range s.cfg.Pods() {
		if p.Name == req.PodName && p.Namespace == req.PodNamespace {
			return &api.GetPodResourcesResponse{PodResources: s.pod(p, s.cfg.CPUs.Assignments())}, nil
		}
	}
	return nil, fmt.Errorf("pod %s not found in namespace %s", req.PodName, req.PodNamespace)
}

// pod is a pod's resources: its containers and sidecars, as the
// kubelet's.
func (s *Server) pod(p *v1.Pod, assigned map[string]map[string]cpuset.CPUSet) *api.PodResources {
	out := &api.PodResources{Name: p.Name, Namespace: p.Namespace}
	container := func(name string) {
		c := &api.ContainerResources{Name: name}
		devs := s.cfg.Devices.ContainerDevicesByNUMA(p.UID, name)
		for _, res := range slices.Sorted(maps.Keys(devs)) {
			// One entry per NUMA node, as the kubelet lists them.
			for _, numa := range slices.Sorted(maps.Keys(devs[res])) {
				cd := &api.ContainerDevices{ResourceName: res, DeviceIds: devs[res][numa]}
				if numa >= 0 {
					cd.Topology = &api.TopologyInfo{Nodes: []*api.NUMANode{{ID: numa}}}
				}
				c.Devices = append(c.Devices, cd)
			}
		}
		for _, cpu := range assigned[string(p.UID)][name].List() {
			c.CpuIds = append(c.CpuIds, int64(cpu))
		}
		out.Containers = append(out.Containers, c)
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			container(c.Name)
		}
	}
	for _, c := range p.Spec.Containers {
		container(c.Name)
	}
	return out
}

// GetAllocatableResources gives the node's healthy devices and the CPUs
// exclusive allocation draws from.
func (s *Server) GetAllocatableResources(context.Context, *api.AllocatableResourcesRequest) (*api.AllocatableResourcesResponse, error) {
	s.count("get_allocatable")
	out := &api.AllocatableResourcesResponse{}
	healthy := s.cfg.Devices.HealthyDevices()
	for _, res := range slices.Sorted(maps.Keys(healthy)) {
		cd := &api.ContainerDevices{ResourceName: res}
		for _, d := range healthy[res] {
			cd.DeviceIds = append(cd.DeviceIds, d.ID)
		}
		out.Devices = append(out.Devices, cd)
	}
	for _, cpu := range s.cfg.CPUs.AllocatableCPUs().List() {
		out.CpuIds = append(out.CpuIds, int64(cpu))
	}
	return out, nil
}

func (s *Server) count(method string) {
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(method)
	}
}
