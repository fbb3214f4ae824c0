package cm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// configRuntime answers RuntimeConfig only.
type configRuntime struct {
	runtimeapi.RuntimeServiceClient
	resp *runtimeapi.RuntimeConfigResponse
	err  error
}

func (r configRuntime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest, ...grpc.CallOption) (*runtimeapi.RuntimeConfigResponse, error) {
	return r.resp, r.err
}

func TestRuntimeDriver(t *testing.T) {
	linux := func(d runtimeapi.CgroupDriver) *runtimeapi.RuntimeConfigResponse {
		return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: d}}
	}
	tests := []struct {
		name    string
		rt      configRuntime
		want    string
		wantErr bool
	}{
		{name: "systemd", rt: configRuntime{resp: linux(runtimeapi.CgroupDriver_SYSTEMD)}, want: DriverSystemd},
		{name: "cgroupfs", rt: configRuntime{resp: linux(runtimeapi.CgroupDriver_CGROUPFS)}, want: DriverCgroupfs},
		{name: "not said", rt: configRuntime{resp: &runtimeapi.RuntimeConfigResponse{}}},
		{name: "unimplemented (containerd 1.x)", rt: configRuntime{err: status.Error(codes.Unimplemented, "no")}},
		{name: "cannot ask", rt: configRuntime{err: errors.New("connection refused")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RuntimeDriver(context.Background(), tt.rt, time.Second)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
