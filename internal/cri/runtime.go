package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/backoff"
	"github.com/nodeagent/nodeagent/internal/dns"
	"github.com/nodeagent/nodeagent/internal/downward"
	"github.com/nodeagent/nodeagent/internal/images"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podvolumes"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// Config configures a Runtime.
type Config struct {
	Client Client
	Logger *zap.Logger
	Clock  clock.PassiveClock
	// RootDir holds pod directories (volumes): <RootDir>/pods/<uid>.
	RootDir string
	// PodLogsDir is the root of container logs, /var/log/pods by default:
	// <PodLogsDir>/<ns>_<name>_<uid>/<container>/<restart>.log.
	PodLogsDir string
	// CallTimeout bounds every CRI call but pulls (kubelet: 2m).
	CallTimeout time.Duration
	// PullTimeout bounds one image pull.
	PullTimeout time.Duration
	// CrashLoop is the container restart backoff (10s doubling to 300s).
	CrashLoop *backoff.Backoff
	// ImagePull is the image pull backoff.
	ImagePull *backoff.Backoff
	// NodeName and NodeIP fill downward-API env vars.
	NodeName string
	NodeIP   string
	// AdoptKubeletPods makes the kubelet's sandboxes and containers on the
	// runtime (the kubelet's labels, none of nodeagent's) this agent's
	// own: a node the kubelet ran is taken over as it runs. Never beside a
	// running kubelet on the same runtime.
	AdoptKubeletPods bool
	// NodeAllocatable is the node's allocatable resources (its Node
	// status's): the limit a downward-API env var reads for a container
	// without one. When nil, the host's figures stand in (package
	// downward).
	NodeAllocatable v1.ResourceList
	// NetworkHealth, if set, tells whether the pod network is ready; pods
	// not on the host network get no sandbox while it is not.
	NetworkHealth func() error
	// Recorder, if set, receives the kubelet's pod events (Pulling,
	// Pulled, Created, Started, Killing, BackOff, Failed, …).
	Recorder Recorder
	// DNS, if set, builds each sandbox's DNS config from the pod's
	// dnsPolicy and dnsConfig; nil leaves resolv.conf to the runtime.
	DNS *dns.Config
	// Phases are run-chain steps after the built-in lifecycle hooks:
	// config mutators, post-start and pre-stop phases (see Phase).
	Phases []Phase
	// Probes, if set, gives the verdicts of the containers' startup and
	// liveness probes: a failed one has its container restarted.
	Probes pod.ProbeResults
	// Objects, set in API mode, reads ConfigMaps, Secrets, service
	// account tokens and service env vars; nil in standalone mode.
	Objects Objects
	// RuntimeClasses, set in API mode, gives the runtime handler of a
	// pod's runtimeClassName; nil in standalone mode, where a pod naming a
	// RuntimeClass gets no sandbox (see runtimeHandler).
	RuntimeClasses RuntimeClasses
	// PullSecretsDir, in standalone mode, holds the imagePullSecrets:
	// <dir>/<namespace>/<name>, each a .dockerconfigjson file.
	PullSecretsDir string
	// DockerConfigPaths are the node-wide docker config files; the first
	// readable one serves every pull after the pod's pull secrets
	// (DefaultDockerConfigPaths).
	DockerConfigPaths []string
	// Images pulls images (limit, shared pulls, size); when nil, a
	// serializing one over Client.
	Images *images.Puller
	// Volumes owns the pod directories: the containers' volume mounts and
	// /etc/hosts, the refresh of rendered volumes, the removal of
	// directories of gone pods. Give one over the same RootDir, NodeIP
	// and Objects; when nil, one is made from them.
	Volumes *podvolumes.Manager
	// Allocations, if set, is the allocation manager: the resources each
	// pod's containers are allocated (in-place resize), and the records of
	// what was applied to running containers. When nil, every spec is
	// allocated as it is and the records are kept in memory only.
	Allocations Allocations
	// ContainerGCMinAge is how long a dead container is kept at least,
	// from its creation (--minimum-container-ttl-duration; 0: no minimum).
	ContainerGCMinAge time.Duration
	// ContainerGCMaxPerPodContainer is how many dead instances of each
	// container of a live pod are kept, the newest ones
	// (--maximum-dead-containers-per-container; the kubelet's default is
	// 1; < 0: no limit). The newest instance is kept whatever its state:
	// it carries the restart count.
	ContainerGCMaxPerPodContainer int
	// ContainerGCMaxContainers is the node's limit of dead containers
	// (--maximum-dead-containers); only -1, no limit, is implemented: the
	// agent refuses other values at start.
	ContainerGCMaxContainers int
	// Security profiles, /etc/hosts: see security.go (the hosts file
	// itself is written by Volumes).
	SpecConfig
}

// Recorder receives events about pods. Called from pod workers
// concurrently.
type Recorder interface {
	Event(p *v1.Pod, eventType, reason, message string)
}

// Runtime drives pods on a CRI runtime.
type Runtime struct {
	cfg  Config
	c    Client
	log  *zap.Logger
	node downward.Node // what env vars read of the node
	// phases is the run chain: the lifecycle hooks, then Config.Phases.
	phases []Phase
	alloc  Allocations
	// version is the runtime's, asked once for what it supports
	// (imageVolumeSupport).
	versionMu sync.Mutex
	version   *runtimeapi.VersionResponse
	versionAt time.Time
	// features is the runtime's, asked at most once a minute.
	features featuresCache
}

// New validates cfg and returns a Runtime.
func New(cfg Config) (*Runtime, error) {
	if cfg.Client == nil || cfg.Logger == nil || cfg.Clock == nil || cfg.RootDir == "" || cfg.PodLogsDir == "" {
		return nil, errors.New("cri runtime: Client, Logger, Clock, RootDir and PodLogsDir are required")
	}
	// Pod directories are removed by path: work with the roots as the
	// kernel sees them (symlinks resolved), so that mounts beneath them
	// are recognised as such.
	cfg.RootDir, cfg.PodLogsDir = volume.Canonical(cfg.RootDir), volume.Canonical(cfg.PodLogsDir)
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.PullTimeout <= 0 {
		cfg.PullTimeout = 5 * time.Minute
	}
	if cfg.CrashLoop == nil {
		cfg.CrashLoop = backoff.New(cfg.Clock, 10*time.Second, 300*time.Second, 10*time.Minute)
	}
	if cfg.ImagePull == nil {
		cfg.ImagePull = backoff.New(cfg.Clock, 10*time.Second, 300*time.Second, 0)
	}
	if cfg.Images == nil {
		clk, ok := cfg.Clock.(clock.WithTicker)
		if !ok {
			return nil, errors.New("cri runtime: give Images, or a Clock with tickers")
		}
		p, err := images.NewPuller(images.PullerConfig{Client: cfg.Client, Clock: clk, Logger: cfg.Logger, Serialize: true, StatusTimeout: cfg.CallTimeout})
		if err != nil {
			return nil, err
		}
		cfg.Images = p
	}
	if cfg.Volumes == nil {
		v, err := podvolumes.New(podvolumes.Config{RootDir: cfg.RootDir, NodeIP: cfg.NodeIP, Objects: cfg.Objects, Clock: cfg.Clock, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		cfg.Volumes = v
	}
	cfg.SpecConfig = cfg.SpecConfig.withDefaults(cfg.RootDir)
	r := &Runtime{cfg: cfg, c: cfg.Client, log: cfg.Logger.Named("cri"), node: downward.Node{IP: cfg.NodeIP, RootDir: cfg.RootDir, Allocatable: cfg.NodeAllocatable},
		alloc: cfg.Allocations}
	if r.alloc == nil {
		r.alloc = &specAllocations{}
	}
	// The run chain, assembled here and only here.
	r.phases = append([]Phase{lifecycleHooks{r}}, cfg.Phases...)
	return r, nil
}

func (r *Runtime) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.CallTimeout)
}

// PodLogDir is where a pod's container logs live.
func (r *Runtime) PodLogDir(p *v1.Pod) string { return r.podLogDir(p.Namespace, p.Name, p.UID) }

// podLogDir is <PodLogsDir>/<ns>_<name>_<uid>, the kubelet's layout.
func (r *Runtime) podLogDir(namespace, name string, uid types.UID) string {
	return volume.ChildDir(r.cfg.PodLogsDir, namespace+"_"+name+"_"+string(uid))
}

func (r *Runtime) event(p *v1.Pod, eventType, reason, format string, args ...any) {
	if r.cfg.Recorder != nil && p != nil {
		r.cfg.Recorder.Event(p, eventType, reason, fmt.Sprintf(format, args...))
	}
}

// GC forgets backoff entries nobody used for long.
func (r *Runtime) GC() {
	r.cfg.CrashLoop.GC()
	r.cfg.ImagePull.GC()
}
