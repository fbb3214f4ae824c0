package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/internal/node"
)

// options are nodeagent's settings: one KubeletConfiguration, onto whose
// fields the flags are registered as the kubelet's are
// (cmd/kubelet/app/options.AddKubeletConfigFlags), and the few flags
// that have no field. A --config file is decoded into the same
// KubeletConfiguration and the command line parsed again on top of it,
// so flags given win, as with the kubelet; /configz serves that same
// KubeletConfiguration. Flags, --config and /configz cannot drift.
type options struct {
	kubeletv1beta1.KubeletConfiguration
	agentFlags
	// configWarnings name the config file's fields nodeagent does not
	// implement (logged at start: never silently ignored; left out of
	// the effective configuration).
	configWarnings []string
	// derived holds what complete computes from the settings, in the
	// types the rest of the agent takes.
	derived
}

// agentFlags are the settings with no KubeletConfiguration field: the
// kubelet's own flags of that kind (KubeletFlags) and nodeagent's.
type agentFlags struct {
	configFile          string
	kubeconfig          string
	bootstrapKubeconfig string
	certDir             string
	rootDir             string
	statusDir           string
	hostnameOverride    string
	nodeIP              string
	nodeLabels          map[string]string
	imagePullTimeout    time.Duration
	// cniConfDirGiven and cniBinDirGiven: on the command line, where
	// nodeagent checks that dir rather than the runtime's.
	cniConfDir, cniBinDir           string
	cniConfDirGiven, cniBinDirGiven bool
	cniGCPeriod                     time.Duration
	eventedPLEG                     bool
	adoptKubeletPods                bool
	manifestPermissions             string
	allowPrivileged                 bool
	hostNetworkSources              []string
	hostPIDSources                  []string
	hostIPCSources                  []string
	evictionMonitoringPeriod        time.Duration
	imageGCPeriod                   time.Duration
	podInfraContainerImage          string
	pullSecretsDir                  string
	// kubeAPIQPSExact is a fractional --kube-api-qps as given (the
	// config's field is an int32); 0 when the flag was not given.
	kubeAPIQPSExact float64
	// Container GC (the kubelet's deprecated flags, no config field).
	minimumContainerTTL time.Duration
	maxDeadPerContainer int32
	maxDeadContainers   int32
}

// derived are the settings in other types, computed once by complete.
type derived struct {
	reserved             []v1.ResourceList // --kube-reserved, --system-reserved (and --reserved-cpus)
	hardThresholds       []node.Threshold
	softThresholds       []node.Threshold
	softGrace            map[string]time.Duration
	reservedCPUSet       cpuset.CPUSet
	containerLogMaxBytes int64
	kubeAPIQPS           float32
}

// newOptions are the defaults: the flags' defaults, as docs/flags.md
// shows them.
func newOptions() *options {
	kc := kubeletv1beta1.KubeletConfiguration{RotateCertificates: true}
	setDefaults(&kc)
	return &options{KubeletConfiguration: kc, agentFlags: defaultAgentFlags()}
}

func defaultAgentFlags() agentFlags {
	return agentFlags{
		rootDir: "/var/lib/kubelet", imagePullTimeout: 5 * time.Minute,
		cniConfDir: "/etc/cni/net.d", cniBinDir: "/opt/cni/bin", cniGCPeriod: 30 * time.Second,
		eventedPLEG: true, manifestPermissions: "warn", allowPrivileged: true,
		hostNetworkSources: []string{"*"}, hostPIDSources: []string{"*"}, hostIPCSources: []string{"*"},
		evictionMonitoringPeriod: 10 * time.Second, imageGCPeriod: 5 * time.Minute,
		maxDeadPerContainer: 1, maxDeadContainers: -1,
	}
}

// setDefaults fills the fields a config leaves unset with nodeagent's
// defaults, as the kubelet's SetDefaults_KubeletConfiguration: an empty
// string, a zero number or duration, a nil pointer or an empty map is
// unset (a pointer set to false or 0 is a value).
func setDefaults(kc *kubeletv1beta1.KubeletConfiguration) {
	kc.TypeMeta = metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: "kubelet.config.k8s.io/v1beta1"}
	str := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	dur := func(p *metav1.Duration, v time.Duration) {
		if p.Duration == 0 {
			p.Duration = v
		}
	}
	durPtr := func(p **metav1.Duration, v time.Duration) {
		if *p == nil || (*p).Duration == 0 {
			*p = &metav1.Duration{Duration: v}
		}
	}
	i32 := func(p *int32, v int32) {
		if *p == 0 {
			*p = v
		}
	}
	i32Ptr := func(p **int32, v int32) {
		if *p == nil {
			*p = &v
		}
	}
	boolPtr := func(p **bool, v bool) {
		if *p == nil {
			*p = &v
		}
	}
	dur(&kc.FileCheckFrequency, 20*time.Second)
	dur(&kc.HTTPCheckFrequency, 20*time.Second)
	dur(&kc.SyncFrequency, time.Minute)
	str(&kc.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock")
	dur(&kc.RuntimeRequestTimeout, 2*time.Minute)
	str(&kc.PodLogsDir, "/var/log/pods")
	i32(&kc.MaxPods, 110)
	str(&kc.CPUManagerPolicy, "none")
	dur(&kc.CPUManagerReconcilePeriod, 10*time.Second)
	durPtr(&kc.CrashLoopBackOff.MaxContainerRestartPeriod, 300*time.Second)
	str(&kc.HealthzBindAddress, "127.0.0.1")
	i32Ptr(&kc.HealthzPort, 10248)
	str(&kc.ClusterDomain, "cluster.local")
	if kc.ResolverConfig == nil {
		kc.ResolverConfig = new("/etc/resolv.conf")
	}
	boolPtr(&kc.SeccompDefault, false)
	boolPtr(&kc.CgroupsPerQOS, true)
	str(&kc.CgroupRoot, "/")
	str(&kc.CgroupDriver, "cgroupfs")
	if kc.PodPidsLimit == nil {
		kc.PodPidsLimit = new(int64(-1))
	}
	if kc.EnforceNodeAllocatable == nil {
		kc.EnforceNodeAllocatable = []string{"pods"}
	}
	str(&kc.ContainerLogMaxSize, "10Mi")
	i32Ptr(&kc.ContainerLogMaxFiles, 5)
	i32Ptr(&kc.ContainerLogMaxWorkers, 1)
	durPtr(&kc.ContainerLogMonitorInterval, 10*time.Second)
	boolPtr(&kc.SerializeImagePulls, true)
	i32Ptr(&kc.MaxParallelImagePulls, 0)
	i32Ptr(&kc.ImageGCHighThresholdPercent, 85)
	i32Ptr(&kc.ImageGCLowThresholdPercent, 80)
	dur(&kc.ImageMinimumGCAge, 2*time.Minute)
	setNodeDefaults(kc, dur, i32, boolPtr)
	setServerDefaults(kc, str, i32, boolPtr)
}

// setNodeDefaults: the Node, its Lease, the API client and eviction.
func setNodeDefaults(kc *kubeletv1beta1.KubeletConfiguration, dur func(*metav1.Duration, time.Duration), i32 func(*int32, int32), boolPtr func(**bool, bool)) {
	if kc.KubeAPIQPS == nil || *kc.KubeAPIQPS == 0 {
		kc.KubeAPIQPS = new(int32(50))
	}
	i32(&kc.KubeAPIBurst, 100)
	boolPtr(&kc.RegisterNode, true)
	dur(&kc.NodeStatusUpdateFrequency, 10*time.Second)
	dur(&kc.NodeStatusReportFrequency, 5*time.Minute)
	i32(&kc.NodeLeaseDurationSeconds, 40)
	if len(kc.EvictionHard) == 0 {
		kc.EvictionHard = splitMap(node.DefaultEvictionHard, "<")
	}
	dur(&kc.EvictionPressureTransitionPeriod, 5*time.Minute)
}

// setServerDefaults: the node server, its TLS, authentication and
// authorization (the webhook caches' TTLs are fixed: not settable).
func setServerDefaults(kc *kubeletv1beta1.KubeletConfiguration, str func(*string, string), i32 func(*int32, int32), boolPtr func(**bool, bool)) {
	str(&kc.Address, "0.0.0.0")
	i32(&kc.Port, 10250)
	str(&kc.TLSMinVersion, "VersionTLS12")
	boolPtr(&kc.Authentication.Anonymous.Enabled, false)
	boolPtr(&kc.Authentication.Webhook.Enabled, true)
	kc.Authentication.Webhook.CacheTTL = metav1.Duration{Duration: 2 * time.Minute}
	if kc.Authorization.Mode == "" {
		kc.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationModeWebhook
	}
	kc.Authorization.Webhook.CacheAuthorizedTTL = metav1.Duration{Duration: 5 * time.Minute}
	kc.Authorization.Webhook.CacheUnauthorizedTTL = metav1.Duration{Duration: 30 * time.Second}
}

// parseOptions parses args onto the defaults; with --config, the file is
// decoded into a KubeletConfiguration and args parsed again onto it, so
// the flags given win (the kubelet's kubeletConfigFlagPrecedence).
func parseOptions(args []string) (*options, error) {
	o := newOptions()
	fs, err := parseFlags(o, args)
	if err != nil {
		return nil, err
	}
	if o.configFile != "" {
		kc, warnings, err := loadConfigFile(o.configFile)
		if err != nil {
			return nil, err
		}
		o = &options{KubeletConfiguration: *kc, agentFlags: defaultAgentFlags(), configWarnings: warnings}
		if fs, err = parseFlags(o, args); err != nil {
			return nil, err
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "cni-conf-dir":
			o.cniConfDirGiven = true
		case "cni-bin-dir":
			o.cniBinDirGiven = true
		}
	})
	return o, o.complete()
}

func parseFlags(o *options, args []string) (*flag.FlagSet, error) {
	fs := newFlagSet(o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return fs, nil
}

// loadConfigFile decodes a KubeletConfiguration file (strictly: an
// unknown field is an error), names the set fields nodeagent does not
// implement, and returns the config of only the implemented ones with
// the defaults filled in.
func loadConfigFile(path string) (*kubeletv1beta1.KubeletConfiguration, []string, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read config file: %w", err)
	}
	var full kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(body, &full); err != nil {
		return nil, nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if full.Kind != "KubeletConfiguration" || full.APIVersion != "kubelet.config.k8s.io/v1beta1" {
		return nil, nil, fmt.Errorf("config file %s: want kind KubeletConfiguration, apiVersion kubelet.config.k8s.io/v1beta1; got %q %q", path, full.Kind, full.APIVersion)
	}
	raw := map[string]any{}
	if err := yaml.Unmarshal(body, &raw); err != nil {
		return nil, nil, fmt.Errorf("config file %s: %w", path, err)
	}
	honoured, err := json.Marshal(honouredOnly("", raw))
	if err != nil {
		return nil, nil, fmt.Errorf("config file %s: %w", path, err)
	}
	// rotateCertificates is a plain bool whose default is true: false
	// is only what the file says.
	kc := kubeletv1beta1.KubeletConfiguration{RotateCertificates: true}
	if err := json.Unmarshal(honoured, &kc); err != nil {
		return nil, nil, fmt.Errorf("config file %s: %w", path, err)
	}
	setDefaults(&kc)
	return &kc, unimplementedFields(raw), nil
}

// splitMap parses "k<sep>v,k<sep>v" (entries without sep are skipped).
func splitMap(s, sep string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), sep); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}
