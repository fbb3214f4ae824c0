package cri

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandboxes lists every sandbox of the runtime, in any state, not only
// this agent's, and their IPs: what CNI GC (cni.Monitor) needs to know
// which attachments are still in use.
type Sandboxes struct {
	Client  Client
	Timeout time.Duration // bounds each call
}

// Known is the IDs of all the runtime's sandboxes.
func (s Sandboxes) Known(ctx context.Context) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	r, err := s.Client.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(r.Items))
	for _, sb := range r.Items {
		ids = append(ids, sb.Id)
	}
	return ids, nil
}

// IPs is a sandbox's IPs; none when it is gone.
func (s Sandboxes) IPs(ctx context.Context, id string) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	r, err := s.Client.PodSandboxStatus(cctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			return nil, nil // removed since the list: it holds no IP any more
		}
		return nil, err
	}
	n := r.GetStatus().GetNetwork()
	if n == nil || n.Ip == "" {
		return nil, nil
	}
	ips := []string{n.Ip}
	for _, ip := range n.AdditionalIps {
		ips = append(ips, ip.Ip)
	}
	return ips, nil
}
