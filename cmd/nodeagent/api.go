package main

import (
	"context"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/kubeapi"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// agentVersion is reported as the Node's kubeletVersion: the Kubernetes
// API nodeagent is built against, marked as nodeagent's.
const agentVersion = "v1.37.2-nodeagent"

// certDir is --cert-dir, by default <root-dir>/pki.
func (o *options) certDirOrDefault() string {
	if o.certDir != "" {
		return o.certDir
	}
	return filepath.Join(o.rootDir, "pki")
}

// connectAPI starts API mode (kubeapi.Start) from the options: nil
// without --kubeconfig (standalone mode).
func connectAPI(ctx context.Context, o *options, nodeName string, clk clock.WithTicker, log *zap.Logger) (*kubeapi.Mode, error) {
	if o.kubeconfig == "" {
		return nil, nil
	}
	var static []string
	if o.StaticPodPath != "" {
		static = append(static, pod.SourceFile)
	}
	if o.StaticPodURL != "" {
		static = append(static, pod.SourceHTTP)
	}
	return kubeapi.Start(ctx, kubeapi.ModeConfig{
		Client: kubeapi.ClientConfig{
			Kubeconfig: o.kubeconfig, BootstrapKubeconfig: o.bootstrapKubeconfig, CertDir: o.certDirOrDefault(), NodeName: nodeName,
			QPS: o.kubeAPIQPS, Burst: int(o.KubeAPIBurst), RotateCertificates: o.RotateCertificates,
			HeartbeatTimeout: time.Duration(o.NodeLeaseDurationSeconds) * time.Second, Logger: log,
		},
		RootDir: o.rootDir, StaticSources: static, Clock: clk, Logger: log,
	})
}
