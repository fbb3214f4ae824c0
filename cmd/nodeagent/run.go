package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/images"
	"github.com/nodeagent/nodeagent/internal/kubeapi"
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
	stopProfiles, err := startProfiles(log)
	if err != nil {
		return err
	}
	defer stopProfiles()
	if err := run(ctx, o, log); err != nil {
		log.Error("nodeagent stopped", zap.Error(err))
		return err
	}
	log.Info("nodeagent stopped; pods keep running and are adopted at the next start")
	return nil
}

// startProfiles starts the debugging aids: NODEAGENT_CPUPROFILE, a CPU
// profile of the whole run, and NODEAGENT_HEAPPROFILE, the live heap at
// exit, both for `go tool pprof`; stop ends them.
func startProfiles(log *zap.Logger) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if path := os.Getenv("NODEAGENT_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("NODEAGENT_CPUPROFILE: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("NODEAGENT_CPUPROFILE: %w", err)
		}
		stops = append(stops, func() { f.Close() }, pprof.StopCPUProfile)
	}
	if path := os.Getenv("NODEAGENT_HEAPPROFILE"); path != "" {
		stops = append(stops, func() {
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
		})
	}
	return stop, nil
}

// run wires the agent step by step (agent.go), each step a small
// constructor over the parts of the steps before, then runs it.
func run(ctx context.Context, o *options, log *zap.Logger) error {
	a := &agent{o: o, log: log, clk: clock.RealClock{}}
	defer a.close()
	for _, step := range []func(context.Context) error{
		a.identify, a.connectRuntime, a.connectAPI, a.newPodParts, a.newRuntime, a.newSources, a.newEviction, a.newLoop, a.newReaders,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return a.serve(ctx)
}

// newImageGC builds the image garbage collector; in API mode its
// warnings are also events on the Node, as the kubelet's.
func newImageGC(o *options, conn *cri.Conn, clk clock.WithTicker, api *kubeapi.Mode, nodeName string, log *zap.Logger) (*images.GC, error) {
	cfg := images.GCConfig{
		Client: conn, Clock: clk, Logger: log,
		HighThresholdPercent: int(*o.ImageGCHighThresholdPercent), LowThresholdPercent: int(*o.ImageGCLowThresholdPercent),
		MinAge: o.ImageMinimumGCAge.Duration, MaxAge: o.ImageMaximumGCAge.Duration, Period: o.imageGCPeriod,
		SandboxImage: o.podInfraContainerImage, CallTimeout: o.RuntimeRequestTimeout.Duration,
	}
	if api != nil {
		ref := &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)}
		rec := api.Status.Recorder()
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

// hostIP is the node's address without --node-ip: the address of the
// interface of the default route, as the kubelet's last resort (it asks
// DNS for the node name first, which nodeagent does not: a node name the
// resolver does not know would cost a resolver timeout at every start),
// else the first non-loopback IPv4 address.
func hostIP() string {
	if ip, err := utilnet.ChooseHostInterface(); err == nil && !ip.IsLoopback() {
		return ip.String()
	}
	return firstIPv4()
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
