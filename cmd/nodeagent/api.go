package main

import (
	"context"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/kubeapi"
)

// agentVersion is reported as the Node's kubeletVersion: the Kubernetes
// API nodeagent is built against, marked as nodeagent's.
const agentVersion = "v1.37.2-nodeagent"

// apiMode holds the API-mode parts that the rest of run wires in.
type apiMode struct {
	client  *kubeapi.Client
	pods    *kubeapi.NodePods
	objs    *kubeapi.Objects
	classes *kubeapi.RuntimeClasses
	status  *kubeapi.StatusWriter
	nodeUID func() types.UID
}

// staticPods tells the status writer a static source's pods (nil-safe).
func (a *apiMode) staticPods(source string, pods []*v1.Pod) {
	if a != nil {
		a.status.StaticPods(source, pods)
	}
}

// objects is what pods read from the API server (nil without one).
func (a *apiMode) objects() cri.Objects {
	if a == nil {
		return nil
	}
	return a.objs
}

// runtimeClasses gives pods' runtime handlers (nil without an API
// server: cri then refuses pods naming a RuntimeClass).
func (a *apiMode) runtimeClasses() cri.RuntimeClasses {
	if a == nil {
		return nil
	}
	return a.classes
}

// connectAPI connects to the API server (bootstrapping the node's client
// certificate when needed) and builds the API-mode parts.
func connectAPI(ctx context.Context, o *options, nodeName string, staticSources []string, log *zap.Logger) (*apiMode, error) {
	certDir := o.certDir
	if certDir == "" {
		certDir = filepath.Join(o.rootDir, "pki")
	}
	c, err := kubeapi.Connect(ctx, kubeapi.ClientConfig{
		Kubeconfig: o.kubeconfig, BootstrapKubeconfig: o.bootstrapKubeconfig, CertDir: certDir, NodeName: nodeName,
		QPS: float32(o.kubeAPIQPS), Burst: int(o.KubeAPIBurst), RotateCertificates: o.RotateCertificates,
		HeartbeatTimeout: time.Duration(o.NodeLeaseDurationSeconds) * time.Second, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	a := &apiMode{client: c, pods: kubeapi.NewNodePods(c.Clientset, nodeName), objs: kubeapi.NewObjects(c.Clientset, clock.RealClock{}, filepath.Join(o.rootDir, "checkpoints", "services.json"), log),
		classes: kubeapi.NewRuntimeClasses(c.Clientset)}
	a.nodeUID = func() types.UID { return "" }
	a.status, err = kubeapi.NewStatusWriter(kubeapi.StatusConfig{
		Client: c.Clientset, Pods: a.pods, NodeName: nodeName,
		NodeUID:       func() types.UID { return a.nodeUID() },
		StaticSources: staticSources,
		Logger:        log,
	})
	if err != nil {
		c.Stop()
		return nil, err
	}
	log.Info("API mode", zap.String("server", c.Config.Host), zap.String("node", nodeName))
	return a, nil
}
