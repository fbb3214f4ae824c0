package main

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/metrics"
	"github.com/nodeagent/nodeagent/internal/node"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/watchdog"
)

// serve runs the wired agent until ctx ends: one relist first, then the
// endpoints, the sources, the PLEG, API mode, the loop and the work
// beside it.
func (a *agent) serve(ctx context.Context) error {
	// One relist before the loop starts: adopted pods and the old versions
	// of manifests edited while the agent was down are known when the
	// first pods arrive.
	if err := a.plegG.Relist(ctx); err != nil {
		a.log.Warn("first relist failed; the PLEG retries", zap.Error(err))
	}
	g, gctx := errgroup.WithContext(ctx)
	if err := a.serveEndpoints(gctx, g); err != nil {
		return err
	}
	for _, run := range a.runSources {
		g.Go(func() error { return run(gctx) })
	}
	g.Go(func() error { a.plegG.Run(gctx, time.Second); return nil })
	if a.o.eventedPLEG {
		g.Go(func() error { a.plegG.RunEvented(gctx, a.rt, 10*time.Second); return nil })
	}
	if a.api != nil {
		if err := a.serveAPI(gctx, g); err != nil {
			return err
		}
	} else {
		a.log.Info("node server off: without an API server its callers cannot be authenticated and authorized")
	}
	a.runBesideLoop(gctx, g)
	// systemd (Type=notify): ready once the loop runs; a no-op without
	// NOTIFY_SOCKET.
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		a.log.Warn("notify systemd", zap.Error(err))
	}
	g.Go(func() error {
		<-gctx.Done()
		daemon.SdNotify(false, daemon.SdNotifyStopping) //nolint:errcheck
		return nil
	})
	a.feedWatchdog(gctx, g)
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// feedWatchdog feeds systemd's watchdog (WatchdogSec= in the unit) while
// the loop iterates and the PLEG relists; nothing without one.
func (a *agent) feedWatchdog(ctx context.Context, g *errgroup.Group) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		a.log.Warn("systemd's watchdog settings", zap.Error(err))
		return
	}
	if interval <= 0 {
		return
	}
	a.log.Info("feeding systemd's watchdog", zap.Duration("interval", interval))
	g.Go(func() error {
		watchdog.Run(ctx, a.clk, interval, func() error { return errors.Join(a.loopAlive.Healthy(), a.plegG.Healthy()) },
			func(s string) (bool, error) { return daemon.SdNotify(false, s) }, a.log.Named("watchdog"))
		return nil
	})
}

// serveEndpoints serves the read-only port, if asked, and /healthz and
// /metrics. As the kubelet: a taken port costs the endpoint, not the
// pods.
func (a *agent) serveEndpoints(ctx context.Context, g *errgroup.Group) error {
	o := a.o
	if o.ReadOnlyPort > 0 {
		if err := readOnlyPort(ctx, g, o, a.readers, a.log); err != nil {
			return err
		}
	}
	if *o.HealthzPort <= 0 {
		return nil
	}
	addr := net.JoinHostPort(o.HealthzBindAddress, strconv.Itoa(int(*o.HealthzPort)))
	ln, err := metrics.Listen(addr)
	if err != nil {
		a.log.Error("no /healthz and /metrics endpoint; pods are run regardless (free the port or set --healthz-port)", zap.Error(err))
		return nil
	}
	g.Go(func() error { return metrics.Serve(ctx, ln, a.mets.Handler(a.health)) })
	a.log.Info("serving /healthz and /metrics", zap.String("address", addr))
	return nil
}

// runBesideLoop runs the loop and the work beside it: CRI calls the
// loop never makes itself.
func (a *agent) runBesideLoop(ctx context.Context, g *errgroup.Group) {
	// The status and events files are written until the loop and its
	// workers have ended, so the files show their last word.
	filesCtx, filesDone := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error { return a.statuses.Run(filesCtx) })
	g.Go(func() error { defer filesDone(); a.loop.Run(ctx); return nil })
	g.Go(func() error { a.logRotation.Run(ctx); return nil })
	// The CPU manager's reconcile: it pushes cpusets with CRI calls.
	g.Go(func() error { a.cpuMgr.Run(ctx, a.plegG); return nil })
	g.Go(func() error { a.runDevices(ctx); return nil })
	// Image GC, not in the loop's housekeeping: removals are CRI calls.
	g.Go(func() error { a.imageGC.Run(ctx); return nil })
	// Eviction: it reads the host and the runtime's stats, and hands its
	// decisions to the loop.
	g.Go(func() error { a.evict.Run(ctx, a.clk, a.o.evictionMonitoringPeriod); return nil })
	// CNI config re-check and GC: GC lists sandboxes and runs plugins.
	g.Go(func() error { a.podNet.Run(ctx); return nil })
	// The runtime's conditions: every 5s, every second while not ready.
	g.Go(func() error { a.runtimeHealth.Run(ctx); return nil })
	// Graceful node shutdown: logind's lock and signal (nothing to do
	// without a shutdownGracePeriod).
	g.Go(func() error { a.shutdown.Run(ctx); return nil })
}

// serveAPI runs API mode: the Node (registration, status, Lease), the
// API server's pods into the mux, the status writer, and the node
// server.
func (a *agent) serveAPI(ctx context.Context, g *errgroup.Group) error {
	nodeMgr, err := a.newNodeManager(ctx)
	if err != nil {
		return err
	}
	g.Go(func() error {
		return a.api.Run(ctx, func(pods []*v1.Pod) { a.mux.Set(ctx, pod.SourceAPI, pods) }, a.loop.ResyncNamespace)
	})
	g.Go(func() error { return nodeMgr.Run(ctx) })
	serve, err := nodeServer(a.o, a.api, a.conn, a.nodeName, a.nodeIP, a.readers.Pods, a.readers, a.log)
	if err != nil {
		return err
	}
	if serve != nil {
		g.Go(func() error { return serve(ctx) })
	}
	return nil
}

// newNodeManager builds the Node's manager: registration, status and
// Lease, and the pod CIDR the Node is given.
func (a *agent) newNodeManager(ctx context.Context) (*node.Manager, error) {
	o, log := a.o, a.log
	return node.New(node.Config{
		Client: a.api.Client.Heartbeat, Name: a.nodeName, Labels: a.labels, Taints: o.RegisterWithTaints, Register: *o.RegisterNode,
		NodeIP: a.nodeIP, Hostname: a.nodeName, Capacity: a.capacity, Allocatable: a.allocatable,
		Extended: a.devices.Capacity, VolumesInUse: a.csi.VolumesInUse,
		RuntimeVersion: a.runtimeName + "://" + a.runtimeVersion, AgentVersion: agentVersion, Port: o.Port,
		Pressure:      a.evict.Pressure,
		RuntimeHealth: a.runtimeHealth.Err, NetworkHealth: a.podNet.Err, PLEGHealth: a.plegG.Healthy,
		ShutdownHealth: a.shutdown.ShuttingDown,
		Images:         node.CRIImages(a.conn, o.RuntimeRequestTimeout.Duration),
		RuntimeFeatures: func(ctx context.Context) (v1.NodeFeatures, []v1.NodeRuntimeHandler, error) {
			f, err := a.rt.Features(ctx)
			return v1.NodeFeatures{SupplementalGroupsPolicy: &f.SupplementalGroupsPolicy}, f.Handlers, err
		},
		UpdateFrequency: o.NodeStatusUpdateFrequency.Duration, ReportFrequency: o.NodeStatusReportFrequency.Duration,
		LeaseDuration: o.NodeLeaseDurationSeconds,
		OnPodCIDRs: func(cidrs []string) {
			if o.PodCIDR != "" {
				return // the flag wins
			}
			log.Info("pod CIDR from the Node object", zap.Strings("podCIDRs", cidrs))
			if err := ensureCNIConfig(ctx, o.cni(), strings.Join(cidrs, ","), log); err != nil {
				log.Error("CNI config for the Node's pod CIDR", zap.Error(err))
			}
			passPodCIDR(ctx, a.conn, o, strings.Join(cidrs, ","), log)
		},
		OnRegistered: a.api.NodeRegistered,
		Recorder:     a.api.Status.Recorder(), Clock: a.clk, Logger: log,
	})
}
