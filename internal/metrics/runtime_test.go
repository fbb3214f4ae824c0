package metrics

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

// opStats are one operation type's samples.
type opStats struct {
	Total, Errors, Observed uint64
	Seconds                 float64
}

// ops reads every operation type's samples from m's registry.
func ops(t *testing.T, m *Metrics) map[string]opStats {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]opStats{}
	for _, mf := range families {
		for _, mt := range mf.GetMetric() {
			op := ""
			for _, l := range mt.GetLabel() {
				if l.GetName() == "operation_type" {
					op = l.GetValue()
				}
			}
			s := out[op]
			switch mf.GetName() {
			case "kubelet_runtime_operations_total":
				s.Total = uint64(mt.GetCounter().GetValue())
			case "kubelet_runtime_operations_errors_total":
				s.Errors = uint64(mt.GetCounter().GetValue())
			case "kubelet_runtime_operations_duration_seconds":
				s.Observed, s.Seconds = mt.GetHistogram().GetSampleCount(), mt.GetHistogram().GetSampleSum()
			default:
				continue
			}
			out[op] = s
		}
	}
	return out
}

func TestUnaryClientInterceptor(t *testing.T) {
	clk := testclock.NewFakeClock(t0)
	m := New(clk)
	var invoked []string
	// Each call takes 2s; ContainerStatus fails.
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		invoked = append(invoked, method)
		clk.Step(2 * time.Second)
		if method == "/runtime.v1.RuntimeService/ContainerStatus" {
			return status.Error(codes.NotFound, "no such container")
		}
		return nil
	}
	calls := []string{
		"/runtime.v1.RuntimeService/RunPodSandbox",
		"/runtime.v1.RuntimeService/ContainerStatus",
		"/runtime.v1.RuntimeService/ContainerStatus",
		"/runtime.v1.ImageService/PullImage",
	}
	for _, method := range calls {
		err := m.UnaryClientInterceptor(context.Background(), method, nil, nil, nil, invoker)
		if wantErr := method == calls[1]; (err != nil) != wantErr || (err != nil && status.Code(err) != codes.NotFound) {
			t.Errorf("%s: error = %v, want the invoker's", method, err)
		}
	}
	if diff := cmp.Diff(calls, invoked); diff != "" {
		t.Errorf("invoked (-want +got):\n%s", diff)
	}
	want := map[string]opStats{
		"run_podsandbox":   {Total: 1, Observed: 1, Seconds: 2},
		"container_status": {Total: 2, Errors: 2, Observed: 2, Seconds: 4},
		"pull_image":       {Total: 1, Observed: 1, Seconds: 2},
	}
	if diff := cmp.Diff(want, ops(t, m)); diff != "" {
		t.Errorf("runtime operations (-want +got):\n%s", diff)
	}
}

// fakeStream's receives return msgs' errors in turn (nil: a message).
type fakeStream struct {
	grpc.ClientStream
	errs []error
}

func (s *fakeStream) RecvMsg(any) error {
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

// A streaming call is measured over its life, once: an error ends it as
// an error, io.EOF or the caller's cancellation as a success; failing to
// open it is an error.
func TestStreamClientInterceptor(t *testing.T) {
	const method = "/runtime.v1.RuntimeService/GetContainerEvents"
	tests := []struct {
		name    string
		openErr error
		recv    []error
		cancel  bool // the caller cancels before the last receive
		want    opStats
	}{
		{name: "ends with EOF", recv: []error{nil, nil, io.EOF}, want: opStats{Total: 1, Observed: 1, Seconds: 4}},
		{name: "broken", recv: []error{nil, status.Error(codes.Unavailable, "gone")}, want: opStats{Total: 1, Errors: 1, Observed: 1, Seconds: 3}},
		{name: "cancelled by the caller", recv: []error{nil, status.Error(codes.Canceled, "context canceled")}, cancel: true,
			want: opStats{Total: 1, Observed: 1, Seconds: 3}},
		{name: "not opened", openErr: status.Error(codes.Unimplemented, "no events"), want: opStats{Total: 1, Errors: 1, Observed: 1, Seconds: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(t0)
			m := New(clk)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// Opening and each receive take a second.
			streamer := func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				clk.Step(time.Second)
				if tt.openErr != nil {
					return nil, tt.openErr
				}
				return &fakeStream{errs: tt.recv}, nil
			}
			cs, err := m.StreamClientInterceptor(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, method, streamer)
			if !errors.Is(err, tt.openErr) {
				t.Fatalf("open error = %v, want %v", err, tt.openErr)
			}
			for i := range tt.recv {
				clk.Step(time.Second)
				if tt.cancel && i == len(tt.recv)-1 {
					cancel()
				}
				cs.RecvMsg(nil) //nolint:errcheck
			}
			if diff := cmp.Diff(map[string]opStats{"get_container_events": tt.want}, ops(t, m)); diff != "" {
				t.Errorf("runtime operations (-want +got):\n%s", diff)
			}
		})
	}
}

// Every CRI method has the kubelet's operation type
// (pkg/kubelet/kuberuntime/instrumented_services.go; the streaming list
// calls the kubelet does not wrap yet follow the same rule).
func TestOperation(t *testing.T) {
	want := map[string]string{
		"Version": "version", "Status": "status", "RunPodSandbox": "run_podsandbox", "StopPodSandbox": "stop_podsandbox",
		"RemovePodSandbox": "remove_podsandbox", "PodSandboxStatus": "podsandbox_status", "ListPodSandbox": "list_podsandbox",
		"CreateContainer": "create_container", "StartContainer": "start_container", "StopContainer": "stop_container",
		"RemoveContainer": "remove_container", "ListContainers": "list_containers", "ContainerStatus": "container_status",
		"UpdateContainerResources": "update_container", "ReopenContainerLog": "reopen_container_log", "ExecSync": "exec_sync",
		"Exec": "exec", "Attach": "attach", "PortForward": "port_forward", "ContainerStats": "container_stats",
		"ListContainerStats": "list_container_stats", "PodSandboxStats": "podsandbox_stats", "ListPodSandboxStats": "list_podsandbox_stats",
		"UpdateRuntimeConfig": "update_runtime_config", "CheckpointContainer": "checkpoint_container",
		"CheckpointPod": "checkpoint_pod", "RestorePod": "restore_pod",
		"GetContainerEvents": "get_container_events", "ListMetricDescriptors": "list_metric_descriptors",
		"ListPodSandboxMetrics": "list_podsandbox_metrics", "RuntimeConfig": "runtime_config",
		"UpdatePodSandboxResources": "update_podsandbox_resources",
		"StreamPodSandboxes":        "stream_podsandboxes", "StreamContainers": "stream_containers",
		"StreamContainerStats": "stream_container_stats", "StreamPodSandboxStats": "stream_podsandbox_stats",
		"StreamPodSandboxMetrics": "stream_podsandbox_metrics",
		"ListImages":              "list_images", "ImageStatus": "image_status", "PullImage": "pull_image", "RemoveImage": "remove_image",
		"ImageFsInfo": "image_fs_info", "StreamImages": "stream_images",
	}
	got := map[string]string{}
	for _, sd := range []grpc.ServiceDesc{runtimeapi.RuntimeService_ServiceDesc, runtimeapi.ImageService_ServiceDesc} {
		for _, md := range sd.Methods {
			got[md.MethodName] = Operation("/" + sd.ServiceName + "/" + md.MethodName)
		}
		for _, st := range sd.Streams {
			got[st.StreamName] = Operation("/" + sd.ServiceName + "/" + st.StreamName)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operation types (-want +got):\n%s", diff)
	}
}
