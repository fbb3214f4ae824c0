package cm

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeDriver is the cgroup driver the runtime reports over CRI
// (RuntimeConfig): DriverSystemd or DriverCgroupfs, "" when it does not
// say (containerd 1.x: Unimplemented, then err is nil too) or cannot be
// asked (err says why).
func RuntimeDriver(ctx context.Context, c runtimeapi.RuntimeServiceClient, timeout time.Duration) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.RuntimeConfig(cctx, &runtimeapi.RuntimeConfigRequest{})
	if status.Code(err) == codes.Unimplemented {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if resp.GetLinux() == nil {
		return "", nil
	}
	if resp.GetLinux().GetCgroupDriver() == runtimeapi.CgroupDriver_SYSTEMD {
		return DriverSystemd, nil
	}
	return DriverCgroupfs, nil
}
