package cri

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Errors callers tell apart with errors.Is.
var (
	ErrNotFound    = errors.New("not found")
	ErrUnavailable = errors.New("runtime unavailable")
)

// Client is the subset of the CRI runtime and image services the agent
// uses. *Conn satisfies it; tests use critest.Fake.
type Client interface {
	Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
	Status(ctx context.Context, in *runtimeapi.StatusRequest, opts ...grpc.CallOption) (*runtimeapi.StatusResponse, error)
	UpdateRuntimeConfig(ctx context.Context, in *runtimeapi.UpdateRuntimeConfigRequest, opts ...grpc.CallOption) (*runtimeapi.UpdateRuntimeConfigResponse, error)
	RunPodSandbox(ctx context.Context, in *runtimeapi.RunPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error)
	StopPodSandbox(ctx context.Context, in *runtimeapi.StopPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error)
	RemovePodSandbox(ctx context.Context, in *runtimeapi.RemovePodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error)
	PodSandboxStatus(ctx context.Context, in *runtimeapi.PodSandboxStatusRequest, opts ...grpc.CallOption) (*runtimeapi.PodSandboxStatusResponse, error)
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	CreateContainer(ctx context.Context, in *runtimeapi.CreateContainerRequest, opts ...grpc.CallOption) (*runtimeapi.CreateContainerResponse, error)
	StartContainer(ctx context.Context, in *runtimeapi.StartContainerRequest, opts ...grpc.CallOption) (*runtimeapi.StartContainerResponse, error)
	StopContainer(ctx context.Context, in *runtimeapi.StopContainerRequest, opts ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error)
	RemoveContainer(ctx context.Context, in *runtimeapi.RemoveContainerRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error)
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	UpdateContainerResources(ctx context.Context, in *runtimeapi.UpdateContainerResourcesRequest, opts ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error)
	ListContainerStats(ctx context.Context, in *runtimeapi.ListContainerStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error)
	PodSandboxStats(ctx context.Context, in *runtimeapi.PodSandboxStatsRequest, opts ...grpc.CallOption) (*runtimeapi.PodSandboxStatsResponse, error)
	ExecSync(ctx context.Context, in *runtimeapi.ExecSyncRequest, opts ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error)
	GetContainerEvents(ctx context.Context, in *runtimeapi.GetEventsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[runtimeapi.ContainerEventResponse], error)

	ImageStatus(ctx context.Context, in *runtimeapi.ImageStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error)
	PullImage(ctx context.Context, in *runtimeapi.PullImageRequest, opts ...grpc.CallOption) (*runtimeapi.PullImageResponse, error)
}

// reconnectMaxDelay bounds the wait between two attempts to reach a
// runtime that went away.
const reconnectMaxDelay = 2 * time.Second

// Conn is a connection to a CRI runtime; it implements Client.
type Conn struct {
	runtimeapi.RuntimeServiceClient
	runtimeapi.ImageServiceClient
	cc *grpc.ClientConn
}

// Dial connects to endpoint ("unix:///run/containerd/containerd.sock" or
// a bare socket path), with opts after its own (the agent's metrics
// interceptors). It does not talk to the runtime yet; see Check.
func Dial(endpoint string, opts ...grpc.DialOption) (*Conn, error) {
	target := endpoint
	if strings.HasPrefix(target, "/") {
		target = "unix://" + target
	}
	if !strings.HasPrefix(target, "unix://") {
		return nil, fmt.Errorf("container runtime endpoint %q: only unix sockets are supported", endpoint)
	}
	cc, err := grpc.NewClient(target, append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		// gRPC's default reconnect backoff grows to 120 s: a runtime that
		// comes back after an outage would go unnoticed for minutes. A
		// local socket is cheap to retry; cap the wait at 2 s.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{
				BaseDelay:  100 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   reconnectMaxDelay,
			},
			MinConnectTimeout: 2 * time.Second,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16 << 20))}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", endpoint, err)
	}
	return &Conn{
		RuntimeServiceClient: runtimeapi.NewRuntimeServiceClient(cc),
		ImageServiceClient:   runtimeapi.NewImageServiceClient(cc),
		cc:                   cc,
	}, nil
}

// Close closes the connection.
func (c *Conn) Close() error { return c.cc.Close() }

// RuntimeInfo is what Check learnt about the runtime.
type RuntimeInfo struct {
	Name, Version, APIVersion string
}

// Check asks the runtime for its version (CRI v1 is required) and its
// RuntimeReady and NetworkReady conditions.
func Check(ctx context.Context, c Client, timeout time.Duration) (RuntimeInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := c.Version(cctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return RuntimeInfo{}, fmt.Errorf("get runtime version: %w", translate(err))
	}
	info := RuntimeInfo{Name: v.RuntimeName, Version: v.RuntimeVersion, APIVersion: v.RuntimeApiVersion}
	if v.RuntimeApiVersion != "v1" {
		return info, fmt.Errorf("runtime %s %s speaks CRI %q; CRI v1 is required", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
	}
	return info, Ready(ctx, c, timeout)
}

// Ready returns nil when the runtime reports RuntimeReady and NetworkReady,
// or an error naming the condition that is not true and why.
func Ready(ctx context.Context, c Client, timeout time.Duration) error {
	rt, network := Health(ctx, c, timeout)
	if rt != nil && network != nil && rt.Error() == network.Error() {
		return rt
	}
	return errors.Join(rt, network)
}

// Health reads the runtime's conditions apart: runtimeErr is nil when
// RuntimeReady is true, networkErr when NetworkReady is true (the kubelet
// stops syncing only for the first; the second holds back pods that are
// not on the host network). When the status call fails both are its error.
func Health(ctx context.Context, c Client, timeout time.Duration) (runtimeErr, networkErr error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := c.Status(cctx, &runtimeapi.StatusRequest{})
	if err == nil && st.Status == nil {
		err = errors.New("no conditions reported")
	}
	if err != nil {
		err = fmt.Errorf("get runtime status: %w", translate(err))
		return err, err
	}
	cond := func(want string) error {
		for _, c := range st.Status.Conditions {
			if c.Type == want {
				if c.Status {
					return nil
				}
				return fmt.Errorf("%s=false (%s: %s)", want, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("%s not reported", want)
	}
	return cond(runtimeapi.RuntimeReady), cond(runtimeapi.NetworkReady)
}

// translate maps gRPC codes to the package's sentinel errors, keeping the
// message.
func translate(err error) error {
	if err == nil {
		return nil
	}
	s, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch s.Code() {
	case codes.NotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, s.Message())
	case codes.Unavailable:
		return fmt.Errorf("%w: %s", ErrUnavailable, s.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("%w: deadline exceeded: %s", ErrUnavailable, s.Message())
	}
	return fmt.Errorf("%s: %s", s.Code(), s.Message())
}
