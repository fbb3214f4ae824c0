// Command csidriver is the e2e tests' CSI node plugin: a real CSI
// Identity and Node service on a unix socket (the CSI spec's gRPC API)
// whose volumes are directories of --state bind-mounted at the staging
// path and from there at each target, and the registration service the
// kubelet's plugin watcher asks (what node-driver-registrar does), on a
// socket in the node's plugins_registry. Every call is appended to
// <state>/calls.log ("<method> <volume> <path> [key=value…]") for the
// tests to check.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	regapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

type driver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer
	regapi.UnimplementedRegistrationServer
	name, nodeID, state, endpoint string

	mu sync.Mutex
}

func (d *driver) record(method, vol, path string, kv map[string]string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	line := method + " " + vol + " " + path
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		line += " " + k + "=" + kv[k]
	}
	f, err := os.OpenFile(filepath.Join(d.state, "calls.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		log.Print(err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

func mounted(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == path {
			return true
		}
	}
	return false
}

func (d *driver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: d.name, VendorVersion: "test"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{}, nil
}

func (d *driver) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

func (d *driver) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	d.record("NodeGetInfo", "-", "-", nil)
	return &csipb.NodeGetInfoResponse{NodeId: d.nodeID, MaxVolumesPerNode: 5,
		AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.nodeagent.test/node": d.nodeID}}}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csipb.NodeServiceCapability_RPC_Type) *csipb.NodeServiceCapability {
		return &csipb.NodeServiceCapability{Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{
		rpc(csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME), rpc(csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS)}}, nil
}

// NodeGetVolumeStats reports the volume's file system as statfs sees it,
// but for a used figure of exactly 4242 bytes the tests look for.
func (d *driver) NodeGetVolumeStats(_ context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(r.VolumePath, &st); err != nil {
		return nil, err
	}
	total, free := int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: total, Available: free, Used: 4242},
		{Unit: csipb.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

func (d *driver) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	d.record("NodeStageVolume", r.VolumeId, r.StagingTargetPath, nil)
	backing := filepath.Join(d.state, "volumes", r.VolumeId)
	if err := os.MkdirAll(backing, 0o777); err != nil {
		return nil, err
	}
	if mounted(r.StagingTargetPath) {
		return &csipb.NodeStageVolumeResponse{}, nil
	}
	if err := os.MkdirAll(r.StagingTargetPath, 0o750); err != nil {
		return nil, err
	}
	if err := unix.Mount(backing, r.StagingTargetPath, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (d *driver) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	d.record("NodeUnstageVolume", r.VolumeId, r.StagingTargetPath, nil)
	if mounted(r.StagingTargetPath) {
		if err := unix.Unmount(r.StagingTargetPath, 0); err != nil {
			return nil, fmt.Errorf("unstage: %w", err)
		}
	}
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (d *driver) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	kv := map[string]string{"readonly": fmt.Sprint(r.Readonly)}
	if n := r.VolumeContext["csi.storage.k8s.io/pod.name"]; n != "" {
		kv["pod"] = n
	}
	defer d.record("NodePublishVolume", r.VolumeId, r.TargetPath, kv)
	if mounted(r.TargetPath) {
		return &csipb.NodePublishVolumeResponse{}, nil
	}
	from := r.StagingTargetPath
	if from == "" { // an inline ephemeral volume: never staged
		kv["ephemeral"] = r.VolumeContext["csi.storage.k8s.io/ephemeral"]
		from = filepath.Join(d.state, "volumes", r.VolumeId)
		if err := os.MkdirAll(from, 0o777); err != nil {
			return nil, err
		}
	} else if !mounted(from) {
		return nil, fmt.Errorf("publish: %s is not staged", from)
	}
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, err
	}
	if err := unix.Mount(from, r.TargetPath, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	if r.Readonly {
		if err := unix.Mount("", r.TargetPath, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return nil, fmt.Errorf("publish read-only: %w", err)
		}
	}
	return &csipb.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	d.record("NodeUnpublishVolume", r.VolumeId, r.TargetPath, nil)
	if mounted(r.TargetPath) {
		if err := unix.Unmount(r.TargetPath, 0); err != nil {
			return nil, fmt.Errorf("unpublish: %w", err)
		}
	}
	os.Remove(r.TargetPath)
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

func (d *driver) GetInfo(context.Context, *regapi.InfoRequest) (*regapi.PluginInfo, error) {
	return &regapi.PluginInfo{Type: regapi.CSIPlugin, Name: d.name, Endpoint: d.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (d *driver) NotifyRegistrationStatus(_ context.Context, s *regapi.RegistrationStatus) (*regapi.RegistrationStatusResponse, error) {
	d.record("NotifyRegistrationStatus", "-", "-", map[string]string{"registered": fmt.Sprint(s.PluginRegistered), "error": s.Error})
	return &regapi.RegistrationStatusResponse{}, nil
}

func serve(path string, register func(*grpc.Server)) {
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		log.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go func() { log.Fatal(s.Serve(ln)) }()
}

func main() {
	d := &driver{}
	var regSocket string
	flag.StringVar(&d.name, "name", "csi.nodeagent.test", "driver name")
	flag.StringVar(&d.nodeID, "node-id", "", "node ID")
	flag.StringVar(&d.state, "state", "", "state directory (volumes, calls.log)")
	flag.StringVar(&d.endpoint, "csi-socket", "", "CSI socket")
	flag.StringVar(&regSocket, "registration-socket", "", "registration socket in plugins_registry")
	flag.Parse()
	serve(d.endpoint, func(s *grpc.Server) {
		csipb.RegisterIdentityServer(s, d)
		csipb.RegisterNodeServer(s, d)
	})
	serve(regSocket, func(s *grpc.Server) { regapi.RegisterRegistrationServer(s, d) })
	log.Printf("csidriver %s serving %s, registering at %s", d.name, d.endpoint, regSocket)
	select {}
}
