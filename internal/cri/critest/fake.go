package critest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"sort"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cri"
)

var _ cri.Client = (*Fake)(nil)

// Call is one recorded call: the method name and the request as received.
type Call struct {
	Method  string
	Request any
}

// Sandbox is the fake's record of one pod sandbox.
type Sandbox struct {
	ID        string
	Config    *runtimeapi.PodSandboxConfig
	State     runtimeapi.PodSandboxState
	CreatedAt int64
	IP        string
	// AdditionalIPs are its other IPs (an IPv6 one with DualStack).
	AdditionalIPs []string
	// RuntimeHandler is the handler it was created with ("": default).
	RuntimeHandler string
}

// Container is the fake's record of one container.
type Container struct {
	ID         string
	SandboxID  string
	Config     *runtimeapi.ContainerConfig
	State      runtimeapi.ContainerState
	CreatedAt  int64
	StartedAt  int64
	FinishedAt int64
	ExitCode   int32
	Reason     string
	ImageRef   string
	// Resources are its Linux resources: the config's, then each
	// UpdateContainerResources' non-zero fields over them (containerd's
	// merge); ContainerStatus reports them.
	Resources *runtimeapi.LinuxContainerResources
	// MemoryUsage is what ListContainerStats reports (SetMemoryUsage).
	MemoryUsage uint64
}

// Fake is an in-memory cri.Client. The zero value is not usable; call
// New.
type Fake struct {
	clock clock.PassiveClock

	mu         sync.Mutex
	seq        int64
	calls      []Call
	errs       map[string]error
	sandboxes  map[string]*Sandbox
	containers map[string]*Container
	images     map[string]string    // image name → image ref
	imageMeta  map[string]imageMeta // image ref → size, pinned (images.go)
	imageFs    string               // ImageFsInfo's mount point (images.go)
	// startExit, when set, makes StartContainer fail the way containerd
	// does when the process cannot be started: the container is recorded
	// as exited with this code (reason StartError) and an error returned.
	startExit *int32
	exec      func(containerID string, cmd []string) (*runtimeapi.ExecSyncResponse, error)
	// handlers are the runtime handlers RunPodSandbox accepts besides
	// the default one ("").
	handlers map[string]bool
	// dualStack gives new sandboxes an IPv6 address after the IPv4 one.
	dualStack bool
	// sandboxMemory is what PodSandboxStats reports, by sandbox ID
	// (SetSandboxMemoryUsage).
	sandboxMemory map[string]uint64
	// runtimeName and runtimeVersion are what Version reports
	// (SetVersion); "fake" "1.0.0" by default.
	runtimeName, runtimeVersion string
	// features is what Status reports of the runtime (SetFeatures); nil
	// reports none, as containerd 1.6.
	features *runtimeapi.StatusResponse
}

// SetFeatures makes Status report the runtime's supplementalGroupsPolicy
// feature and a default handler with recursive read-only mounts or not,
// as containerd 2 does.
func (f *Fake) SetFeatures(supplementalGroupsPolicy, recursiveReadOnly bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.features = &runtimeapi.StatusResponse{
		Features:        &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: supplementalGroupsPolicy},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: recursiveReadOnly}}},
	}
}

// SetVersion makes Version report the runtime name and version given.
func (f *Fake) SetVersion(name, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runtimeName, f.runtimeVersion = name, version
}

// AddRuntimeHandler makes RunPodSandbox accept handler, as a runtime
// configured with it; an unknown one fails as containerd fails it.
func (f *Fake) AddRuntimeHandler(handler string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[handler] = true
}

// DualStack gives every later sandbox an IPv6 address besides its IPv4
// one (the runtime's additional IP).
func (f *Fake) DualStack() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dualStack = true
}

// FailStarts makes every later StartContainer fail as containerd does
// when the process cannot start: the container is recorded EXITED with
// exitCode and reason StartError, and the call returns an error.
func (f *Fake) FailStarts(exitCode int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startExit = &exitCode
}

// New returns an empty Fake whose timestamps come from c.
func New(c clock.PassiveClock) *Fake {
	return &Fake{
		clock:      c,
		errs:       map[string]error{},
		sandboxes:  map[string]*Sandbox{},
		containers: map[string]*Container{},
		images:     map[string]string{},
		handlers:   map[string]bool{},

		sandboxMemory: map[string]uint64{},
	}
}

// ImageRef is the reference the fake gives a pulled or added image.
func ImageRef(image string) string {
	return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(image)))
}

// SetError makes every later call of method (as named in cri.Client, e.g.
// "PullImage") fail with err; a nil err clears it.
func (f *Fake) SetError(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errs, method)
		return
	}
	f.errs[method] = err
}

// Calls returns the calls so far, oldest first.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Methods returns the method names of the calls so far, oldest first.
func (f *Fake) Methods() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.calls))
	for i, c := range f.calls {
		out[i] = c.Method
	}
	return out
}

// ResetCalls forgets the recorded calls.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

// AddImage makes image present, as if pulled earlier.
func (f *Fake) AddImage(image string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[image] = ImageRef(image)
}

// Sandboxes returns copies of every sandbox, oldest first.
func (f *Fake) Sandboxes() []Sandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Sandbox
	for _, s := range f.sandboxes {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out
}

// Containers returns copies of every container, oldest first.
func (f *Fake) Containers() []Container {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Container
	for _, c := range f.containers {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out
}

// ExitContainer moves a container to EXITED with the exit code and reason,
// finished now.
func (f *Fake) ExitContainer(id string, exitCode int32, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("container %q not found", id)
	}
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.ExitCode, c.Reason = exitCode, reason
	c.FinishedAt = f.clock.Now().UnixNano()
	return nil
}

// SetAnnotation sets (value "": removes) an annotation of a container's
// config, as a container another agent version made would carry.
func (f *Fake) SetAnnotation(id, key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("container %q not found", id)
	}
	if value == "" {
		delete(c.Config.Annotations, key)
		return nil
	}
	if c.Config.Annotations == nil {
		c.Config.Annotations = map[string]string{}
	}
	c.Config.Annotations[key] = value
	return nil
}

// SetSandboxState changes a sandbox's state, as when its pause process
// dies.
func (f *Fake) SetSandboxState(id string, s runtimeapi.PodSandboxState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.sandboxes[id]
	if !ok {
		return fmt.Errorf("sandbox %q not found", id)
	}
	sb.State = s
	return nil
}

// begin records a call and returns the injected error, if any. f.mu must
// be held.
func (f *Fake) begin(method string, req any) error {
	f.calls = append(f.calls, Call{Method: method, Request: req})
	return f.errs[method]
}

// stamp returns a creation time that orders objects by creation even when
// the clock does not move.
func (f *Fake) stamp() int64 {
	f.seq++
	return f.clock.Now().UnixNano() + f.seq
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %q not found", kind, id)
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Version reports a CRI v1 runtime.
func (f *Fake) Version(_ context.Context, in *runtimeapi.VersionRequest, _ ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("Version", in); err != nil {
		return nil, err
	}
	name, version := "fake", "1.0.0"
	if f.runtimeName != "" {
		name, version = f.runtimeName, f.runtimeVersion
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: name, RuntimeVersion: version, RuntimeApiVersion: "v1"}, nil
}

// Status reports RuntimeReady and NetworkReady.
func (f *Fake) Status(_ context.Context, in *runtimeapi.StatusRequest, _ ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("Status", in); err != nil {
		return nil, err
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}}
	if f.features != nil {
		resp.Features, resp.RuntimeHandlers = f.features.Features, f.features.RuntimeHandlers
	}
	return resp, nil
}

// UpdateRuntimeConfig records the call.
func (f *Fake) UpdateRuntimeConfig(_ context.Context, in *runtimeapi.UpdateRuntimeConfigRequest, _ ...grpc.CallOption) (*runtimeapi.UpdateRuntimeConfigResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("UpdateRuntimeConfig", in); err != nil {
		return nil, err
	}
	return &runtimeapi.UpdateRuntimeConfigResponse{}, nil
}

// RunPodSandbox creates a READY sandbox with a made-up IP (and IPv6 one
// with DualStack). A runtime handler other than the default and those
// added with AddRuntimeHandler fails as containerd fails it.
func (f *Fake) RunPodSandbox(_ context.Context, in *runtimeapi.RunPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("RunPodSandbox", in); err != nil {
		return nil, err
	}
	if h := in.RuntimeHandler; h != "" && !f.handlers[h] {
		return nil, status.Errorf(codes.Unknown, "failed to get sandbox runtime: no runtime for %q is configured", h)
	}
	created := f.stamp()
	id := fmt.Sprintf("sb-%d", f.seq)
	sb := &Sandbox{
		ID:             id,
		Config:         proto.Clone(in.Config).(*runtimeapi.PodSandboxConfig),
		State:          runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt:      created,
		IP:             fmt.Sprintf("10.88.0.%d", f.seq%250+2),
		RuntimeHandler: in.RuntimeHandler,
	}
	if f.dualStack {
		sb.AdditionalIPs = []string{fmt.Sprintf("fd00:10:88::%x", f.seq%250+2)}
	}
	f.sandboxes[id] = sb
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// StopPodSandbox makes the sandbox NOTREADY and exits its running
// containers, as containerd does.
func (f *Fake) StopPodSandbox(_ context.Context, in *runtimeapi.StopPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("StopPodSandbox", in); err != nil {
		return nil, err
	}
	sb, ok := f.sandboxes[in.PodSandboxId]
	if !ok {
		return nil, notFound("sandbox", in.PodSandboxId)
	}
	sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	for _, c := range f.containers {
		if c.SandboxID == sb.ID && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.ExitCode, c.FinishedAt = 137, f.clock.Now().UnixNano()
		}
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox removes the sandbox and its containers; removing a
// missing sandbox succeeds, as the CRI requires.
func (f *Fake) RemovePodSandbox(_ context.Context, in *runtimeapi.RemovePodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("RemovePodSandbox", in); err != nil {
		return nil, err
	}
	delete(f.sandboxes, in.PodSandboxId)
	for id, c := range f.containers {
		if c.SandboxID == in.PodSandboxId {
			delete(f.containers, id)
		}
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (f *Fake) sandboxStatus(sb *Sandbox) *runtimeapi.PodSandboxStatus {
	network := &runtimeapi.PodSandboxNetworkStatus{Ip: sb.IP}
	for _, ip := range sb.AdditionalIPs {
		network.AdditionalIps = append(network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
	}
	return &runtimeapi.PodSandboxStatus{
		Id:             sb.ID,
		Metadata:       proto.Clone(sb.Config.GetMetadata()).(*runtimeapi.PodSandboxMetadata),
		State:          sb.State,
		CreatedAt:      sb.CreatedAt,
		Network:        network,
		Labels:         maps.Clone(sb.Config.GetLabels()),
		Annotations:    maps.Clone(sb.Config.GetAnnotations()),
		RuntimeHandler: sb.RuntimeHandler,
	}
}

// PodSandboxStatus returns the sandbox's status or NotFound.
func (f *Fake) PodSandboxStatus(_ context.Context, in *runtimeapi.PodSandboxStatusRequest, _ ...grpc.CallOption) (*runtimeapi.PodSandboxStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("PodSandboxStatus", in); err != nil {
		return nil, err
	}
	sb, ok := f.sandboxes[in.PodSandboxId]
	if !ok {
		return nil, notFound("sandbox", in.PodSandboxId)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: f.sandboxStatus(sb)}, nil
}

// ListPodSandbox lists sandboxes matching the filter's ID, state and
// labels, oldest first.
func (f *Fake) ListPodSandbox(_ context.Context, in *runtimeapi.ListPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListPodSandbox", in); err != nil {
		return nil, err
	}
	flt := in.GetFilter()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, sb := range f.sandboxes {
		switch {
		case flt.GetId() != "" && flt.GetId() != sb.ID,
			flt.GetState() != nil && flt.GetState().State != sb.State,
			!matches(sb.Config.GetLabels(), flt.GetLabelSelector()):
			continue
		}
		st := f.sandboxStatus(sb)
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{
			Id: st.Id, Metadata: st.Metadata, State: st.State, CreatedAt: st.CreatedAt,
			Labels: st.Labels, Annotations: st.Annotations, RuntimeHandler: st.RuntimeHandler,
		})
	}
	sort.Slice(resp.Items, func(i, j int) bool { return resp.Items[i].CreatedAt < resp.Items[j].CreatedAt })
	return resp, nil
}

// CreateContainer creates a CREATED container in an existing sandbox. A
// container joining another's process namespace (pid TARGET) needs that
// one running in the same sandbox, as containerd checks it.
func (f *Fake) CreateContainer(_ context.Context, in *runtimeapi.CreateContainerRequest, _ ...grpc.CallOption) (*runtimeapi.CreateContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("CreateContainer", in); err != nil {
		return nil, err
	}
	if _, ok := f.sandboxes[in.PodSandboxId]; !ok {
		return nil, notFound("sandbox", in.PodSandboxId)
	}
	if ns := in.GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() == runtimeapi.NamespaceMode_TARGET {
		t, ok := f.containers[ns.GetTargetId()]
		switch {
		case !ok:
			return nil, status.Errorf(codes.Unknown, "invalid target container: container %q does not exist", ns.GetTargetId())
		case t.SandboxID != in.PodSandboxId:
			return nil, status.Errorf(codes.Unknown, "invalid target container: container %q (sandbox %s) does not belong to sandbox %s", t.ID, t.SandboxID, in.PodSandboxId)
		case t.State != runtimeapi.ContainerState_CONTAINER_RUNNING:
			return nil, status.Errorf(codes.Unknown, "invalid target container: container %q is not running - in state %s", t.ID, t.State)
		}
	}
	created := f.stamp()
	id := fmt.Sprintf("ctr-%d", f.seq)
	image := in.GetConfig().GetImage().GetImage()
	ref := f.images[image]
	if ref == "" {
		ref = image // created from a reference the fake returned earlier
	}
	var res *runtimeapi.LinuxContainerResources
	if r := in.GetConfig().GetLinux().GetResources(); r != nil {
		res = proto.Clone(r).(*runtimeapi.LinuxContainerResources)
	}
	f.containers[id] = &Container{
		ID:        id,
		SandboxID: in.PodSandboxId,
		Config:    proto.Clone(in.Config).(*runtimeapi.ContainerConfig),
		State:     runtimeapi.ContainerState_CONTAINER_CREATED,
		CreatedAt: created,
		ImageRef:  ref,
		Resources: res,
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// StartContainer moves a CREATED container to RUNNING.
func (f *Fake) StartContainer(_ context.Context, in *runtimeapi.StartContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StartContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("StartContainer", in); err != nil {
		return nil, err
	}
	c, ok := f.containers[in.ContainerId]
	if !ok {
		return nil, notFound("container", in.ContainerId)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is %s, not created", c.ID, c.State)
	}
	if f.startExit != nil {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.ExitCode, c.Reason = *f.startExit, "StartError"
		c.StartedAt, c.FinishedAt = f.clock.Now().UnixNano(), f.clock.Now().UnixNano()
		return nil, status.Errorf(codes.Unknown, "failed to create containerd task: exec: no such file or directory")
	}
	c.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.StartedAt = f.clock.Now().UnixNano()
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer moves a running or created container to EXITED (exit code
// 0: it honoured the stop signal).
func (f *Fake) StopContainer(_ context.Context, in *runtimeapi.StopContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("StopContainer", in); err != nil {
		return nil, err
	}
	c, ok := f.containers[in.ContainerId]
	if !ok {
		return nil, notFound("container", in.ContainerId)
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		c.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.FinishedAt = f.clock.Now().UnixNano()
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer removes a container; removing a missing one succeeds, as
// the CRI requires.
func (f *Fake) RemoveContainer(_ context.Context, in *runtimeapi.RemoveContainerRequest, _ ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("RemoveContainer", in); err != nil {
		return nil, err
	}
	delete(f.containers, in.ContainerId)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (f *Fake) containerStatus(c *Container) *runtimeapi.ContainerStatus {
	var res *runtimeapi.ContainerResources
	if c.Resources != nil {
		res = &runtimeapi.ContainerResources{Linux: proto.Clone(c.Resources).(*runtimeapi.LinuxContainerResources)}
	}
	return &runtimeapi.ContainerStatus{
		Resources:   res,
		Id:          c.ID,
		Metadata:    proto.Clone(c.Config.GetMetadata()).(*runtimeapi.ContainerMetadata),
		State:       c.State,
		CreatedAt:   c.CreatedAt,
		StartedAt:   c.StartedAt,
		FinishedAt:  c.FinishedAt,
		ExitCode:    c.ExitCode,
		Image:       &runtimeapi.ImageSpec{Image: c.Config.GetImage().GetUserSpecifiedImage()},
		ImageRef:    c.ImageRef,
		Reason:      c.Reason,
		Labels:      maps.Clone(c.Config.GetLabels()),
		Annotations: maps.Clone(c.Config.GetAnnotations()),
		LogPath:     c.Config.GetLogPath(),
	}
}

// ListContainers lists containers matching the filter's ID, sandbox,
// state and labels, oldest first.
func (f *Fake) ListContainers(_ context.Context, in *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListContainers", in); err != nil {
		return nil, err
	}
	flt := in.GetFilter()
	resp := &runtimeapi.ListContainersResponse{}
	for _, c := range f.containers {
		switch {
		case flt.GetId() != "" && flt.GetId() != c.ID,
			flt.GetPodSandboxId() != "" && flt.GetPodSandboxId() != c.SandboxID,
			flt.GetState() != nil && flt.GetState().State != c.State,
			!matches(c.Config.GetLabels(), flt.GetLabelSelector()):
			continue
		}
		st := f.containerStatus(c)
		resp.Containers = append(resp.Containers, &runtimeapi.Container{
			Id: c.ID, PodSandboxId: c.SandboxID, Metadata: st.Metadata, Image: st.Image, ImageRef: c.ImageRef,
			State: c.State, CreatedAt: c.CreatedAt, Labels: st.Labels, Annotations: st.Annotations,
		})
	}
	sort.Slice(resp.Containers, func(i, j int) bool { return resp.Containers[i].CreatedAt < resp.Containers[j].CreatedAt })
	return resp, nil
}

// ContainerStatus returns the container's status or NotFound.
func (f *Fake) ContainerStatus(_ context.Context, in *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ContainerStatus", in); err != nil {
		return nil, err
	}
	c, ok := f.containers[in.ContainerId]
	if !ok {
		return nil, notFound("container", in.ContainerId)
	}
	return &runtimeapi.ContainerStatusResponse{Status: f.containerStatus(c)}, nil
}

// SetExec makes ExecSync answer with fn (called without the fake's lock);
// without it ExecSync is Unimplemented.
func (f *Fake) SetExec(fn func(containerID string, cmd []string) (*runtimeapi.ExecSyncResponse, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exec = fn
}

// ExecSync runs the function given to SetExec in a running container.
func (f *Fake) ExecSync(_ context.Context, in *runtimeapi.ExecSyncRequest, _ ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	f.mu.Lock()
	if err := f.begin("ExecSync", in); err != nil {
		f.mu.Unlock()
		return nil, err
	}
	c, ok := f.containers[in.ContainerId]
	running := ok && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	fn := f.exec
	f.mu.Unlock()
	if !ok {
		return nil, notFound("container", in.ContainerId)
	}
	if !running {
		return nil, status.Error(codes.FailedPrecondition, "container is not running")
	}
	if fn == nil {
		return nil, status.Error(codes.Unimplemented, "fake: ExecSync")
	}
	return fn(in.ContainerId, in.Cmd)
}

// GetContainerEvents is not implemented.
func (f *Fake) GetContainerEvents(_ context.Context, in *runtimeapi.GetEventsRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[runtimeapi.ContainerEventResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("GetContainerEvents", in); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented, "fake: GetContainerEvents")
}

// ImageStatus reports an added or pulled image, or no image.
func (f *Fake) ImageStatus(_ context.Context, in *runtimeapi.ImageStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ImageStatus", in); err != nil {
		return nil, err
	}
	name := in.GetImage().GetImage()
	ref, ok := f.images[name]
	if !ok && f.hasRef(name) {
		ref, ok = name, true // asked by ID, as the runtime allows
	}
	if !ok {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: f.image(ref)}, nil
}

// PullImage makes the image present and returns its reference.
func (f *Fake) PullImage(_ context.Context, in *runtimeapi.PullImageRequest, _ ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("PullImage", in); err != nil {
		return nil, err
	}
	name := in.GetImage().GetImage()
	f.images[name] = ImageRef(name)
	return &runtimeapi.PullImageResponse{ImageRef: f.images[name]}, nil
}

// UpdateContainerResources merges the request's non-zero Linux resources
// into a created or running container's, as containerd does; an exited
// container is refused.
func (f *Fake) UpdateContainerResources(_ context.Context, in *runtimeapi.UpdateContainerResourcesRequest, _ ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("UpdateContainerResources", in); err != nil {
		return nil, err
	}
	c, ok := f.containers[in.ContainerId]
	if !ok {
		return nil, notFound("container", in.ContainerId)
	}
	if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil, status.Errorf(codes.FailedPrecondition, "container %q is not running or created", c.ID)
	}
	if c.Resources == nil {
		c.Resources = &runtimeapi.LinuxContainerResources{}
	}
	r, cur := in.GetLinux(), c.Resources
	if r == nil {
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	if r.CpuPeriod != 0 {
		cur.CpuPeriod = r.CpuPeriod
	}
	if r.CpuQuota != 0 {
		cur.CpuQuota = r.CpuQuota
	}
	if r.CpuShares != 0 {
		cur.CpuShares = r.CpuShares
	}
	if r.MemoryLimitInBytes != 0 {
		cur.MemoryLimitInBytes = r.MemoryLimitInBytes
	}
	if r.CpusetCpus != "" {
		cur.CpusetCpus = r.CpusetCpus
	}
	if r.CpusetMems != "" {
		cur.CpusetMems = r.CpusetMems
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// SetMemoryUsage sets the memory usage ListContainerStats reports for a
// container.
func (f *Fake) SetMemoryUsage(id string, bytes uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("container %q not found", id)
	}
	c.MemoryUsage = bytes
	return nil
}

// SetSandboxMemoryUsage sets the memory usage PodSandboxStats reports
// for a sandbox (its pod cgroup's).
func (f *Fake) SetSandboxMemoryUsage(id string, bytes uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sandboxMemory[id] = bytes
}

// ListContainerStats reports the memory usage of the containers matching
// the filter's ID, sandbox and labels.
func (f *Fake) ListContainerStats(_ context.Context, in *runtimeapi.ListContainerStatsRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListContainerStats", in); err != nil {
		return nil, err
	}
	flt := in.GetFilter()
	resp := &runtimeapi.ListContainerStatsResponse{}
	for _, c := range f.containers {
		switch {
		case flt.GetId() != "" && flt.GetId() != c.ID,
			flt.GetPodSandboxId() != "" && flt.GetPodSandboxId() != c.SandboxID,
			!matches(c.Config.GetLabels(), flt.GetLabelSelector()):
			continue
		}
		resp.Stats = append(resp.Stats, &runtimeapi.ContainerStats{
			Attributes: &runtimeapi.ContainerAttributes{Id: c.ID, Metadata: proto.Clone(c.Config.GetMetadata()).(*runtimeapi.ContainerMetadata),
				Labels: maps.Clone(c.Config.GetLabels()), Annotations: maps.Clone(c.Config.GetAnnotations())},
			Memory: &runtimeapi.MemoryUsage{Timestamp: f.clock.Now().UnixNano(), UsageBytes: &runtimeapi.UInt64Value{Value: c.MemoryUsage}},
		})
	}
	sort.Slice(resp.Stats, func(i, j int) bool { return resp.Stats[i].Attributes.Id < resp.Stats[j].Attributes.Id })
	return resp, nil
}

// PodSandboxStats reports a sandbox's memory usage.
func (f *Fake) PodSandboxStats(_ context.Context, in *runtimeapi.PodSandboxStatsRequest, _ ...grpc.CallOption) (*runtimeapi.PodSandboxStatsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("PodSandboxStats", in); err != nil {
		return nil, err
	}
	sb, ok := f.sandboxes[in.PodSandboxId]
	if !ok {
		return nil, notFound("sandbox", in.PodSandboxId)
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.ID, Metadata: proto.Clone(sb.Config.GetMetadata()).(*runtimeapi.PodSandboxMetadata)},
		Linux: &runtimeapi.LinuxPodSandboxStats{Memory: &runtimeapi.MemoryUsage{
			Timestamp: f.clock.Now().UnixNano(), UsageBytes: &runtimeapi.UInt64Value{Value: f.sandboxMemory[sb.ID]}}},
	}}, nil
}
