package kubeapi

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/podsource"
)

// ModeConfig configures Start.
type ModeConfig struct {
	Client ClientConfig
	// RootDir holds the checkpoints (<RootDir>/checkpoints): the
	// services pods read and the API server's pods.
	RootDir string
	// StaticSources are the static pod sources (file, http) configured:
	// mirror pods are kept for their pods.
	StaticSources []string
	Clock         clock.WithTicker
	Logger        *zap.Logger
}

// Mode is API mode's parts the rest of the agent is wired with: the
// client, the pods bound to the node, the objects pods read, the
// RuntimeClasses, the status writer. A nil *Mode is standalone mode:
// its methods then do nothing and give nil.
type Mode struct {
	Client         *Client
	Pods           *NodePods
	Objects        *Objects
	RuntimeClasses *RuntimeClasses
	Status         *StatusWriter

	cfg     ModeConfig
	nodeUID atomic.Pointer[types.UID]
}

// Start connects to the API server (bootstrapping the node's client
// certificate when needed) and builds the API-mode parts; nothing runs
// until Run. Stop releases the client.
func Start(ctx context.Context, cfg ModeConfig) (*Mode, error) {
	if cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("api mode: Clock and Logger are required")
	}
	if cfg.Client.Clock == nil {
		cfg.Client.Clock = cfg.Clock
	}
	c, err := Connect(ctx, cfg.Client)
	if err != nil {
		return nil, err
	}
	node := cfg.Client.NodeName
	m := &Mode{Client: c, Pods: NewNodePods(c.Clientset, node), cfg: cfg,
		Objects:        NewObjects(c.Clientset, cfg.Clock, filepath.Join(cfg.RootDir, "checkpoints", "services.json"), cfg.Logger),
		RuntimeClasses: NewRuntimeClasses(c.Clientset)}
	m.Status, err = NewStatusWriter(StatusConfig{
		Client: c.Clientset, Pods: m.Pods, NodeName: node, NodeUID: m.NodeUID,
		StaticSources: cfg.StaticSources, Clock: cfg.Clock, Logger: cfg.Logger,
	})
	if err != nil {
		c.Stop()
		return nil, err
	}
	cfg.Logger.Info("API mode", zap.String("server", c.Config.Host), zap.String("node", node))
	return m, nil
}

// Stop releases the client (nil-safe).
func (m *Mode) Stop() {
	if m != nil {
		m.Client.Stop()
	}
}

// NodeUID is the registered Node's UID, "" until registered: mirror
// pods are owned by the Node.
func (m *Mode) NodeUID() types.UID {
	if p := m.nodeUID.Load(); p != nil {
		return *p
	}
	return ""
}

// NodeRegistered hears that the Node was (re-)registered with uid, or
// deleted ("": mirror pods wait for its registration again) — the node
// manager's OnRegistered.
func (m *Mode) NodeRegistered(uid types.UID) {
	m.nodeUID.Store(&uid)
	if uid != "" {
		m.Status.NodeRegistered()
	}
}

// StaticPods tells the status writer a static source's pods (nil-safe).
func (m *Mode) StaticPods(source string, pods []*v1.Pod) {
	if m != nil {
		m.Status.StaticPods(source, pods)
	}
}

// PodObjects is what pods read from the API server (nil without one).
func (m *Mode) PodObjects() cri.Objects {
	if m == nil {
		return nil
	}
	return m.Objects
}

// Classes gives pods' runtime handlers (nil without an API server: cri
// then refuses pods naming a RuntimeClass).
func (m *Mode) Classes() cri.RuntimeClasses {
	if m == nil {
		return nil
	}
	return m.RuntimeClasses
}

// Run starts the informers and runs, until ctx ends, the API server's
// pod source (into sink), the status writer, and the resync of a
// namespace whose watched ConfigMap or Secret changed.
func (m *Mode) Run(ctx context.Context, sink func([]*v1.Pod), resyncNamespace func(ns string)) error {
	src, err := podsource.NewAPI(podsource.APIConfig{
		Informer: m.Pods.Informer, Lister: m.Pods.Lister, Synced: m.Pods.Synced, Checkpoint: filepath.Join(m.cfg.RootDir, "checkpoints", "api-pods.json"), Clock: m.cfg.Clock,
		Logger: m.cfg.Logger, Sink: sink,
	})
	if err != nil {
		return err
	}
	// The informers stop with the group: their Shutdown below cannot wait
	// for a context that outlives Run.
	g, gctx := errgroup.WithContext(ctx)
	m.Pods.Start(gctx)
	m.Objects.Start(gctx)
	m.RuntimeClasses.Start(gctx)
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				return nil
			case ns := <-m.Objects.Changes():
				resyncNamespace(ns)
			}
		}
	})
	g.Go(func() error { return src.Run(gctx) })
	g.Go(func() error { m.Status.Run(gctx); return nil })
	g.Go(func() error { m.Objects.Run(gctx); return nil })
	err = g.Wait()
	// Every informer's goroutines are over before Run returns (ctx
	// ended: their stop channel is closed).
	m.Pods.factory.Shutdown()
	m.RuntimeClasses.factory.Shutdown()
	return err
}
