package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/admit"
	"github.com/nodeagent/nodeagent/internal/allocation"
	"github.com/nodeagent/nodeagent/internal/backoff"
	"github.com/nodeagent/nodeagent/internal/cpumanager"
	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/csi"
	"github.com/nodeagent/nodeagent/internal/devicemanager"
	"github.com/nodeagent/nodeagent/internal/dns"
	"github.com/nodeagent/nodeagent/internal/eviction"
	"github.com/nodeagent/nodeagent/internal/images"
	"github.com/nodeagent/nodeagent/internal/kubeapi"
	"github.com/nodeagent/nodeagent/internal/logs"
	"github.com/nodeagent/nodeagent/internal/metrics"
	"github.com/nodeagent/nodeagent/internal/node"
	"github.com/nodeagent/nodeagent/internal/pleg"
	"github.com/nodeagent/nodeagent/internal/pluginmanager"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podmanager"
	"github.com/nodeagent/nodeagent/internal/podresources"
	"github.com/nodeagent/nodeagent/internal/podsource"
	"github.com/nodeagent/nodeagent/internal/podvolumes"
	"github.com/nodeagent/nodeagent/internal/prober"
	"github.com/nodeagent/nodeagent/internal/server"
	"github.com/nodeagent/nodeagent/internal/shutdown"
	"github.com/nodeagent/nodeagent/internal/stats"
	"github.com/nodeagent/nodeagent/internal/status"
	"github.com/nodeagent/nodeagent/internal/syncloop"
	"github.com/nodeagent/nodeagent/internal/watchdog"
)

// agent holds the parts run wires, in the order they are built: each
// step of run is a method that builds the next parts from the earlier
// ones (and the options), so a new part or argument changes one step.
type agent struct {
	o   *options
	log *zap.Logger
	clk clock.RealClock

	// identify
	nodeName, nodeIP, statusDir string
	labels                      map[string]string // the Node's
	// connectRuntime
	mets                        *metrics.Metrics
	conn                        *cri.Conn
	podNet                      *podNetwork
	runtimeHealth               *cri.HealthPoller
	runtimeName, runtimeVersion string
	// connectAPI: api is nil in standalone mode
	api    *kubeapi.Mode
	pub    status.Publisher
	events *status.Events
	// newPodParts
	probes         *prober.Manager
	puller         *images.Puller
	imageGC        *images.GC
	vols           *podvolumes.Manager
	cpuMgr         *cpumanager.Manager
	devices        *devicemanager.Manager
	csi            *csi.Manager // nil standalone
	plugins        *pluginmanager.Manager
	podResources   *podresources.Server
	cleanupCgroups func(running map[pod.UID]bool)
	cgroupPhases   []cri.Phase
	capacity       v1.ResourceList
	allocatable    v1.ResourceList
	allocs         *allocation.Manager
	statuses       *status.Manager
	desired        *podmanager.Manager // the desired pods: the loop writes, the others read
	// newRuntime, newSources, newEviction, newLoop, newReaders
	rt          *cri.Runtime
	adopter     *cri.Adopter
	mux         *podsource.Mux
	runSources  []func(context.Context) error
	plegG       *pleg.Generic
	loop        *syncloop.Loop
	evict       *eviction.Manager
	evictions   *syncloop.Evictions
	shutdown    *shutdown.Manager
	logRotation *logs.Manager
	readers     server.Config
	loopAlive   *watchdog.Loop // the loop's iterations, for systemd's watchdog
}

// close releases what the steps opened, in reverse.
func (a *agent) close() {
	if a.probes != nil {
		a.probes.Stop()
	}
	a.api.Stop()
	if a.vols != nil {
		a.vols.Close()
	}
	if a.conn != nil {
		a.conn.Close()
	}
}

// identify names the node, its IP and the status directory.
func (a *agent) identify(context.Context) error {
	o := a.o
	a.nodeName = o.hostnameOverride
	if a.nodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("get host name (or give --hostname-override): %w", err)
		}
		a.nodeName = h
	}
	a.nodeName = strings.ToLower(a.nodeName)
	if a.nodeIP = o.nodeIP; a.nodeIP == "" {
		a.nodeIP = hostIP()
	}
	if a.statusDir = o.statusDir; a.statusDir == "" {
		a.statusDir = filepath.Join(o.rootDir, "status")
	}
	a.labels = map[string]string{"kubernetes.io/hostname": a.nodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH}
	for k, v := range o.nodeLabels {
		a.labels[k] = v
	}
	a.log.Info("starting nodeagent", zap.String("node", a.nodeName), zap.String("nodeIP", a.nodeIP),
		zap.String("manifestDir", o.StaticPodPath), zap.String("runtime", o.ContainerRuntimeEndpoint))
	return nil
}

// connectRuntime dials the CRI runtime (measured: the metrics come
// first) and sets up the pod network's readiness and the runtime's
// health.
func (a *agent) connectRuntime(ctx context.Context) error {
	o, log := a.o, a.log
	if o.PodCIDR != "" {
		if err := ensureCNIConfig(ctx, o.cni(), o.PodCIDR, log); err != nil {
			return err
		}
	}
	a.mets = metrics.New(a.clk)
	conn, err := cri.Dial(o.ContainerRuntimeEndpoint, a.mets.DialOptions()...)
	if err != nil {
		return err
	}
	a.conn = conn
	// The pod network's readiness: the runtime's NetworkReady; and the CNI
	// config dir nodeagent knows, if any, checked and watched, with CNI GC
	// over the runtime's sandboxes.
	a.podNet = newPodNetwork(o.cni(), conn, a.clk, log)
	// The runtime's conditions: RuntimeReady gates the sync loop,
	// NetworkReady (podNet's own Status call, worded as the kubelet's)
	// only pods that need the pod network.
	a.runtimeHealth = cri.NewHealthPoller(conn, a.clk, a.podNet.Poll)
	a.runtimeName = "containerd"
	if info, err := cri.Check(ctx, conn, o.RuntimeRequestTimeout.Duration); err != nil {
		log.Warn("container runtime not ready yet; the sync loop waits for it", zap.Error(err))
	} else {
		a.runtimeName, a.runtimeVersion = info.Name, info.Version
		log.Info("container runtime", zap.String("name", info.Name), zap.String("version", info.Version), zap.String("cri", info.APIVersion))
	}
	if o.PodCIDR != "" {
		passPodCIDR(ctx, conn, o, o.PodCIDR, log)
	}
	return nil
}

// connectAPI starts API mode with --kubeconfig; the statuses and events
// are published to the pod start tracker, then the API server (only the
// tracker standalone), from the events recorder on.
func (a *agent) connectAPI(ctx context.Context) (err error) {
	if a.api, err = connectAPI(ctx, a.o, a.nodeName, a.clk, a.log); err != nil {
		return err
	}
	a.pub = podStartPublisher(a.api, a.mets.PodStart)
	a.events = status.NewEvents(a.statusDir, a.nodeName, a.pub, a.clk, a.log)
	return nil
}

// newPodParts builds what the runtime runs pods with: probes, the image
// manager, volumes, the CPU manager (its checkpoint restored, or
// start-up refused, before any pod runs), pod cgroups and allocations.
func (a *agent) newPodParts(ctx context.Context) (err error) {
	o, clk, log := a.o, a.clk, a.log
	a.runtimeHealth.Poll(ctx)
	if a.probes, err = prober.New(prober.Config{Runtime: a.conn, Clock: clk, Logger: log, Recorder: a.events, NodeIP: a.nodeIP}); err != nil {
		return err
	}
	// The image manager: pulls (limit, shared pulls) and image GC.
	a.puller, err = images.NewPuller(images.PullerConfig{Client: a.conn, Clock: clk, Logger: log,
		Serialize: *o.SerializeImagePulls, MaxParallel: int(*o.MaxParallelImagePulls), StatusTimeout: o.RuntimeRequestTimeout.Duration,
		OnPull: func(req images.Request, start, end time.Time, err error) {
			a.mets.PodStart.ImagePull(types.UID(req.Sandbox.GetMetadata().GetUid()), start, end, err)
		}})
	if err != nil {
		return err
	}
	if a.imageGC, err = newImageGC(o, a.conn, clk, a.api, a.nodeName, log); err != nil {
		return err
	}
	// Pod directories and the volumes in them; CSI drivers in API mode.
	vc := podvolumes.Config{RootDir: o.rootDir, NodeIP: a.nodeIP, Objects: a.api.PodObjects(), Claims: a.api.Claims(), Clock: clk, Logger: log}
	if err := a.newCSI(); err != nil {
		return err
	}
	if a.csi != nil {
		vc.CSI = a.csi
	}
	if a.vols, err = podvolumes.New(vc); err != nil {
		return err
	}
	// The desired pods: the loop fills the pod manager; the CPU manager,
	// the allocation manager and the others read it.
	a.desired = podmanager.New()
	if a.cpuMgr, err = newCPUManager(o, a.conn, a.desired, clk, log); err != nil {
		return err
	}
	// Pod cgroups (the sandbox's cgroup parent) and oom_score_adj.
	if a.cleanupCgroups, a.cgroupPhases, err = newPodCgroups(ctx, o, a.conn, log); err != nil {
		return err
	}
	a.capacity = node.Capacity(o.rootDir, int(o.MaxPods))
	a.allocatable = node.Allocatable(a.capacity, o.reserved, o.hardThresholds)
	// The allocation manager (in-place resize): resizes are decided
	// beside the active pods of the pod manager.
	if err := a.newDevices(); err != nil {
		return err
	}
	a.allocs, err = newAllocations(o, a.allocatable, a.events, a.desired.ActivePods, clk, log)
	if err != nil {
		return err
	}
	// The status manager, named after the runtime, over the probes'
	// verdicts and the allocations.
	a.statuses, err = status.NewManager(status.Config{Dir: a.statusDir, Node: a.nodeName, RuntimeName: a.runtimeName, HostIP: a.nodeIP,
		Events: a.events, Probes: a.probes, Resizes: a.allocs, Publisher: a.pub, WritePause: 200 * time.Millisecond, Clock: clk, Logger: log})
	return err
}

// newRuntime builds the CRI runtime that syncs pods.
func (a *agent) newRuntime(context.Context) (err error) {
	o := a.o
	home, _ := os.UserHomeDir()
	a.rt, err = cri.New(cri.Config{
		Client: a.conn, Logger: a.log, Clock: a.clk, Probes: a.probes,
		Phases:  append([]cri.Phase{cpusetPhase{a.cpuMgr}, devicePhase{a.devices}}, a.cgroupPhases...),
		DNS:     &dns.Config{ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain, ResolvConf: *o.ResolverConfig},
		RootDir: o.rootDir, PodLogsDir: o.PodLogsDir,
		CallTimeout: o.RuntimeRequestTimeout.Duration, PullTimeout: o.imagePullTimeout,
		CrashLoop: backoff.New(a.clk, 10*time.Second, o.CrashLoopBackOff.MaxContainerRestartPeriod.Duration, 10*time.Minute),
		NodeName:  a.nodeName, NodeIP: a.nodeIP, NodeAllocatable: a.allocatable,
		Recorder:      a.events,
		NetworkHealth: a.podNet.PodErr,
		Objects:       a.api.PodObjects(),
		// A pod's runtimeClassName → the handler its sandbox runs with.
		RuntimeClasses: a.api.Classes(),
		SpecConfig:     cri.SpecConfig{ClusterDomain: o.ClusterDomain, SeccompDefault: *o.SeccompDefault},
		Images:         a.puller, PullSecretsDir: o.pullSecretsDir, DockerConfigPaths: cri.DefaultDockerConfigPaths(o.rootDir, home),
		Volumes:     a.vols,
		Allocations: a.allocs,
		// Dead containers kept (the kubelet's container GC policy).
		ContainerGCMinAge: o.minimumContainerTTL, ContainerGCMaxPerPodContainer: int(o.maxDeadPerContainer),
		ContainerGCMaxContainers: int(o.maxDeadContainers),
		AdoptKubeletPods:         o.adoptKubeletPods,
	})
	if err != nil {
		return err
	}
	// The PLEG's cache is the runtime's pods; static pods are adopted
	// from it as they arrive (before the loop: the sources feed it).
	a.plegG = pleg.NewGeneric(a.rt, a.clk, a.log, 1000)
	a.plegG.ObserveRelists(a.mets.ObserveRelist)
	a.adopter = cri.NewAdopter(a.plegG.Snapshot, a.clk, a.log)
	return nil
}

// newSources builds the pod sources' mux and the static sources (the
// manifest directory, the manifest URL); the API server's is started
// with API mode (serveAPI).
func (a *agent) newSources(ctx context.Context) error {
	o, log := a.o, a.log
	var sources []string
	if o.StaticPodPath != "" {
		sources = append(sources, pod.SourceFile)
	}
	if o.StaticPodURL != "" {
		sources = append(sources, pod.SourceHTTP)
	}
	if a.api != nil {
		sources = append(sources, pod.SourceAPI)
	}
	a.mux = podsource.NewMux(a.clk, sources...)
	sink := func(source string) func([]*v1.Pod) {
		return func(pods []*v1.Pod) {
			if source != pod.SourceAPI && o.adoptKubeletPods {
				pods = a.adopter.Adopt(ctx, pods) // the UIDs they run under
			}
			a.api.StaticPods(source, pods)
			a.mux.Set(ctx, source, pods)
		}
	}
	problems := func(source string) func(map[string]string) {
		return func(p map[string]string) { a.statuses.SourceProblems(source, p) }
	}
	if o.StaticPodPath != "" {
		dir, err := podsource.NewDir(podsource.DirConfig{
			Path: o.StaticPodPath, NodeName: a.nodeName, Period: o.FileCheckFrequency.Duration, Clock: a.clk, Logger: log,
			Sink: sink(pod.SourceFile), Problems: problems(pod.SourceFile), RefuseInsecure: o.manifestPermissions == "refuse",
		})
		if err != nil {
			return err
		}
		a.runSources = append(a.runSources, dir.Run)
	}
	if o.StaticPodURL != "" {
		header := http.Header{}
		for k, vs := range o.StaticPodURLHeader {
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		src, err := podsource.NewHTTP(podsource.HTTPConfig{
			URL: o.StaticPodURL, Header: header, NodeName: a.nodeName, Period: o.HTTPCheckFrequency.Duration, Clock: a.clk, Logger: log,
			Sink: sink(pod.SourceHTTP), Problems: problems(pod.SourceHTTP),
		})
		if err != nil {
			return err
		}
		a.runSources = append(a.runSources, src.Run)
	}
	return nil
}

// newLoop builds the sync loop with its admission chains.
func (a *agent) newLoop(ctx context.Context) (err error) {
	o := a.o
	// As the kubelet's syncLoop health check: twice the resync period, at
	// least 5 minutes.
	a.loopAlive = watchdog.NewLoop(a.clk, max(2*o.SyncFrequency.Duration, 5*time.Minute))
	a.loop, err = syncloop.New(syncloop.Config{
		Updates:      a.mux.Updates(),
		SourcesReady: a.mux.SeenAll,
		Runtime:      a.rt,
		PLEG:         a.plegG,
		Status:       a.statuses,
		Pods:         a.desired,
		Evictions:    a.evictions,
		Prober:       a.probes,
		Admit:        a.admitChain(ctx),
		Run: admit.Chain{
			admit.Privileged(o.allowPrivileged),
			admit.HostNamespaces(admit.HostNamespaceSources{Network: o.hostNetworkSources, PID: o.hostPIDSources, IPC: o.hostIPCSources}),
		},
		RuntimeHealth: a.runtimeHealth.Err,
		Clock:         a.clk,
		Logger:        a.log,
		ResyncPeriod:  o.SyncFrequency.Duration,
		OnIteration: func(kind string, d time.Duration) {
			a.loopAlive.Iterated()
			a.mets.ObserveIteration(kind, d)
		},
		OnPodSync: a.mets.ObservePodSync,
		Housekeeping: func(active, running map[pod.UID]bool) {
			a.rt.GC()
			a.rt.CleanupDirs(active) // a finished pod keeps its logs
			a.cleanupCgroups(running)
			a.cpuMgr.RemoveStale(running)
			a.devices.RemoveStale(running)
			a.allocs.RemoveOrphans(running)
		},
	})
	if err != nil {
		return err
	}
	loop, plegG := a.loop, a.plegG
	a.mets.AddGauges(metrics.Gauges{
		Workers:       func() float64 { return float64(loop.Workers()) },
		DroppedEvents: func() float64 { return float64(plegG.Dropped()) },
		Runtime:       plegG.Snapshot,
	})
	return nil
}

// admitChain is the loop's admission of a new pod, in order.
func (a *agent) admitChain(ctx context.Context) admit.Chain {
	o := a.o
	return admit.Chain{
		admit.PodOS(),
		admit.MaxPods(int(o.MaxPods)),
		admit.ResourcesOf(a.admissionAllocatable, a.allocs),
		admit.NodeSelector(a.labels),
		admit.Taints(o.RegisterWithTaints),
		admit.HostPorts(),
		admit.Sysctls(o.AllowedUnsafeSysctls),
		admit.Pressure(a.evict.Pressure),
		admit.AppArmor(admit.AppArmorHost("/sys")),
		admit.UserNamespaces(cri.UserNamespaces(ctx, a.conn, o.RuntimeRequestTimeout.Duration)),
		admit.SupplementalGroupsPolicy(func() (bool, error) {
			f, err := a.rt.Features(ctx)
			return f.SupplementalGroupsPolicy, err
		}),
		admit.NodeShutdown(a.shutdown.ShuttingDown, shutdown.NotAdmittedReason, shutdown.NotAdmittedMessage),
		admit.CPUs(a.cpuMgr), // last: they allocate
		admit.Devices(ctx, a.devices),
		admit.Allocate(a.allocs), // after the CPUs and devices: records what was admitted
	}
}

// newEviction builds the eviction manager, before the loop (whose
// admission asks it about pressure): it reads the desired pods and hands
// its decisions to the loop through the evictions channel; graceful node
// shutdown, which stops pods through the same channel; and the container
// log rotation (of this agent's containers only).
func (a *agent) newEviction(context.Context) (err error) {
	o := a.o
	a.evictions = syncloop.NewEvictions()
	if a.evict, err = newEviction(o, a.conn, a.clk, a.desired, a.evictions, a.imageGC, a.vols.Dir, a.ownership(), a.log); err != nil {
		return err
	}
	a.shutdown = a.newShutdown()
	a.logRotation, err = logs.New(logs.Config{
		Runtime: a.conn, Labels: a.ownership().Selector, Owns: a.ownership().Owns,
		MaxSize: o.containerLogMaxBytes, MaxFiles: int(*o.ContainerLogMaxFiles), MaxWorkers: int(*o.ContainerLogMaxWorkers),
		MonitorInterval: o.ContainerLogMonitorInterval.Duration, CallTimeout: o.RuntimeRequestTimeout.Duration, PodLogsDir: o.PodLogsDir,
		Clock: a.clk, Logger: a.log,
	})
	return err
}

// newShutdown builds graceful node shutdown (shutdownGracePeriod…): it
// stops pods through the loop's evictions and makes admission refuse new
// ones while the node shuts down.
func (a *agent) newShutdown() *shutdown.Manager {
	o := a.o
	var event func(reason, message string)
	if a.api != nil {
		ref := &v1.ObjectReference{Kind: "Node", Name: a.nodeName, UID: types.UID(a.nodeName)}
		event = func(reason, message string) { a.api.Status.Recorder().Event(ref, v1.EventTypeNormal, reason, message) }
	}
	return shutdown.New(shutdown.Config{
		Groups:     shutdown.Groups(o.ShutdownGracePeriod.Duration, o.ShutdownGracePeriodCriticalPods.Duration, o.ShutdownGracePeriodByPodPriority),
		Connect:    shutdown.ConnectLogind,
		ActivePods: a.desired.ActivePods,
		Terminate:  a.evictions.Terminate,
		Event:      event,
		Clock:      a.clk,
		Logger:     a.log,
	})
}

// ownership tells the agent's sandboxes and containers (the kubelet's
// too with --adopt-kubelet-pods) to the readers beside the runtime.
func (a *agent) ownership() cri.Ownership {
	return cri.NewOwnership(a.nodeName, a.o.adoptKubeletPods)
}

// newReaders builds what the read-only port, the healthz endpoint and
// the node server read: health, metrics, stats, the published pods.
func (a *agent) newReaders(context.Context) error {
	o := a.o
	nodeStats, err := stats.New(stats.Config{
		NodeName: a.nodeName, Runtime: a.conn, Selector: a.ownership().Selector, Owns: a.ownership().Owns,
		Volumes: &stats.Volumes{Pod: func(uid string) (*v1.Pod, bool) { return a.desired.GetPodByUID(pod.UID(uid)) }, Dir: a.vols.LocalDir,
			CSI: a.vols.CSIStats},
		Host:       stats.Host{ProcRoot: "/proc", CgroupRoot: cgroupMountRoot, RootDir: o.rootDir},
		PodLogsDir: o.PodLogsDir, Timeout: o.RuntimeRequestTimeout.Duration, Clock: a.clk, Logger: a.log,
	})
	if err != nil {
		return err
	}
	a.readers = server.Config{NodeName: a.nodeName, Health: a.health, Metrics: a.mets.Handler(a.health), Stats: nodeStats,
		Resource: nodeStats.ResourceHandler(), Pods: func() ([]*v1.Pod, error) { return a.statuses.Pods(), nil }, Logger: a.log}
	return nil
}

// health is the agent's /healthz: the runtime ready and the PLEG
// relisting.
func (a *agent) health() error {
	return errors.Join(a.runtimeHealth.Err(), a.plegG.Healthy())
}
