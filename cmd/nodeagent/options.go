package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	"k8s.io/utils/cpuset"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/internal/node"
)

// options are nodeagent's settings. Flag names follow the kubelet's
// wherever one exists; a --config file in the KubeletConfiguration shape
// sets the same settings, and flags given on the command line win over it,
// as with the kubelet.
type options struct {
	configFile string
	// configWarnings name the config file's fields nodeagent does not
	// implement (logged at start: never silently ignored).
	configWarnings           []string
	manifestDir              string
	fileCheckFrequency       time.Duration
	manifestURL              string
	manifestURLHeader        kvFlag
	httpCheckFrequency       time.Duration
	syncFrequency            time.Duration
	containerRuntimeEndpoint string
	runtimeRequestTimeout    time.Duration
	imagePullTimeout         time.Duration
	rootDir                  string
	podLogsDir               string
	statusDir                string
	hostnameOverride         string
	nodeIP                   string
	maxPods                  int
	podCIDR                  string
	cniConfDir               string
	cniBinDir                string
	cniConfDirGiven          bool // on the command line: nodeagent checks that dir
	cniBinDirGiven           bool
	cniGCPeriod              time.Duration
	cpuManagerPolicy         string
	reservedCPUs             string
	// CPU manager (internal/cpumanager): options, reconcile period, and
	// --reserved-cpus parsed by validate.
	cpuManagerPolicyOptions   kvFlag
	cpuManagerReconcilePeriod time.Duration
	reservedCPUSet            cpuset.CPUSet
	nodeLabels                kvFlag
	maxRestartBackoff         time.Duration
	eventedPLEG               bool
	manifestPermissions       string
	healthzBindAddress        string
	healthzPort               int
	clusterDomain             string
	clusterDNS                []string
	allowPrivileged           bool
	allowedUnsafeSysctls      []string
	hostNetworkSources        []string
	hostPIDSources            []string
	hostIPCSources            []string
	resolvConf                string
	seccompDefault            bool
	verbosity                 int

	// API mode.
	kubeconfig                 string
	bootstrapKubeconfig        string
	certDir                    string
	rotateCertificates         bool
	rotateServerCertificates   bool
	kubeAPIQPS                 float64
	kubeAPIBurst               int
	registerNode               bool
	registerWithTaints         string
	taints                     []v1.Taint
	nodeStatusUpdateFrequency  time.Duration
	nodeStatusReportFrequency  time.Duration
	nodeLeaseDurationSeconds   int
	port                       int
	kubeReserved               kvFlag
	systemReserved             kvFlag
	evictionHard               string
	evictionSoft               string
	evictionSoftGracePeriod    string
	evictionPressureTransition time.Duration
	evictionMaxPodGracePeriod  int64
	evictionMonitoringPeriod   time.Duration
	softThresholds             []node.Threshold
	softGrace                  map[string]time.Duration
	reserved                   []v1.ResourceList
	hardThresholds             []node.Threshold

	// Pod cgroups (internal/cm).
	cgroupsPerQOS          bool
	cgroupRoot             string
	cgroupDriver           string
	enforceNodeAllocatable []string

	// Container log rotation (internal/logs); the size is a quantity
	// string, parsed into containerLogMaxBytes by validate.
	containerLogMaxSize         string
	containerLogMaxBytes        int64
	containerLogMaxFiles        int
	containerLogMaxWorkers      int
	containerLogMonitorInterval time.Duration

	// Image manager (internal/images): pulls and image GC.
	serializeImagePulls    bool
	maxParallelImagePulls  int
	imageGCHighThreshold   int
	imageGCLowThreshold    int
	imageMinimumGCAge      time.Duration
	imageMaximumGCAge      time.Duration
	imageGCPeriod          time.Duration
	podInfraContainerImage string
	pullSecretsDir         string

	// Node server (internal/server), API mode only.
	readOnlyPort      int
	address           string
	tlsCertFile       string
	tlsPrivateKeyFile string
	tlsMinVersion     string
	tlsCipherSuites   []string
	clientCAFile      string
	anonymousAuth     bool
	authnTokenWebhook bool
	authorizationMode string
}

// kvFlag is a "k<sep>v,k<sep>v" flag: node labels (=) and HTTP headers (:).
type kvFlag struct {
	m   map[string]string
	sep string
}

func (f *kvFlag) String() string {
	var parts []string
	for k, v := range f.m {
		parts = append(parts, k+f.sep+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (f *kvFlag) Set(s string) error {
	if f.m == nil {
		f.m = map[string]string{}
	}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, f.sep)
		if !ok {
			return fmt.Errorf("%q: want key%svalue", kv, f.sep)
		}
		f.m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return nil
}

func newFlagSet(o *options) *flag.FlagSet {
	o.nodeLabels.sep, o.manifestURLHeader.sep, o.kubeReserved.sep, o.systemReserved.sep = "=", ":", "=", "="
	o.cpuManagerPolicyOptions.sep = "="
	fs := flag.NewFlagSet("nodeagent", flag.ContinueOnError)
	fs.StringVar(&o.configFile, "config", "", "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); command-line flags override it")
	fs.StringVar(&o.manifestDir, "manifest-dir", "", "directory of static pod manifests (YAML or JSON)")
	fs.StringVar(&o.manifestDir, "pod-manifest-path", "", "alias of --manifest-dir (kubelet's name)")
	fs.DurationVar(&o.fileCheckFrequency, "file-check-frequency", 20*time.Second, "period of the manifest directory re-list that catches missed inotify events")
	fs.StringVar(&o.manifestURL, "manifest-url", "", "URL serving static pod manifests (YAML/JSON documents or a PodList), polled")
	fs.Var(&o.manifestURLHeader, "manifest-url-header", "HTTP headers for --manifest-url: 'Name:value,Other:value'")
	fs.DurationVar(&o.httpCheckFrequency, "http-check-frequency", 20*time.Second, "poll period of --manifest-url")
	fs.DurationVar(&o.syncFrequency, "sync-frequency", time.Minute, "longest time between two syncs of a running pod")
	fs.StringVar(&o.containerRuntimeEndpoint, "container-runtime-endpoint", "unix:///run/containerd/containerd.sock", "CRI endpoint (unix socket)")
	fs.DurationVar(&o.runtimeRequestTimeout, "runtime-request-timeout", 2*time.Minute, "timeout of every CRI call but image pulls")
	fs.DurationVar(&o.imagePullTimeout, "image-pull-timeout", 5*time.Minute, "timeout of one image pull")
	fs.StringVar(&o.rootDir, "root-dir", "/var/lib/nodeagent", "directory for pod volumes and agent state")
	fs.StringVar(&o.podLogsDir, "pod-logs-dir", "/var/log/pods", "root of container log files: <dir>/<ns>_<name>_<uid>/<container>/<restart>.log")
	fs.StringVar(&o.statusDir, "status-dir", "", "where pod statuses are published (default <root-dir>/status)")
	fs.StringVar(&o.hostnameOverride, "hostname-override", "", "node name instead of the host name")
	fs.StringVar(&o.nodeIP, "node-ip", "", "node IP reported as hostIP (default: first non-loopback IPv4)")
	fs.IntVar(&o.maxPods, "max-pods", 110, "most pods this node runs")
	fs.StringVar(&o.podCIDR, "pod-cidr", "", "the node's pod CIDR(s), comma-separated for dual stack; passed to the runtime and used for the node's CNI conflist when --cni-conf-dir holds none (or only the one nodeagent wrote)")
	fs.StringVar(&o.cniConfDir, "cni-conf-dir", "/etc/cni/net.d", "CNI config dir the runtime uses; nodeagent validates the config there (and writes --pod-cidr's conflist there). Not given: it validates the dir the runtime names over CRI (containerd does), else none. A problem found is logged; whether pods wait for the network is the runtime's NetworkReady alone, as with the kubelet")
	fs.StringVar(&o.cniBinDir, "cni-bin-dir", "/opt/cni/bin", "CNI plugin dir the runtime uses, for nodeagent's validation; not given: the runtime's, when it names them")
	fs.DurationVar(&o.cniGCPeriod, "cni-gc-period", 30*time.Second, "period of CNI GC: pod IPs and attachments leaked by crashes, of no ready sandbox of the runtime and older than a minute, are released; 0 disables it")
	fs.StringVar(&o.cpuManagerPolicy, "cpu-manager-policy", "none", "CPU manager policy: none or static (exclusive CPUs for Guaranteed pods' whole-CPU containers)")
	fs.StringVar(&o.reservedCPUs, "reserved-cpus", "", "CPUs kept out of exclusive allocation, e.g. 0,1 or 0-1 (static policy; default: ceil of kube + system reserved cpu, lowest CPUs)")
	fs.Var(&o.cpuManagerPolicyOptions, "cpu-manager-policy-options", "static policy options: full-pcpus-only=true")
	fs.DurationVar(&o.cpuManagerReconcilePeriod, "cpu-manager-reconcile-period", 10*time.Second, "how often the CPU manager re-applies containers' cpusets")
	fs.Var(&o.nodeLabels, "node-labels", "node labels key=value,… (nodeSelector and node affinity are judged against them)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "the node's kubeconfig: API mode (pods bound to this node, Node object, Lease, statuses, events); written by TLS bootstrap when --bootstrap-kubeconfig is given")
	fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", "", "kubeconfig whose credential may create a CSR for the node's client certificate (TLS bootstrap)")
	fs.StringVar(&o.certDir, "cert-dir", "", "where the node's certificates are kept (default <root-dir>/pki)")
	fs.BoolVar(&o.rotateCertificates, "rotate-certificates", true, "request a new client certificate before the current one expires")
	fs.BoolVar(&o.rotateServerCertificates, "rotate-server-certificates", false, "request the node server's certificate from the API server with a CSR (signer kubernetes.io/kubelet-serving, to be approved: kubectl certificate approve) and renew it before it expires; --tls-cert-file, if given, is served until the first one is issued")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", 50, "queries per second to the API server")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "burst of queries to the API server")
	fs.BoolVar(&o.registerNode, "register-node", true, "create the Node object when it does not exist")
	fs.StringVar(&o.registerWithTaints, "register-with-taints", "", "taints of a newly registered Node: key=value:Effect,…")
	fs.DurationVar(&o.nodeStatusUpdateFrequency, "node-status-update-frequency", 10*time.Second, "how often the node status is computed and posted when it changed")
	fs.DurationVar(&o.nodeStatusReportFrequency, "node-status-report-frequency", 5*time.Minute, "how often the node status is posted when it did not change")
	fs.IntVar(&o.nodeLeaseDurationSeconds, "node-lease-duration-seconds", 40, "duration of the node's Lease; renewed every quarter of it")
	fs.IntVar(&o.port, "port", 10250, "the node server's port (API mode), published in the Node's daemonEndpoints")
	fs.StringVar(&o.address, "address", "0.0.0.0", "the node server's address")
	fs.IntVar(&o.readOnlyPort, "read-only-port", 0, "plain-HTTP port on --address serving /healthz, /pods, /stats/summary, /metrics and /metrics/resource with no authentication (either mode); 0 (default) disables it")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", "", "the node server's certificate (default: <cert-dir>/kubelet.crt, self-signed at first start)")
	fs.StringVar(&o.tlsPrivateKeyFile, "tls-private-key-file", "", "the key of --tls-cert-file")
	fs.StringVar(&o.tlsMinVersion, "tls-min-version", "VersionTLS12", "the node server's minimum TLS version: VersionTLS12 or VersionTLS13")
	fs.StringVar(&o.clientCAFile, "client-ca-file", "", "CA bundle the node server verifies client certificates against (the API server's --kubelet-client-certificate); without it, client certificates are not accepted")
	fs.BoolVar(&o.anonymousAuth, "anonymous-auth", false, "let requests to the node server without credentials in as system:anonymous (group system:unauthenticated), still subject to authorization")
	fs.BoolVar(&o.authnTokenWebhook, "authentication-token-webhook", true, "accept bearer tokens at the node server, reviewed by the API server (TokenReview, cached 2m)")
	fs.StringVar(&o.authorizationMode, "authorization-mode", "Webhook", "node server authorization: Webhook (SubjectAccessReview, allowed cached 5m, denied 30s) or AlwaysAllow")
	fs.Var(&o.kubeReserved, "kube-reserved", "resources reserved for Kubernetes daemons: cpu=…,memory=…,ephemeral-storage=…,pid=…")
	fs.Var(&o.systemReserved, "system-reserved", "resources reserved for the system: cpu=…,memory=…,ephemeral-storage=…,pid=…")
	fs.StringVar(&o.evictionSoft, "eviction-soft", "", "soft eviction thresholds (signal<quantity or percent), acted on once held for their --eviction-soft-grace-period")
	fs.StringVar(&o.evictionSoftGracePeriod, "eviction-soft-grace-period", "", "signal=duration,… for each --eviction-soft threshold")
	fs.DurationVar(&o.evictionPressureTransition, "eviction-pressure-transition-period", 5*time.Minute, "how long a pressure condition stays after its threshold was last crossed")
	fs.Int64Var(&o.evictionMaxPodGracePeriod, "eviction-max-pod-grace-period", 0, "most grace (seconds) a pod evicted for a soft threshold gets; 0: its own")
	fs.DurationVar(&o.evictionMonitoringPeriod, "eviction-monitoring-period", 10*time.Second, "how often the node's signals are read and at most one pod evicted (the kubelet's housekeeping period; not a kubelet flag)")
	fs.StringVar(&o.evictionHard, "eviction-hard", node.DefaultEvictionHard, "hard eviction thresholds, subtracted from capacity for allocatable")
	fs.DurationVar(&o.maxRestartBackoff, "max-container-restart-period", 300*time.Second, "cap of the CrashLoopBackOff delay")
	fs.BoolVar(&o.eventedPLEG, "evented-pleg", true, "follow the runtime's container event stream (CRI GetContainerEvents) and relist every 10s only as a safety net; without it, or on runtimes lacking the stream, relist every second")
	fs.StringVar(&o.manifestPermissions, "manifest-permissions", "warn", "a manifest (or manifest directory) writable by others than root: 'warn' logs it, 'refuse' ignores the file and lists it as a problem")
	fs.StringVar(&o.healthzBindAddress, "healthz-bind-address", "127.0.0.1", "address of the /healthz and /metrics endpoint")
	fs.IntVar(&o.healthzPort, "healthz-port", 10248, "port of the /healthz and /metrics endpoint; 0 disables it")
	fs.BoolVar(&o.allowPrivileged, "allow-privileged", true, "let pods with privileged containers run (false: such pods are kept Pending, reason Forbidden)")
	list := func(dst *[]string, def []string) func(string) error {
		*dst = def
		return func(v string) error {
			*dst = nil
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					*dst = append(*dst, s)
				}
			}
			return nil
		}
	}
	fs.Func("tls-cipher-suites", "the node server's TLS 1.2 cipher suites, by Go name, comma-separated (default: Go's secure defaults)", list(&o.tlsCipherSuites, nil))
	fs.Func("allowed-unsafe-sysctls", "unsafe sysctls (names, or prefixes ending in *) pods may set beyond the safe set; others are refused (SysctlForbidden)", list(&o.allowedUnsafeSysctls, nil))
	fs.Func("host-network-sources", "pod sources (file, http, api; * for all) whose pods may use the host's network namespace", list(&o.hostNetworkSources, []string{"*"}))
	fs.Func("host-pid-sources", "pod sources whose pods may use the host's PID namespace", list(&o.hostPIDSources, []string{"*"}))
	fs.Func("host-ipc-sources", "pod sources whose pods may use the host's IPC namespace", list(&o.hostIPCSources, []string{"*"}))
	fs.BoolVar(&o.cgroupsPerQOS, "cgroups-per-qos", true, "make the kubelet's cgroup hierarchy: kubepods, its burstable and besteffort tiers and a cgroup per pod with the pod's limits, the runtime's cgroup parent for the pod; false: the runtime's default cgroups")
	fs.StringVar(&o.cgroupRoot, "cgroup-root", "/", "cgroup under which kubepods is made")
	fs.StringVar(&o.cgroupDriver, "cgroup-driver", "cgroupfs", "cgroup driver (cgroupfs; systemd is refused); the runtime's, when its CRI RuntimeConfig reports one, wins")
	fs.Func("enforce-node-allocatable", "where node allocatable is enforced: pods (kubepods limited to capacity minus --kube-reserved and --system-reserved), or none", list(&o.enforceNodeAllocatable, []string{"pods"}))
	fs.Func("cluster-dns", "cluster DNS server IPs (comma-separated) for pods with dnsPolicy ClusterFirst; without, such pods fall back to Default with a MissingClusterDNS event, as the kubelet's", func(v string) error {
		o.clusterDNS = nil
		for _, ip := range strings.Split(v, ",") {
			if ip = strings.TrimSpace(ip); ip == "" {
				continue
			}
			if net.ParseIP(ip) == nil {
				return fmt.Errorf("%q is not an IP address", ip)
			}
			o.clusterDNS = append(o.clusterDNS, ip)
		}
		return nil
	})
	fs.StringVar(&o.resolvConf, "resolv-conf", "/etc/resolv.conf", "the resolver file pods with dnsPolicy Default get (and whose search domains ClusterFirst pods add); \"\" for none")
	fs.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain: a pod with a subdomain finds <hostname>.<subdomain>.<namespace>.svc.<domain> in its /etc/hosts")
	fs.BoolVar(&o.seccompDefault, "seccomp-default", false, "run containers whose pod and container set no seccompProfile with the runtime's default profile (RuntimeDefault) instead of Unconfined")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity: 0 info, 4 and more debug")
	fs.StringVar(&o.containerLogMaxSize, "container-log-max-size", "10Mi", "size (a quantity: 10Mi, 500Ki) at which a container's log file is rotated")
	fs.IntVar(&o.containerLogMaxFiles, "container-log-max-files", 5, "most log files a container keeps, the live one included (>= 2)")
	fs.IntVar(&o.containerLogMaxWorkers, "container-log-max-workers", 1, "containers whose logs are rotated at once")
	fs.DurationVar(&o.containerLogMonitorInterval, "container-log-monitor-interval", 10*time.Second, "period of the full pass over the containers' log files (growing files are also checked in between)")
	fs.BoolVar(&o.serializeImagePulls, "serialize-image-pulls", true, "pull one image at a time")
	fs.IntVar(&o.maxParallelImagePulls, "max-parallel-image-pulls", 0, "most image pulls at once with --serialize-image-pulls=false; 0 is unlimited")
	fs.IntVar(&o.imageGCHighThreshold, "image-gc-high-threshold", 85, "image file system usage (percent) at which image garbage collection runs; 100 turns it off")
	fs.IntVar(&o.imageGCLowThreshold, "image-gc-low-threshold", 80, "image file system usage (percent) image garbage collection frees down to")
	fs.DurationVar(&o.imageMinimumGCAge, "image-minimum-gc-age", 2*time.Minute, "an unused image is kept at least this long after it was first seen")
	fs.DurationVar(&o.imageMaximumGCAge, "image-maximum-gc-age", 0, "an image unused for this long is removed whatever the disk usage; 0 turns it off")
	fs.DurationVar(&o.imageGCPeriod, "image-gc-period", 5*time.Minute, "period of image garbage collection (the kubelet's fixed 5m; not a kubelet flag)")
	fs.StringVar(&o.podInfraContainerImage, "pod-infra-container-image", "", "sandbox image image garbage collection never removes (the runtime's own setting chooses the image; runtimes pin it too)")
	fs.StringVar(&o.pullSecretsDir, "pull-secrets-dir", "", "standalone mode: imagePullSecrets as files <dir>/<namespace>/<name> in the .dockerconfigjson format (not a kubelet flag)")
	return fs
}

// parseOptions parses args; the config file fills what the command line
// did not set.
func parseOptions(args []string) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	o.cniConfDirGiven, o.cniBinDirGiven = set["cni-conf-dir"], set["cni-bin-dir"]
	if set["pod-manifest-path"] {
		set["manifest-dir"] = true
	}
	if o.configFile != "" {
		if err := applyConfigFile(o, o.configFile, set); err != nil {
			return nil, err
		}
	}
	return o, o.validate()
}

// applyConfigFile reads a KubeletConfiguration and applies each field the
// command line did not set.
func applyConfigFile(o *options, path string, set map[string]bool) error {
	body, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read config file: %w", err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(body, &kc); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if kc.Kind != "KubeletConfiguration" || kc.APIVersion != "kubelet.config.k8s.io/v1beta1" {
		return fmt.Errorf("config file %s: want kind KubeletConfiguration, apiVersion kubelet.config.k8s.io/v1beta1; got %q %q", path, kc.Kind, kc.APIVersion)
	}
	str := func(flag string, dst *string, v string) {
		if !set[flag] && v != "" {
			*dst = v
		}
	}
	dur := func(flag string, dst *time.Duration, v time.Duration) {
		if !set[flag] && v != 0 {
			*dst = v
		}
	}
	str("manifest-dir", &o.manifestDir, kc.StaticPodPath)
	str("manifest-url", &o.manifestURL, kc.StaticPodURL)
	dur("http-check-frequency", &o.httpCheckFrequency, kc.HTTPCheckFrequency.Duration)
	if !set["manifest-url-header"] && len(kc.StaticPodURLHeader) > 0 {
		o.manifestURLHeader.m = map[string]string{}
		for k, vs := range kc.StaticPodURLHeader {
			if len(vs) > 0 {
				o.manifestURLHeader.m[k] = vs[0]
			}
		}
	}
	str("container-runtime-endpoint", &o.containerRuntimeEndpoint, kc.ContainerRuntimeEndpoint)
	str("pod-cidr", &o.podCIDR, kc.PodCIDR)
	str("cpu-manager-policy", &o.cpuManagerPolicy, kc.CPUManagerPolicy)
	str("reserved-cpus", &o.reservedCPUs, kc.ReservedSystemCPUs)
	dur("cpu-manager-reconcile-period", &o.cpuManagerReconcilePeriod, kc.CPUManagerReconcilePeriod.Duration)
	if !set["cpu-manager-policy-options"] && len(kc.CPUManagerPolicyOptions) > 0 {
		o.cpuManagerPolicyOptions.m = kc.CPUManagerPolicyOptions
	}
	str("pod-logs-dir", &o.podLogsDir, kc.PodLogsDir)
	str("cluster-domain", &o.clusterDomain, kc.ClusterDomain)
	if !set["resolv-conf"] && kc.ResolverConfig != nil {
		o.resolvConf = *kc.ResolverConfig
	}
	if !set["allowed-unsafe-sysctls"] && len(kc.AllowedUnsafeSysctls) > 0 {
		o.allowedUnsafeSysctls = kc.AllowedUnsafeSysctls
	}
	if !set["cluster-dns"] && len(kc.ClusterDNS) > 0 {
		o.clusterDNS = kc.ClusterDNS
	}
	str("cgroup-root", &o.cgroupRoot, kc.CgroupRoot)
	str("cgroup-driver", &o.cgroupDriver, kc.CgroupDriver)
	if !set["cgroups-per-qos"] && kc.CgroupsPerQOS != nil {
		o.cgroupsPerQOS = *kc.CgroupsPerQOS
	}
	if !set["enforce-node-allocatable"] && kc.EnforceNodeAllocatable != nil {
		o.enforceNodeAllocatable = kc.EnforceNodeAllocatable
	}
	if !set["seccomp-default"] && kc.SeccompDefault != nil {
		o.seccompDefault = *kc.SeccompDefault
	}
	str("healthz-bind-address", &o.healthzBindAddress, kc.HealthzBindAddress)
	str("address", &o.address, kc.Address)
	if !set["port"] && kc.Port != 0 {
		o.port = int(kc.Port)
	}
	if !set["read-only-port"] && kc.ReadOnlyPort != 0 {
		o.readOnlyPort = int(kc.ReadOnlyPort)
	}
	str("tls-cert-file", &o.tlsCertFile, kc.TLSCertFile)
	str("tls-private-key-file", &o.tlsPrivateKeyFile, kc.TLSPrivateKeyFile)
	str("tls-min-version", &o.tlsMinVersion, kc.TLSMinVersion)
	if !set["rotate-server-certificates"] && kc.ServerTLSBootstrap {
		o.rotateServerCertificates = true
	}
	if !set["tls-cipher-suites"] && len(kc.TLSCipherSuites) > 0 {
		o.tlsCipherSuites = kc.TLSCipherSuites
	}
	str("client-ca-file", &o.clientCAFile, kc.Authentication.X509.ClientCAFile)
	if !set["anonymous-auth"] && kc.Authentication.Anonymous.Enabled != nil {
		o.anonymousAuth = *kc.Authentication.Anonymous.Enabled
	}
	if !set["authentication-token-webhook"] && kc.Authentication.Webhook.Enabled != nil {
		o.authnTokenWebhook = *kc.Authentication.Webhook.Enabled
	}
	str("authorization-mode", &o.authorizationMode, string(kc.Authorization.Mode))
	if !set["healthz-port"] && kc.HealthzPort != nil {
		o.healthzPort = int(*kc.HealthzPort)
	}
	dur("file-check-frequency", &o.fileCheckFrequency, kc.FileCheckFrequency.Duration)
	dur("sync-frequency", &o.syncFrequency, kc.SyncFrequency.Duration)
	dur("runtime-request-timeout", &o.runtimeRequestTimeout, kc.RuntimeRequestTimeout.Duration)
	if kc.CrashLoopBackOff.MaxContainerRestartPeriod != nil {
		dur("max-container-restart-period", &o.maxRestartBackoff, kc.CrashLoopBackOff.MaxContainerRestartPeriod.Duration)
	}
	if !set["max-pods"] && kc.MaxPods != 0 {
		o.maxPods = int(kc.MaxPods)
	}
	str("container-log-max-size", &o.containerLogMaxSize, kc.ContainerLogMaxSize)
	if !set["container-log-max-files"] && kc.ContainerLogMaxFiles != nil {
		o.containerLogMaxFiles = int(*kc.ContainerLogMaxFiles)
	}
	if !set["container-log-max-workers"] && kc.ContainerLogMaxWorkers != nil {
		o.containerLogMaxWorkers = int(*kc.ContainerLogMaxWorkers)
	}
	if kc.ContainerLogMonitorInterval != nil {
		dur("container-log-monitor-interval", &o.containerLogMonitorInterval, kc.ContainerLogMonitorInterval.Duration)
	}
	if !set["serialize-image-pulls"] && kc.SerializeImagePulls != nil {
		o.serializeImagePulls = *kc.SerializeImagePulls
	}
	for _, f := range []struct {
		flag string
		dst  *int
		v    *int32
	}{
		{"max-parallel-image-pulls", &o.maxParallelImagePulls, kc.MaxParallelImagePulls},
		{"image-gc-high-threshold", &o.imageGCHighThreshold, kc.ImageGCHighThresholdPercent},
		{"image-gc-low-threshold", &o.imageGCLowThreshold, kc.ImageGCLowThresholdPercent},
	} {
		if !set[f.flag] && f.v != nil {
			*f.dst = int(*f.v)
		}
	}
	dur("image-minimum-gc-age", &o.imageMinimumGCAge, kc.ImageMinimumGCAge.Duration)
	dur("image-maximum-gc-age", &o.imageMaximumGCAge, kc.ImageMaximumGCAge.Duration)
	applyNodeFields(o, &kc, set)
	raw := map[string]any{}
	if err := yaml.Unmarshal(body, &raw); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	if _, given := raw["rotateCertificates"]; given && !set["rotate-certificates"] {
		o.rotateCertificates = kc.RotateCertificates
	}
	o.configWarnings = unimplementedFields(raw)
	return nil
}

// applyNodeFields applies the config file's node, eviction and API
// client fields the command line did not set.
func applyNodeFields(o *options, kc *kubeletv1beta1.KubeletConfiguration, set map[string]bool) {
	thresholds := func(flag string, dst *string, m map[string]string, op string) {
		if set[flag] || len(m) == 0 {
			return
		}
		parts := make([]string, 0, len(m))
		for k, v := range m {
			parts = append(parts, k+op+v)
		}
		sort.Strings(parts)
		*dst = strings.Join(parts, ",")
	}
	thresholds("eviction-hard", &o.evictionHard, kc.EvictionHard, "<")
	thresholds("eviction-soft", &o.evictionSoft, kc.EvictionSoft, "<")
	thresholds("eviction-soft-grace-period", &o.evictionSoftGracePeriod, kc.EvictionSoftGracePeriod, "=")
	if !set["eviction-pressure-transition-period"] && kc.EvictionPressureTransitionPeriod.Duration != 0 {
		o.evictionPressureTransition = kc.EvictionPressureTransitionPeriod.Duration
	}
	if !set["eviction-max-pod-grace-period"] && kc.EvictionMaxPodGracePeriod != 0 {
		o.evictionMaxPodGracePeriod = int64(kc.EvictionMaxPodGracePeriod)
	}
	for _, r := range []struct {
		flag string
		dst  *kvFlag
		m    map[string]string
	}{{"kube-reserved", &o.kubeReserved, kc.KubeReserved}, {"system-reserved", &o.systemReserved, kc.SystemReserved}} {
		if !set[r.flag] && len(r.m) > 0 {
			r.dst.m = maps.Clone(r.m)
		}
	}
	if !set["register-node"] && kc.RegisterNode != nil {
		o.registerNode = *kc.RegisterNode
	}
	if !set["register-with-taints"] && len(kc.RegisterWithTaints) > 0 {
		parts := make([]string, 0, len(kc.RegisterWithTaints))
		for _, t := range kc.RegisterWithTaints {
			parts = append(parts, t.ToString())
		}
		o.registerWithTaints = strings.Join(parts, ",")
	}
	for _, d := range []struct {
		flag string
		dst  *time.Duration
		v    time.Duration
	}{
		{"node-status-update-frequency", &o.nodeStatusUpdateFrequency, kc.NodeStatusUpdateFrequency.Duration},
		{"node-status-report-frequency", &o.nodeStatusReportFrequency, kc.NodeStatusReportFrequency.Duration},
	} {
		if !set[d.flag] && d.v != 0 {
			*d.dst = d.v
		}
	}
	if !set["node-lease-duration-seconds"] && kc.NodeLeaseDurationSeconds != 0 {
		o.nodeLeaseDurationSeconds = int(kc.NodeLeaseDurationSeconds)
	}
	if !set["kube-api-qps"] && kc.KubeAPIQPS != nil && *kc.KubeAPIQPS != 0 {
		o.kubeAPIQPS = float64(*kc.KubeAPIQPS)
	}
	if !set["kube-api-burst"] && kc.KubeAPIBurst != 0 {
		o.kubeAPIBurst = int(kc.KubeAPIBurst)
	}
	if !set["v"] && kc.Logging.Verbosity != 0 {
		o.verbosity = int(kc.Logging.Verbosity)
	}
}

func (o *options) validate() error {
	var errs []error
	if o.manifestDir == "" && o.manifestURL == "" && o.kubeconfig == "" {
		errs = append(errs, errors.New("give --manifest-dir (or --pod-manifest-path, or staticPodPath in --config), --manifest-url and/or --kubeconfig"))
	}
	if o.kubeconfig != "" {
		// As the kubelet: NodeRestriction would refuse them at every
		// registration; say so at start instead.
		var bad []string
		for k := range o.nodeLabels.m {
			ns, _, ok := strings.Cut(k, "/")
			restricted := ok && (ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io"))
			if restricted && !kubeletapis.IsKubeletLabel(k) {
				bad = append(bad, k)
			}
		}
		if len(bad) > 0 {
			sort.Strings(bad)
			errs = append(errs, fmt.Errorf("--node-labels %v: a node may set labels in the kubernetes.io and k8s.io namespaces only under kubelet.kubernetes.io/ or node.kubernetes.io/, or one of %v", bad, kubeletapis.KubeletLabels()))
		}
	}
	if o.authorizationMode != "Webhook" && o.authorizationMode != "AlwaysAllow" {
		errs = append(errs, fmt.Errorf("--authorization-mode %q: want Webhook or AlwaysAllow", o.authorizationMode))
	}
	if (o.tlsCertFile == "") != (o.tlsPrivateKeyFile == "") {
		errs = append(errs, errors.New("give both --tls-cert-file and --tls-private-key-file, or neither"))
	}
	if o.readOnlyPort < 0 || o.readOnlyPort > 65535 {
		errs = append(errs, fmt.Errorf("--read-only-port %d: want 0 (off) to 65535", o.readOnlyPort))
	}
	if o.rotateServerCertificates && len(o.tlsCipherSuites) > 0 && o.tlsMinVersion != "VersionTLS13" &&
		!slices.ContainsFunc(o.tlsCipherSuites, func(s string) bool { return strings.Contains(s, "_ECDSA_") }) {
		errs = append(errs, errors.New("--tls-cipher-suites: the certificate --rotate-server-certificates requests has an ECDSA key; give at least one ECDHE_ECDSA suite, or --tls-min-version VersionTLS13"))
	}
	if o.rotateServerCertificates && o.kubeconfig == "" {
		errs = append(errs, errors.New("--rotate-server-certificates needs --kubeconfig (the serving certificate is requested from the API server)"))
	}
	if o.bootstrapKubeconfig != "" && o.kubeconfig == "" {
		errs = append(errs, errors.New("--bootstrap-kubeconfig needs --kubeconfig (the file TLS bootstrap writes)"))
	}
	if o.kubeAPIQPS <= 0 || o.kubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be > 0"))
	}
	if o.nodeLeaseDurationSeconds <= 0 {
		errs = append(errs, errors.New("--node-lease-duration-seconds must be > 0"))
	}
	if taints, err := parseTaints(o.registerWithTaints); err != nil {
		errs = append(errs, fmt.Errorf("--register-with-taints: %w", err))
	} else {
		o.taints = taints
	}
	for _, r := range []struct {
		flag string
		kv   kvFlag
	}{{"--kube-reserved", o.kubeReserved}, {"--system-reserved", o.systemReserved}} {
		l := v1.ResourceList{}
		for k, v := range r.kv.m {
			q, err := resource.ParseQuantity(v)
			if err != nil || q.Sign() < 0 {
				errs = append(errs, fmt.Errorf("%s %s=%s: want a non-negative quantity", r.flag, k, v))
				continue
			}
			l[v1.ResourceName(k)] = q
		}
		o.reserved = append(o.reserved, l)
	}
	if th, err := node.ParseThresholds(o.evictionHard); err != nil {
		errs = append(errs, fmt.Errorf("--eviction-hard: %w", err))
	} else {
		o.hardThresholds = th
	}
	if th, err := node.ParseThresholds(o.evictionSoft); err != nil {
		errs = append(errs, fmt.Errorf("--eviction-soft: %w", err))
	} else {
		o.softThresholds = th
	}
	o.softGrace = map[string]time.Duration{}
	for _, kv := range strings.Split(o.evictionSoftGracePeriod, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("--eviction-soft-grace-period %q: want signal=duration", kv))
			continue
		}
		o.softGrace[k] = d
	}
	for _, t := range o.softThresholds {
		if o.softGrace[t.Signal] <= 0 {
			errs = append(errs, fmt.Errorf("--eviction-soft %s: no grace period in --eviction-soft-grace-period", t.Signal))
		}
	}
	switch o.cpuManagerPolicy {
	case "none", "", "static":
	default:
		errs = append(errs, fmt.Errorf("--cpu-manager-policy %q: want none or static", o.cpuManagerPolicy))
	}
	if set, err := cpuset.Parse(o.reservedCPUs); err != nil {
		errs = append(errs, fmt.Errorf("--reserved-cpus %q: want a CPU list such as 0,1 or 0-1", o.reservedCPUs))
	} else {
		o.reservedCPUSet = set
		if set.Size() > 0 {
			// As the kubelet: the reserved CPUs supersede the cpu of
			// --kube-reserved and --system-reserved for allocatable.
			for _, l := range o.reserved {
				delete(l, v1.ResourceCPU)
			}
			o.reserved = append(o.reserved, v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(set.Size()), resource.DecimalSI)})
		}
	}
	if o.cpuManagerReconcilePeriod <= 0 {
		errs = append(errs, errors.New("--cpu-manager-reconcile-period must be > 0"))
	}
	if o.cgroupDriver != "cgroupfs" && o.cgroupDriver != "systemd" {
		errs = append(errs, fmt.Errorf("--cgroup-driver %q: want cgroupfs or systemd", o.cgroupDriver))
	}
	if !strings.HasPrefix(o.cgroupRoot, "/") {
		errs = append(errs, fmt.Errorf("--cgroup-root %q: want an absolute cgroup path such as /", o.cgroupRoot))
	}
	for _, e := range o.enforceNodeAllocatable {
		switch e {
		case "pods", "none": // pods: ignored with --cgroups-per-qos=false (no kubepods)
		case "system-reserved", "kube-reserved", "system-reserved-compressible", "kube-reserved-compressible":
			errs = append(errs, fmt.Errorf("--enforce-node-allocatable %s: not supported (no --system-reserved-cgroup / --kube-reserved-cgroup); want pods or none", e))
		default:
			errs = append(errs, fmt.Errorf("--enforce-node-allocatable %q: want pods or none", e))
		}
	}
	if o.maxPods < 0 {
		errs = append(errs, errors.New("--max-pods must be >= 0"))
	}
	if o.manifestPermissions != "warn" && o.manifestPermissions != "refuse" {
		errs = append(errs, fmt.Errorf("--manifest-permissions %q: want warn or refuse", o.manifestPermissions))
	}
	if o.maxRestartBackoff < 10*time.Second {
		errs = append(errs, errors.New("--max-container-restart-period must be at least 10s"))
	}
	if q, err := resource.ParseQuantity(o.containerLogMaxSize); err != nil {
		errs = append(errs, fmt.Errorf("--container-log-max-size %q: %w", o.containerLogMaxSize, err))
	} else if n, ok := q.AsInt64(); !ok || n <= 0 {
		errs = append(errs, fmt.Errorf("--container-log-max-size %q: want a positive size such as 10Mi", o.containerLogMaxSize))
	} else {
		o.containerLogMaxBytes = n
	}
	if o.containerLogMaxFiles < 2 {
		errs = append(errs, errors.New("--container-log-max-files must be >= 2 (the live file and one rotated)"))
	}
	if o.containerLogMaxWorkers < 1 {
		errs = append(errs, errors.New("--container-log-max-workers must be >= 1"))
	}
	if o.maxParallelImagePulls < 0 {
		errs = append(errs, errors.New("--max-parallel-image-pulls must be >= 0 (0: unlimited)"))
	}
	if o.serializeImagePulls && o.maxParallelImagePulls > 1 {
		errs = append(errs, fmt.Errorf("--max-parallel-image-pulls %d needs --serialize-image-pulls=false", o.maxParallelImagePulls))
	}
	if o.imageGCPeriod <= 0 {
		errs = append(errs, errors.New("--image-gc-period must be > 0"))
	}
	if o.containerLogMonitorInterval <= 0 {
		errs = append(errs, errors.New("--container-log-monitor-interval must be > 0"))
	}
	return errors.Join(errs...)
}

// parseTaints parses "key[=value]:Effect,…".
func parseTaints(s string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kv, effect, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("%q: want key=value:Effect", part)
		}
		k, v, _ := strings.Cut(kv, "=")
		switch e := v1.TaintEffect(effect); e {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
			out = append(out, v1.Taint{Key: k, Value: v, Effect: e})
		default:
			return nil, fmt.Errorf("%q: effect must be NoSchedule, PreferNoSchedule or NoExecute", part)
		}
		if k == "" {
			return nil, fmt.Errorf("%q: empty key", part)
		}
	}
	return out, nil
}
