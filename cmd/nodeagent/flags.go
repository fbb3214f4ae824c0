package main

import (
	"flag"
	"fmt"
	"net"
	"strings"

	cliflag "k8s.io/component-base/cli/flag"
)

// newFlagSet registers the flags onto o's fields, each with the field's
// current value as its default (as the kubelet's AddKubeletConfigFlags):
// on newOptions they are nodeagent's defaults; on a config file's
// settings, parsing the command line again changes only what it gives.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("nodeagent", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
		printDefaults(fs)
	}
	addSourceFlags(fs, o)
	addRuntimeFlags(fs, o)
	addAPIFlags(fs, o)
	addServerFlags(fs, o)
	addResourceFlags(fs, o)
	addPodFlags(fs, o)
	addLogAndImageFlags(fs, o)
	return fs
}

// addSourceFlags: where pods come from, and the agent's directories.
func addSourceFlags(fs *flag.FlagSet, o *options) {
	kc := &o.KubeletConfiguration
	fs.StringVar(&o.configFile, "config", o.configFile, "KubeletConfiguration file (kubelet.config.k8s.io/v1beta1); command-line flags override it")
	fs.StringVar(&kc.StaticPodPath, "manifest-dir", kc.StaticPodPath, "directory of static pod manifests (YAML or JSON)")
	fs.StringVar(&kc.StaticPodPath, "pod-manifest-path", kc.StaticPodPath, "alias of --manifest-dir (kubelet's name)")
	fs.DurationVar(&kc.FileCheckFrequency.Duration, "file-check-frequency", kc.FileCheckFrequency.Duration, "period of the manifest directory re-list that catches missed inotify events")
	fs.StringVar(&kc.StaticPodURL, "manifest-url", kc.StaticPodURL, "URL serving static pod manifests (YAML/JSON documents or a PodList), polled")
	fs.Var(cliflag.NewColonSeparatedMultimapStringString(&kc.StaticPodURLHeader), "manifest-url-header", "HTTP headers for --manifest-url: 'Name:value,Other:value'")
	fs.DurationVar(&kc.HTTPCheckFrequency.Duration, "http-check-frequency", kc.HTTPCheckFrequency.Duration, "poll period of --manifest-url")
	fs.DurationVar(&kc.SyncFrequency.Duration, "sync-frequency", kc.SyncFrequency.Duration, "longest time between two syncs of a running pod")
	fs.StringVar(&o.rootDir, "root-dir", o.rootDir, "directory for pod volumes and agent state")
	fs.StringVar(&kc.PodLogsDir, "pod-logs-dir", kc.PodLogsDir, "root of container log files: <dir>/<ns>_<name>_<uid>/<container>/<restart>.log")
	fs.StringVar(&o.statusDir, "status-dir", o.statusDir, "where pod statuses are published (default <root-dir>/status)")
	fs.StringVar(&o.hostnameOverride, "hostname-override", o.hostnameOverride, "node name instead of the host name")
	fs.StringVar(&o.nodeIP, "node-ip", o.nodeIP, "node IP reported as hostIP (default: first non-loopback IPv4)")
	fs.StringVar(&o.manifestPermissions, "manifest-permissions", o.manifestPermissions, "a manifest (or manifest directory) writable by others than root: 'warn' logs it, 'refuse' ignores the file and lists it as a problem")
	fs.StringVar(&kc.HealthzBindAddress, "healthz-bind-address", kc.HealthzBindAddress, "address of the /healthz and /metrics endpoint")
	fs.Var((*int32Value)(kc.HealthzPort), "healthz-port", "port of the /healthz and /metrics endpoint; 0 disables it")
	fs.Var(&verbosityValue{&kc.Logging.Verbosity}, "v", "log verbosity: 0 info, 4 and more debug")
}

// addRuntimeFlags: the CRI runtime, the pod network, the sync loop.
func addRuntimeFlags(fs *flag.FlagSet, o *options) {
	kc := &o.KubeletConfiguration
	fs.StringVar(&kc.ContainerRuntimeEndpoint, "container-runtime-endpoint", kc.ContainerRuntimeEndpoint, "CRI endpoint (unix socket)")
	fs.DurationVar(&kc.RuntimeRequestTimeout.Duration, "runtime-request-timeout", kc.RuntimeRequestTimeout.Duration, "timeout of every CRI call but image pulls")
	fs.DurationVar(&o.imagePullTimeout, "image-pull-timeout", o.imagePullTimeout, "timeout of one image pull")
	fs.Var((*int32Value)(&kc.MaxPods), "max-pods", "most pods this node runs")
	fs.StringVar(&kc.PodCIDR, "pod-cidr", kc.PodCIDR, "the node's pod CIDR(s), comma-separated for dual stack; passed to the runtime and used for the node's CNI conflist when --cni-conf-dir holds none (or only the one nodeagent wrote)")
	fs.StringVar(&o.cniConfDir, "cni-conf-dir", o.cniConfDir, "CNI config dir the runtime uses; nodeagent validates the config there (and writes --pod-cidr's conflist there). Not given: it validates the dir the runtime names over CRI (containerd does), else none. A problem found is logged; whether pods wait for the network is the runtime's NetworkReady alone, as with the kubelet")
	fs.StringVar(&o.cniBinDir, "cni-bin-dir", o.cniBinDir, "CNI plugin dir the runtime uses, for nodeagent's validation; not given: the runtime's, when it names them")
	fs.DurationVar(&o.cniGCPeriod, "cni-gc-period", o.cniGCPeriod, "period of CNI GC: pod IPs and attachments leaked by crashes, of no ready sandbox of the runtime and older than a minute, are released; 0 disables it")
	fs.DurationVar(&kc.CrashLoopBackOff.MaxContainerRestartPeriod.Duration, "max-container-restart-period", kc.CrashLoopBackOff.MaxContainerRestartPeriod.Duration, "cap of the CrashLoopBackOff delay")
	fs.BoolVar(&o.adoptKubeletPods, "adopt-kubelet-pods", o.adoptKubeletPods, "take the kubelet's pods on the runtime (its labels, none of nodeagent's) as this agent's own, as they run: for a node the kubelet ran, the kubelet stopped, with --root-dir its root dir; static pods keep the kubelet's UIDs. Pods of that kind nobody wants are then stopped, as the kubelet stops its orphans: never set it beside a running kubelet or other tools' kubelet-labelled pods on one runtime")
	fs.BoolVar(&o.eventedPLEG, "evented-pleg", o.eventedPLEG, "follow the runtime's container event stream (CRI GetContainerEvents) and relist every 10s only as a safety net; without it, or on runtimes lacking the stream, relist every second")
	fs.DurationVar(&o.minimumContainerTTL, "minimum-container-ttl-duration", o.minimumContainerTTL, "Minimum age for a finished container before it is garbage collected.  Examples: '300ms', '10s' or '2h45m'")
	fs.Var((*int32Value)(&o.maxDeadPerContainer), "maximum-dead-containers-per-container", "Maximum number of old instances to retain per container.  Each container takes up some disk space.")
	fs.Var((*int32Value)(&o.maxDeadContainers), "maximum-dead-containers", "Maximum number of old instances of containers to retain globally.  Each container takes up some disk space. To disable, set to a negative number.")
}

// addAPIFlags: API mode, the node's credentials and its Node object.
func addAPIFlags(fs *flag.FlagSet, o *options) {
	kc := &o.KubeletConfiguration
	fs.Var(cliflag.NewMapStringString(&o.nodeLabels), "node-labels", "node labels key=value,… (nodeSelector and node affinity are judged against them)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "the node's kubeconfig: API mode (pods bound to this node, Node object, Lease, statuses, events); written by TLS bootstrap when --bootstrap-kubeconfig is given")
	fs.StringVar(&o.bootstrapKubeconfig, "bootstrap-kubeconfig", o.bootstrapKubeconfig, "kubeconfig whose credential may create a CSR for the node's client certificate (TLS bootstrap)")
	fs.StringVar(&o.certDir, "cert-dir", o.certDir, "where the node's certificates are kept (default <root-dir>/pki)")
	fs.BoolVar(&kc.RotateCertificates, "rotate-certificates", kc.RotateCertificates, "request a new client certificate before the current one expires")
	fs.BoolVar(&kc.ServerTLSBootstrap, "rotate-server-certificates", kc.ServerTLSBootstrap, "request the node server's certificate from the API server with a CSR (signer kubernetes.io/kubelet-serving, to be approved: kubectl certificate approve) and renew it before it expires; --tls-cert-file, if given, is served until the first one is issued")
	fs.Var(&qpsValue{p: kc.KubeAPIQPS, exact: &o.kubeAPIQPSExact}, "kube-api-qps", "queries per second to the API server")
	fs.Var((*int32Value)(&kc.KubeAPIBurst), "kube-api-burst", "burst of queries to the API server")
	fs.BoolVar(kc.RegisterNode, "register-node", *kc.RegisterNode, "create the Node object when it does not exist")
	fs.Var(&taintsValue{&kc.RegisterWithTaints}, "register-with-taints", "taints of a newly registered Node: key=value:Effect,…")
	fs.DurationVar(&kc.NodeStatusUpdateFrequency.Duration, "node-status-update-frequency", kc.NodeStatusUpdateFrequency.Duration, "how often the node status is computed and posted when it changed")
	fs.DurationVar(&kc.NodeStatusReportFrequency.Duration, "node-status-report-frequency", kc.NodeStatusReportFrequency.Duration, "how often the node status is posted when it did not change")
	fs.Var((*int32Value)(&kc.NodeLeaseDurationSeconds), "node-lease-duration-seconds", "duration of the node's Lease; renewed every quarter of it")
}

// addServerFlags: the node server and the read-only port.
func addServerFlags(fs *flag.FlagSet, o *options) {
	kc := &o.KubeletConfiguration
	fs.Var((*int32Value)(&kc.Port), "port", "the node server's port (API mode), published in the Node's daemonEndpoints")
	fs.StringVar(&kc.Address, "address", kc.Address, "the node server's address")
	fs.Var((*int32Value)(&kc.ReadOnlyPort), "read-only-port", "plain-HTTP port on --address serving /healthz, /pods, /stats/summary, /metrics and /metrics/resource with no authentication (either mode); 0 (default) disables it")
	fs.StringVar(&kc.TLSCertFile, "tls-cert-file", kc.TLSCertFile, "the node server's certificate (default: <cert-dir>/kubelet.crt, self-signed at first start)")
	fs.StringVar(&kc.TLSPrivateKeyFile, "tls-private-key-file", kc.TLSPrivateKeyFile, "the key of --tls-cert-file")
	fs.StringVar(&kc.TLSMinVersion, "tls-min-version", kc.TLSMinVersion, "the node server's minimum TLS version: VersionTLS12 or VersionTLS13")
	fs.StringVar(&kc.Authentication.X509.ClientCAFile, "client-ca-file", kc.Authentication.X509.ClientCAFile, "CA bundle the node server verifies client certificates against (the API server's --kubelet-client-certificate); without it, client certificates are not accepted")
	fs.BoolVar(kc.Authentication.Anonymous.Enabled, "anonymous-auth", *kc.Authentication.Anonymous.Enabled, "let requests to the node server without credentials in as system:anonymous (group system:unauthenticated), still subject to authorization")
	fs.BoolVar(kc.Authentication.Webhook.Enabled, "authentication-token-webhook", *kc.Authentication.Webhook.Enabled, "accept bearer tokens at the node server, reviewed by the API server (TokenReview, cached 2m)")
	fs.Var(authzModeValue{&kc.Authorization.Mode}, "authorization-mode", "node server authorization: Webhook (SubjectAccessReview, allowed cached 5m, denied 30s) or AlwaysAllow")
	fs.Func("tls-cipher-suites", "the node server's TLS 1.2 cipher suites, by Go name, comma-separated (default: Go's secure defaults)", list(&kc.TLSCipherSuites))
}

// addResourceFlags: reservations, eviction, the CPU manager, cgroups.
func addResourceFlags(fs *flag.FlagSet, o *options) {
	kc := &o.KubeletConfiguration
	fs.StringVar(&kc.CPUManagerPolicy, "cpu-manager-policy", kc.CPUManagerPolicy, "CPU manager policy: none or static (exclusive CPUs for Guaranteed pods' whole-CPU containers)")
	fs.StringVar(&kc.ReservedSystemCPUs, "reserved-cpus", kc.ReservedSystemCPUs, "CPUs kept out of exclusive allocation, e.g. 0,1 or 0-1 (static policy; default: ceil of kube + system reserved cpu, lowest CPUs)")
	fs.Var(cliflag.NewMapStringString(&kc.CPUManagerPolicyOptions), "cpu-manager-policy-options", "static policy options: full-pcpus-only=true")
	fs.DurationVar(&kc.CPUManagerReconcilePeriod.Duration, "cpu-manager-reconcile-period", kc.CPUManagerReconcilePeriod.Duration, "how often the CPU manager re-applies containers' cpusets")
	fs.Var(cliflag.NewMapStringString(&kc.KubeReserved), "kube-reserved", "resources reserved for Kubernetes daemons: cpu=…,memory=…,ephemeral-storage=…,pid=…")
	fs.Var(cliflag.NewMapStringString(&kc.SystemReserved), "system-reserved", "resources reserved for the system: cpu=…,memory=…,ephemeral-storage=…,pid=…")
	fs.Var(cliflag.NewLangleSeparatedMapStringString(&kc.EvictionSoft), "eviction-soft", "soft eviction thresholds (signal<quantity or percent), acted on once held for their --eviction-soft-grace-period")
	fs.Var(cliflag.NewMapStringString(&kc.EvictionSoftGracePeriod), "eviction-soft-grace-period", "signal=duration,… for each --eviction-soft threshold")
	fs.DurationVar(&kc.EvictionPressureTransitionPeriod.Duration, "eviction-pressure-transition-period", kc.EvictionPressureTransitionPeriod.Duration, "how long a pressure condition stays after its threshold was last crossed")
	fs.Var((*int32Value)(&kc.EvictionMaxPodGracePeriod), "eviction-max-pod-grace-period", "most grace (seconds) a pod evicted for a soft threshold gets; 0: its own")
	fs.DurationVar(&o.evictionMonitoringPeriod, "eviction-monitoring-period", o.evictionMonitoringPeriod, "how often the node's signals are read and at most one pod evicted (the kubelet's housekeeping period; not a kubelet flag)")
	fs.Var(cliflag.NewLangleSeparatedMapStringString(&kc.EvictionHard), "eviction-hard", "hard eviction thresholds, subtracted from capacity for allocatable")
	fs.BoolVar(kc.CgroupsPerQOS, "cgroups-per-qos", *kc.CgroupsPerQOS, "make the kubelet's cgroup hierarchy: kubepods, its burstable and besteffort tiers and a cgroup per pod with the pod's limits, the runtime's cgroup parent for the pod; false: the runtime's default cgroups")
	fs.StringVar(&kc.CgroupRoot, "cgroup-root", kc.CgroupRoot, "cgroup under which kubepods is made")
	fs.StringVar(&kc.CgroupDriver, "cgroup-driver", kc.CgroupDriver, "cgroup driver: cgroupfs, or systemd (kubepods.slice and its slices made through systemd's D-Bus API); the runtime's, when its CRI RuntimeConfig reports one, wins")
	fs.Int64Var(kc.PodPidsLimit, "pod-max-pids", *kc.PodPidsLimit, "most processes in each pod (its pod cgroup's pids.max); -1 (or 0): no limit")
	fs.Func("enforce-node-allocatable", "where node allocatable is enforced: pods (kubepods limited to capacity minus --kube-reserved and --system-reserved), or none", list(&kc.EnforceNodeAllocatable))
}

// addPodFlags: what pods may do, and what they get (DNS, seccomp).
func addPodFlags(fs *flag.FlagSet, o *options) {
	kc := &o.KubeletConfiguration
	fs.BoolVar(&o.allowPrivileged, "allow-privileged", o.allowPrivileged, "let pods with privileged containers run (false: such pods are kept Pending, reason Forbidden)")
	fs.Func("allowed-unsafe-sysctls", "unsafe sysctls (names, or prefixes ending in *) pods may set beyond the safe set; others are refused (SysctlForbidden)", list(&kc.AllowedUnsafeSysctls))
	fs.Func("host-network-sources", "pod sources (file, http, api; * for all) whose pods may use the host's network namespace", list(&o.hostNetworkSources))
	fs.Func("host-pid-sources", "pod sources whose pods may use the host's PID namespace", list(&o.hostPIDSources))
	fs.Func("host-ipc-sources", "pod sources whose pods may use the host's IPC namespace", list(&o.hostIPCSources))
	fs.Func("cluster-dns", "cluster DNS server IPs (comma-separated) for pods with dnsPolicy ClusterFirst; without, such pods fall back to Default with a MissingClusterDNS event, as the kubelet's", func(v string) error {
		kc.ClusterDNS = nil
		for _, ip := range strings.Split(v, ",") {
			if ip = strings.TrimSpace(ip); ip == "" {
				continue
			}
			if net.ParseIP(ip) == nil {
				return fmt.Errorf("%q is not an IP address", ip)
			}
			kc.ClusterDNS = append(kc.ClusterDNS, ip)
		}
		return nil
	})
	fs.StringVar(kc.ResolverConfig, "resolv-conf", *kc.ResolverConfig, "the resolver file pods with dnsPolicy Default get (and whose search domains ClusterFirst pods add); \"\" for none")
	fs.StringVar(&kc.ClusterDomain, "cluster-domain", kc.ClusterDomain, "the cluster's DNS domain: a pod with a subdomain finds <hostname>.<subdomain>.<namespace>.svc.<domain> in its /etc/hosts")
	fs.BoolVar(kc.SeccompDefault, "seccomp-default", *kc.SeccompDefault, "run containers whose pod and container set no seccompProfile with the runtime's default profile (RuntimeDefault) instead of Unconfined")
}

// addLogAndImageFlags: container log rotation and the image manager.
func addLogAndImageFlags(fs *flag.FlagSet, o *options) {
	kc := &o.KubeletConfiguration
	fs.StringVar(&kc.ContainerLogMaxSize, "container-log-max-size", kc.ContainerLogMaxSize, "size (a quantity: 10Mi, 500Ki) at which a container's log file is rotated")
	fs.Var((*int32Value)(kc.ContainerLogMaxFiles), "container-log-max-files", "most log files a container keeps, the live one included (>= 2)")
	fs.Var((*int32Value)(kc.ContainerLogMaxWorkers), "container-log-max-workers", "containers whose logs are rotated at once")
	fs.DurationVar(&kc.ContainerLogMonitorInterval.Duration, "container-log-monitor-interval", kc.ContainerLogMonitorInterval.Duration, "period of the full pass over the containers' log files (growing files are also checked in between)")
	fs.BoolVar(kc.SerializeImagePulls, "serialize-image-pulls", *kc.SerializeImagePulls, "pull one image at a time")
	fs.Var((*int32Value)(kc.MaxParallelImagePulls), "max-parallel-image-pulls", "most image pulls at once with --serialize-image-pulls=false; 0 is unlimited")
	fs.Var((*int32Value)(kc.ImageGCHighThresholdPercent), "image-gc-high-threshold", "image file system usage (percent) at which image garbage collection runs; 100 turns it off")
	fs.Var((*int32Value)(kc.ImageGCLowThresholdPercent), "image-gc-low-threshold", "image file system usage (percent) image garbage collection frees down to")
	fs.DurationVar(&kc.ImageMinimumGCAge.Duration, "image-minimum-gc-age", kc.ImageMinimumGCAge.Duration, "an unused image is kept at least this long after it was first seen")
	fs.DurationVar(&kc.ImageMaximumGCAge.Duration, "image-maximum-gc-age", kc.ImageMaximumGCAge.Duration, "an image unused for this long is removed whatever the disk usage; 0 turns it off")
	fs.DurationVar(&o.imageGCPeriod, "image-gc-period", o.imageGCPeriod, "period of image garbage collection (the kubelet's fixed 5m; not a kubelet flag)")
	fs.StringVar(&o.podInfraContainerImage, "pod-infra-container-image", o.podInfraContainerImage, "sandbox image image garbage collection never removes (the runtime's own setting chooses the image; runtimes pin it too)")
	fs.StringVar(&o.pullSecretsDir, "pull-secrets-dir", o.pullSecretsDir, "standalone mode: imagePullSecrets as files <dir>/<namespace>/<name> in the .dockerconfigjson format (not a kubelet flag)")
}
