package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/admit"
	"github.com/nodeagent/nodeagent/internal/backoff"
	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/dns"
	"github.com/nodeagent/nodeagent/internal/eviction"
	"github.com/nodeagent/nodeagent/internal/images"
	"github.com/nodeagent/nodeagent/internal/kubeapi"
	"github.com/nodeagent/nodeagent/internal/logs"
	"github.com/nodeagent/nodeagent/internal/metrics"
	"github.com/nodeagent/nodeagent/internal/node"
	"github.com/nodeagent/nodeagent/internal/pleg"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podsource"
	"github.com/nodeagent/nodeagent/internal/podvolumes"
	"github.com/nodeagent/nodeagent/internal/prober"
	"github.com/nodeagent/nodeagent/internal/server"
	"github.com/nodeagent/nodeagent/internal/stats"
	"github.com/nodeagent/nodeagent/internal/status"
	"github.com/nodeagent/nodeagent/internal/syncloop"
)

func newLogger(verbosity int) (*zap.Logger, error) {
	cfg := zap.NewProductionConfig()
	cfg.Encoding = "console"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.Sampling = nil
	// Errors are about the node and its pods (a bad manifest, a failed
	// pull), not about the agent's code: no Go stack trace with them.
	cfg.DisableStacktrace = true
	if verbosity >= 4 {
		cfg.Level = zap.NewAtomicLevelAt(zap.DebugLevel)
	}
	return cfg.Build(zap.AddStacktrace(zapcore.DPanicLevel))
}

func cmdRun(args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	log, err := newLogger(int(o.Logging.Verbosity))
	if err != nil {
		return err
	}
	defer log.Sync() //nolint:errcheck
	if len(o.configWarnings) > 0 {
		log.Warn("config file fields nodeagent does not implement are ignored", zap.String("file", o.configFile), zap.Strings("fields", o.configWarnings))
	}
	// client-go and its certificate managers log through klog: into the
	// agent's log, not a second format on stderr.
	klog.SetLogger(zapr.NewLogger(log.Named("klog")))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if path := os.Getenv("NODEAGENT_CPUPROFILE"); path != "" {
		// A debugging aid: a CPU profile of the whole run, for `go tool pprof`.
		f, err := os.Create(path)
		if err != nil {
			return fmt.Errorf("NODEAGENT_CPUPROFILE: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("NODEAGENT_CPUPROFILE: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if path := os.Getenv("NODEAGENT_HEAPPROFILE"); path != "" {
		// A debugging aid: the live heap at exit, for `go tool pprof`.
		defer func() {
			f, err := os.Create(path)
			if err != nil {
				log.Warn("NODEAGENT_HEAPPROFILE", zap.Error(err))
				return
			}
			defer f.Close()
			runtime.GC()
			if err := pprof.WriteHeapProfile(f); err != nil {
				log.Warn("NODEAGENT_HEAPPROFILE", zap.Error(err))
			}
		}()
	}
	if err := run(ctx, o, log); err != nil {
		log.Error("nodeagent stopped", zap.Error(err))
		return err
	}
	log.Info("nodeagent stopped; pods keep running and are adopted at the next start")
	return nil
}

func run(ctx context.Context, o *options, log *zap.Logger) error {
	clk := clock.RealClock{}
	nodeName := o.hostnameOverride
	if nodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("get host name (or give --hostname-override): %w", err)
		}
		nodeName = h
	}
	nodeName = strings.ToLower(nodeName)
	nodeIP := o.nodeIP
	if nodeIP == "" {
		nodeIP = firstIPv4()
	}
	statusDir := o.statusDir
	if statusDir == "" {
		statusDir = filepath.Join(o.rootDir, "status")
	}
	log.Info("starting nodeagent", zap.String("node", nodeName), zap.String("nodeIP", nodeIP),
		zap.String("manifestDir", o.StaticPodPath), zap.String("runtime", o.ContainerRuntimeEndpoint))

	if o.PodCIDR != "" {
		if err := ensureCNIConfig(ctx, o.cni(), o.PodCIDR, log); err != nil {
			return err
		}
	}

	// The metrics, first: every CRI call is measured.
	mets := metrics.New(clk)
	conn, err := cri.Dial(o.ContainerRuntimeEndpoint, mets.DialOptions()...)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The pod network's readiness: the runtime's NetworkReady; and the CNI
	// config dir nodeagent knows, if any, checked and watched, with CNI GC
	// over the runtime's sandboxes.
	podNet := newPodNetwork(o.cni(), conn, clk, log)
	runtimeName, runtimeVersion := "containerd", ""
	if info, err := cri.Check(ctx, conn, o.RuntimeRequestTimeout.Duration); err != nil {
		log.Warn("container runtime not ready yet; the sync loop waits for it", zap.Error(err))
	} else {
		runtimeName, runtimeVersion = info.Name, info.Version
		log.Info("container runtime", zap.String("name", info.Name), zap.String("version", info.Version), zap.String("cri", info.APIVersion))
	}
	if o.PodCIDR != "" {
		passPodCIDR(ctx, conn, o, o.PodCIDR, log)
	}

	statuses, err := status.NewManager(statusDir, nodeName, runtimeName, nodeIP, clk, log)
	if err != nil {
		return err
	}
	var api *apiMode
	if o.kubeconfig != "" {
		var static []string
		if o.StaticPodPath != "" {
			static = append(static, pod.SourceFile)
		}
		if o.StaticPodURL != "" {
			static = append(static, pod.SourceHTTP)
		}
		if api, err = connectAPI(ctx, o, nodeName, static, log); err != nil {
			return err
		}
		defer api.client.Stop()
	}
	statuses.SetPublisher(podStartPublisher(api, mets.PodStart))
	// The runtime's conditions, read every 5s (every second while it is
	// not ready): RuntimeReady (cri.Health) gates the sync loop,
	// NetworkReady (podNet's own Status call, worded as the kubelet's) only
	// pods that need the pod network.
	runtimeHealth := cri.NewHealthPoller(conn, clk, podNet.Poll)
	runtimeHealth.Poll(ctx)

	probes, err := prober.New(prober.Config{Runtime: conn, Clock: clk, Logger: log, Recorder: statuses, NodeIP: nodeIP})
	if err != nil {
		return err
	}
	defer probes.Stop()
	statuses.SetProbes(probes)
	// The image manager: pulls (limit, shared pulls) and image GC.
	puller, err := images.NewPuller(images.PullerConfig{Client: conn, Clock: clk, Logger: log,
		Serialize: *o.SerializeImagePulls, MaxParallel: int(*o.MaxParallelImagePulls), StatusTimeout: o.RuntimeRequestTimeout.Duration,
		OnPull: func(req images.Request, start, end time.Time, err error) {
			mets.PodStart.ImagePull(types.UID(req.Sandbox.GetMetadata().GetUid()), start, end, err)
		}})
	if err != nil {
		return err
	}
	imageGC, err := newImageGC(o, conn, clk, api, nodeName, log)
	if err != nil {
		return err
	}
	home, _ := os.UserHomeDir()
	dockerConfigs := cri.DefaultDockerConfigPaths(o.rootDir, home)
	// Pod directories and the volumes in them.
	vols, err := podvolumes.New(podvolumes.Config{RootDir: o.rootDir, NodeIP: nodeIP, Objects: api.objects(), Clock: clk, Logger: log})
	if err != nil {
		return err
	}
	// The CPU manager: its checkpoint is restored (or start-up refused)
	// before any pod is run.
	cpuMgr, err := newCPUManager(o, conn, clk, log)
	if err != nil {
		return err
	}
	// Pod cgroups (the sandbox's cgroup parent) and oom_score_adj.
	cleanupCgroups, cgroupPhases, err := newPodCgroups(ctx, o, conn, log)
	if err != nil {
		return err
	}
	capacity := node.Capacity(o.rootDir, int(o.MaxPods))
	allocatable := node.Allocatable(capacity, o.reserved, o.hardThresholds)
	var loop *syncloop.Loop
	// The allocation manager (in-place resize): what each pod's
	// containers are allocated, checkpointed, resizes decided beside the
	// loop's active pods.
	allocs, err := newAllocations(o, allocatable, statuses, func() []*v1.Pod {
		if loop == nil {
			return nil
		}
		return loop.ActivePods()
	}, clk, log)
	if err != nil {
		return err
	}
	statuses.SetResizes(allocs)
	rt, err := cri.New(cri.Config{
		Client: conn, Logger: log, Clock: clk, Probes: probes,
		Phases:  append([]cri.Phase{cpusetPhase{cpuMgr}}, cgroupPhases...),
		DNS:     &dns.Config{ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain, ResolvConf: *o.ResolverConfig},
		RootDir: o.rootDir, PodLogsDir: o.PodLogsDir,
		CallTimeout: o.RuntimeRequestTimeout.Duration, PullTimeout: o.imagePullTimeout,
		CrashLoop: backoff.New(clk, 10*time.Second, o.CrashLoopBackOff.MaxContainerRestartPeriod.Duration, 10*time.Minute),
		NodeName:  nodeName, NodeIP: nodeIP, NodeAllocatable: allocatable,
		Recorder:      statuses,
		NetworkHealth: podNet.PodErr,
		Objects:       api.objects(),
		// A pod's runtimeClassName → the handler its sandbox runs with.
		RuntimeClasses: api.runtimeClasses(),
		SpecConfig:     cri.SpecConfig{ClusterDomain: o.ClusterDomain, SeccompDefault: *o.SeccompDefault},
		Images:         puller, PullSecretsDir: o.pullSecretsDir, DockerConfigPaths: dockerConfigs,
		Volumes:     vols,
		Allocations: allocs,
		// Dead containers kept (the kubelet's container GC policy).
		ContainerGCMinAge: o.minimumContainerTTL, ContainerGCMaxPerPodContainer: int(o.maxDeadPerContainer),
		ContainerGCMaxContainers: int(o.maxDeadContainers),
	})
	if err != nil {
		return err
	}
	var sources []string
	var runSources []func(context.Context) error
	if o.StaticPodPath != "" {
		sources = append(sources, pod.SourceFile)
	}
	if o.StaticPodURL != "" {
		sources = append(sources, pod.SourceHTTP)
	}
	if api != nil {
		sources = append(sources, pod.SourceAPI)
	}
	mux := podsource.NewMux(sources...)
	if o.StaticPodPath != "" {
		dir, err := podsource.NewDir(podsource.DirConfig{
			Path: o.StaticPodPath, NodeName: nodeName, Period: o.FileCheckFrequency.Duration, Clock: clk, Logger: log,
			Sink:           func(pods []*v1.Pod) { api.staticPods(pod.SourceFile, pods); mux.Set(ctx, pod.SourceFile, pods) },
			Problems:       func(p map[string]string) { statuses.SourceProblems(pod.SourceFile, p) },
			RefuseInsecure: o.manifestPermissions == "refuse",
		})
		if err != nil {
			return err
		}
		runSources = append(runSources, dir.Run)
	}
	if o.StaticPodURL != "" {
		header := http.Header{}
		for k, vs := range o.StaticPodURLHeader {
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		src, err := podsource.NewHTTP(podsource.HTTPConfig{
			URL: o.StaticPodURL, Header: header, NodeName: nodeName, Period: o.HTTPCheckFrequency.Duration, Clock: clk, Logger: log,
			Sink:     func(pods []*v1.Pod) { api.staticPods(pod.SourceHTTP, pods); mux.Set(ctx, pod.SourceHTTP, pods) },
			Problems: func(p map[string]string) { statuses.SourceProblems(pod.SourceHTTP, p) },
		})
		if err != nil {
			return err
		}
		runSources = append(runSources, src.Run)
	}
	plegG := pleg.NewGeneric(rt, clk, log, 1000)
	mets.AddGauges(metrics.Gauges{
		Workers:       func() float64 { return float64(loop.Workers()) },
		DroppedEvents: func() float64 { return float64(plegG.Dropped()) },
		Runtime:       plegG.Snapshot,
	})
	plegG.ObserveRelists(mets.ObserveRelist)

	labels := map[string]string{"kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH}
	for k, v := range o.nodeLabels {
		labels[k] = v
	}
	var evict *eviction.Manager // set once the loop exists; read by admission later
	loop, err = syncloop.New(syncloop.Config{
		Updates:      mux.Updates(),
		SourcesReady: mux.SeenAll,
		Runtime:      rt,
		PLEG:         plegG,
		Status:       statuses,
		Prober:       probes,
		Admit: admit.Chain{
			admit.PodOS(),
			admit.MaxPods(int(o.MaxPods)),
			admit.Resources(allocatable, allocs),
			admit.NodeSelector(labels),
			admit.Taints(o.RegisterWithTaints),
			admit.HostPorts(),
			admit.Sysctls(o.AllowedUnsafeSysctls),
			admit.Pressure(func(c v1.NodeConditionType) bool { return evict != nil && evict.Pressure(c) }),
			admit.AppArmor(admit.AppArmorHost("/sys")),
			admit.UserNamespaces(cri.UserNamespaces(ctx, conn, o.RuntimeRequestTimeout.Duration)),
			admit.CPUs(cpuMgr),     // last: they allocate
			admit.Allocate(allocs), // after the CPUs: records what was admitted
		},
		Run: admit.Chain{
			admit.Privileged(o.allowPrivileged),
			admit.HostNamespaces(admit.HostNamespaceSources{Network: o.hostNetworkSources, PID: o.hostPIDSources, IPC: o.hostIPCSources}),
		},
		RuntimeHealth: runtimeHealth.Err,
		Clock:         clk,
		Logger:        log,
		ResyncPeriod:  o.SyncFrequency.Duration,
		OnIteration:   mets.ObserveIteration,
		OnPodSync:     mets.ObservePodSync,
		Housekeeping: func(active, running map[pod.UID]bool) {
			rt.GC()
			rt.CleanupDirs(active) // a finished pod keeps its logs
			cleanupCgroups(running)
			cpuMgr.RemoveStale(running)
			allocs.RemoveOrphans(running)
		},
	})
	if err != nil {
		return err
	}
	if evict, err = newEviction(o, conn, clk, loop, imageGC, nodeName, log); err != nil {
		return err
	}

	// Container log rotation, of this agent's containers only.
	logRotation, err := logs.New(logs.Config{
		Runtime: conn, Labels: agentSelector(nodeName),
		MaxSize: o.containerLogMaxBytes, MaxFiles: int(*o.ContainerLogMaxFiles), MaxWorkers: int(*o.ContainerLogMaxWorkers),
		MonitorInterval: o.ContainerLogMonitorInterval.Duration, CallTimeout: o.RuntimeRequestTimeout.Duration, PodLogsDir: o.PodLogsDir,
		Clock: clk, Logger: log,
	})
	if err != nil {
		return err
	}

	// One relist before the loop starts: adopted pods and the old versions
	// of manifests edited while the agent was down are known when the
	// first pods arrive.
	if err := plegG.Relist(ctx); err != nil {
		log.Warn("first relist failed; the PLEG retries", zap.Error(err))
	}
	g, gctx := errgroup.WithContext(ctx)
	health := func() error { return errors.Join(runtimeHealth.Err(), plegG.Healthy()) }
	nodeStats, err := stats.New(stats.Config{
		NodeName: nodeName, Runtime: conn, Selector: agentSelector(nodeName),
		Host:       stats.Host{ProcRoot: "/proc", CgroupRoot: cgroupMountRoot, RootDir: o.rootDir},
		PodLogsDir: o.PodLogsDir, Timeout: o.RuntimeRequestTimeout.Duration, Clock: clk, Logger: log,
	})
	if err != nil {
		return err
	}
	// What the read-only port and the node server read.
	readers := server.Config{NodeName: nodeName, Health: health, Metrics: mets.Handler(health), Stats: nodeStats,
		Resource: nodeStats.ResourceHandler(), Pods: func() ([]*v1.Pod, error) { return status.List(statusDir) }, Logger: log}
	if o.ReadOnlyPort > 0 {
		if err := readOnlyPort(gctx, g, o, readers, log); err != nil {
			return err
		}
	}
	if int(*o.HealthzPort) > 0 {
		addr := net.JoinHostPort(o.HealthzBindAddress, strconv.Itoa(int(*o.HealthzPort)))
		// As the kubelet: a taken port costs the endpoint, not the pods.
		if ln, err := metrics.Listen(addr); err != nil {
			log.Error("no /healthz and /metrics endpoint; pods are run regardless (free the port or set --healthz-port)", zap.Error(err))
		} else {
			g.Go(func() error { return metrics.Serve(gctx, ln, mets.Handler(health)) })
			log.Info("serving /healthz and /metrics", zap.String("address", addr))
		}
	}
	for _, run := range runSources {
		g.Go(func() error { return run(gctx) })
	}
	g.Go(func() error { plegG.Run(gctx, time.Second); return nil })
	if o.eventedPLEG {
		g.Go(func() error { plegG.RunEvented(gctx, rt, 10*time.Second); return nil })
	}
	if api != nil {
		nodeMgr, err := node.New(node.Config{
			Client: api.client.Heartbeat, Name: nodeName, Labels: labels, Taints: o.RegisterWithTaints, Register: *o.RegisterNode,
			NodeIP: nodeIP, Hostname: nodeName, Capacity: capacity, Allocatable: allocatable,
			RuntimeVersion: runtimeName + "://" + runtimeVersion, AgentVersion: agentVersion, Port: o.Port,
			Pressure:      evict.Pressure,
			RuntimeHealth: runtimeHealth.Err, NetworkHealth: podNet.Err, PLEGHealth: plegG.Healthy,
			Images:          node.CRIImages(conn, o.RuntimeRequestTimeout.Duration),
			UpdateFrequency: o.NodeStatusUpdateFrequency.Duration, ReportFrequency: o.NodeStatusReportFrequency.Duration,
			LeaseDuration: int32(o.NodeLeaseDurationSeconds),
			OnPodCIDRs: func(cidrs []string) {
				if o.PodCIDR != "" {
					return // the flag wins
				}
				log.Info("pod CIDR from the Node object", zap.Strings("podCIDRs", cidrs))
				if err := ensureCNIConfig(gctx, o.cni(), strings.Join(cidrs, ","), log); err != nil {
					log.Error("CNI config for the Node's pod CIDR", zap.Error(err))
				}
				passPodCIDR(gctx, conn, o, strings.Join(cidrs, ","), log)
			},
			OnRegistered: api.status.NodeRegistered,
			Recorder:     api.status.Recorder(), Clock: clk, Logger: log,
		})
		if err != nil {
			return err
		}
		api.nodeUID = nodeMgr.UID
		src, err := kubeapi.NewSource(kubeapi.SourceConfig{
			Pods: api.pods, Checkpoint: filepath.Join(o.rootDir, "checkpoints", "api-pods.json"), Clock: clk, Logger: log,
			Sink: func(pods []*v1.Pod) { mux.Set(gctx, pod.SourceAPI, pods) },
		})
		if err != nil {
			return err
		}
		api.pods.Start(gctx)
		api.objs.Start(gctx)
		g.Go(func() error { // a watched ConfigMap or Secret changed: its namespace's pods sync now
			for {
				select {
				case <-gctx.Done():
					return nil
				case ns := <-api.objs.Changes():
					loop.ResyncNamespace(ns)
				}
			}
		})
		api.classes.Start(gctx)
		g.Go(func() error { return nodeMgr.Run(gctx) })
		serve, err := nodeServer(o, api, conn, nodeName, nodeIP, readers.Pods, readers, log)
		if err != nil {
			return err
		}
		if serve != nil {
			g.Go(func() error { return serve(gctx) })
		}
		g.Go(func() error { return src.Run(gctx) })
		g.Go(func() error { api.status.Run(gctx); return nil })
	}
	if api == nil {
		log.Info("node server off: without an API server its callers cannot be authenticated and authorized")
	}
	g.Go(func() error { loop.Run(gctx); return nil })
	g.Go(func() error { logRotation.Run(gctx); return nil })
	// The CPU manager's reconcile beside the loop: it pushes cpusets with
	// CRI calls.
	g.Go(func() error { cpuMgr.Run(gctx, plegG); return nil })
	// Image GC beside the loop, not in its housekeeping: removals are CRI
	// calls, and the loop never calls the runtime.
	g.Go(func() error { imageGC.Run(gctx); return nil })
	// Eviction beside the loop: it reads the host and the runtime's stats,
	// and hands its decisions to the loop.
	g.Go(func() error { evict.Run(gctx, clk, o.evictionMonitoringPeriod); return nil })
	// CNI config re-check and GC beside the loop too: GC lists sandboxes
	// and runs plugins.
	g.Go(func() error { podNet.Run(gctx); return nil })
	g.Go(func() error { runtimeHealth.Run(gctx); return nil })
	// systemd (Type=notify): ready once the loop runs; a no-op without
	// NOTIFY_SOCKET.
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		log.Warn("notify systemd", zap.Error(err))
	}
	g.Go(func() error {
		<-gctx.Done()
		daemon.SdNotify(false, daemon.SdNotifyStopping) //nolint:errcheck
		return nil
	})
	err = g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// newImageGC builds the image garbage collector; in API mode its
// warnings are also events on the Node, as the kubelet's.
func newImageGC(o *options, conn *cri.Conn, clk clock.WithTicker, api *apiMode, nodeName string, log *zap.Logger) (*images.GC, error) {
	cfg := images.GCConfig{
		Client: conn, Clock: clk, Logger: log,
		HighThresholdPercent: int(*o.ImageGCHighThresholdPercent), LowThresholdPercent: int(*o.ImageGCLowThresholdPercent),
		MinAge: o.ImageMinimumGCAge.Duration, MaxAge: o.ImageMaximumGCAge.Duration, Period: o.imageGCPeriod,
		SandboxImage: o.podInfraContainerImage, CallTimeout: o.RuntimeRequestTimeout.Duration,
	}
	if api != nil {
		ref := &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)}
		rec := api.status.Recorder()
		cfg.Event = func(eventType, reason, msg string) { rec.Event(ref, eventType, reason, msg) }
	}
	gc, err := images.NewGC(cfg)
	if err != nil {
		return nil, fmt.Errorf("image garbage collection: %w (check --image-gc-* and --image-*-gc-age)", err)
	}
	return gc, nil
}

// passPodCIDR tells the runtime the node's pod CIDR(s).
func passPodCIDR(ctx context.Context, conn cri.Client, o *options, podCIDR string, log *zap.Logger) {
	cctx, cancel := context.WithTimeout(ctx, o.RuntimeRequestTimeout.Duration)
	defer cancel()
	_, err := conn.UpdateRuntimeConfig(cctx, &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: podCIDR}}})
	if err != nil {
		log.Warn("pass pod CIDR to the runtime", zap.Error(err))
	}
}

func firstIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// agentSelector is the labels of this agent's sandboxes and containers.
func agentSelector(nodeName string) map[string]string {
	return map[string]string{cri.LabelManaged: "true", cri.LabelNode: nodeName}
}
