package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cni"
	"github.com/nodeagent/nodeagent/internal/cri"
)

// ensureCNIConfig writes the node's conflist for its pod CIDR(s)
// (comma-separated, one per family) unless the CNI config dir holds an
// operator's. A bad CIDR is an error; a conflist the plugins refuse is
// logged with their error and the previous config stays.
func ensureCNIConfig(ctx context.Context, o *options, podCIDRs string, log *zap.Logger) error {
	var cidrs []string
	for _, c := range strings.Split(podCIDRs, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cidrs = append(cidrs, c)
		}
	}
	w, err := cni.Ensure(ctx, o.cniConfDir, o.cniBinDir, cni.NetworkConfig{
		Name: "nodeagent", Bridge: "nabr0", PodCIDRs: cidrs, DataDir: filepath.Join(o.rootDir, "cni", "networks"),
	})
	switch {
	case errors.Is(err, cni.ErrRefused):
		log.Error("CNI config for the pod CIDR not written", zap.Strings("podCIDRs", cidrs), zap.Error(err))
		return nil
	case err != nil:
		return fmt.Errorf("CNI config for --pod-cidr %q: %w", podCIDRs, err)
	case w.Operator:
		log.Info("CNI config dir holds the operator's config; left alone", zap.String("file", w.File))
	case w.Wrote:
		log.Info("wrote the CNI config for the pod CIDR", zap.String("file", w.File), zap.Strings("podCIDRs", cidrs))
	}
	return nil
}

// newNetworkMonitor watches the CNI config and runs CNI GC over the
// runtime's sandboxes (every client's, any state).
func newNetworkMonitor(o *options, conn *cri.Conn, clk clock.WithTicker, log *zap.Logger) (*cni.Monitor, error) {
	return cni.NewMonitor(cni.MonitorConfig{
		ConfDir: o.cniConfDir, BinDir: o.cniBinDir,
		Sandboxes: criSandboxes{conn: conn, timeout: o.runtimeRequestTimeout},
		GCPeriod:  o.cniGCPeriod,
		Clock:     clk, Logger: log,
	})
}

// criSandboxes answers the CNI monitor from CRI: every sandbox of the
// runtime, in any state, not only this agent's.
type criSandboxes struct {
	conn    cri.Client
	timeout time.Duration
}

func (s criSandboxes) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

func (s criSandboxes) Known(ctx context.Context) ([]string, error) {
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	r, err := s.conn.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(r.Items))
	for _, sb := range r.Items {
		ids = append(ids, sb.Id)
	}
	return ids, nil
}

func (s criSandboxes) IPs(ctx context.Context, id string) ([]string, error) {
	cctx, cancel := s.ctx(ctx)
	defer cancel()
	r, err := s.conn.PodSandboxStatus(cctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
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
