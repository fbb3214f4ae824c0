package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletapis "k8s.io/kubelet/pkg/apis"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/node"
)

// complete validates the settings and derives the values the rest of
// the agent takes in other types (quantities, thresholds, cpusets): the
// one place they are computed.
func (o *options) complete() error {
	return errors.Join(errors.Join(o.validateSources()...), errors.Join(o.validateAPI()...),
		errors.Join(o.validateServer()...), errors.Join(o.completeResources()...),
		errors.Join(o.completeEviction()...), errors.Join(o.validateCgroups()...),
		errors.Join(o.completeLogsAndImages()...))
}

func (o *options) validateSources() []error {
	var errs []error
	if o.StaticPodPath == "" && o.StaticPodURL == "" && o.kubeconfig == "" {
		errs = append(errs, errors.New("give --manifest-dir (or --pod-manifest-path, or staticPodPath in --config), --manifest-url and/or --kubeconfig"))
	}
	if o.MaxPods < 0 {
		errs = append(errs, errors.New("--max-pods must be >= 0"))
	}
	if o.manifestPermissions != "warn" && o.manifestPermissions != "refuse" {
		errs = append(errs, fmt.Errorf("--manifest-permissions %q: want warn or refuse", o.manifestPermissions))
	}
	if o.CrashLoopBackOff.MaxContainerRestartPeriod.Duration < 10*time.Second {
		errs = append(errs, errors.New("--max-container-restart-period must be at least 10s"))
	}
	if o.minimumContainerTTL < 0 { // as the kubelet's container GC
		errs = append(errs, fmt.Errorf("--minimum-container-ttl-duration %v: invalid minimum garbage collection age", o.minimumContainerTTL))
	}
	// Graceful node shutdown, as the kubelet validates it.
	if o.ShutdownGracePeriod.Duration < 0 || o.ShutdownGracePeriodCriticalPods.Duration < 0 {
		errs = append(errs, errors.New("shutdownGracePeriod and shutdownGracePeriodCriticalPods must be >= 0"))
	}
	if o.ShutdownGracePeriod.Duration%time.Second != 0 || o.ShutdownGracePeriodCriticalPods.Duration%time.Second != 0 {
		errs = append(errs, errors.New("shutdownGracePeriod and shutdownGracePeriodCriticalPods must be whole seconds"))
	}
	if o.ShutdownGracePeriodCriticalPods.Duration > o.ShutdownGracePeriod.Duration {
		errs = append(errs, fmt.Errorf("shutdownGracePeriodCriticalPods %v must be <= shutdownGracePeriod %v",
			o.ShutdownGracePeriodCriticalPods.Duration, o.ShutdownGracePeriod.Duration))
	}
	if len(o.ShutdownGracePeriodByPodPriority) > 0 && (o.ShutdownGracePeriod.Duration > 0 || o.ShutdownGracePeriodCriticalPods.Duration > 0) {
		errs = append(errs, errors.New("shutdownGracePeriodByPodPriority must be empty when shutdownGracePeriod or shutdownGracePeriodCriticalPods is set"))
	}
	if o.maxDeadContainers >= 0 {
		// Dead containers are collected per pod at its syncs; a limit over
		// the whole node is not built: refused rather than ignored.
		errs = append(errs, fmt.Errorf("--maximum-dead-containers %d: only -1 (no node-wide limit, the kubelet's default) is implemented; limit each container with --maximum-dead-containers-per-container", o.maxDeadContainers))
	}
	return errs
}

func (o *options) validateAPI() []error {
	var errs []error
	if o.kubeconfig != "" {
		// As the kubelet: NodeRestriction would refuse them at every
		// registration; say so at start instead.
		var bad []string
		for k := range o.nodeLabels {
			ns, _, ok := strings.Cut(k, "/")
			restricted := ok && (ns == "kubernetes.io" || strings.HasSuffix(ns, ".kubernetes.io") || ns == "k8s.io" || strings.HasSuffix(ns, ".k8s.io"))
			if restricted && !kubeletapis.IsKubeletLabel(k) {
				bad = append(bad, k)
			}
		}
		if len(bad) > 0 {
			slices.Sort(bad)
			errs = append(errs, fmt.Errorf("--node-labels %v: a node may set labels in the kubernetes.io and k8s.io namespaces only under kubelet.kubernetes.io/ or node.kubernetes.io/, or one of %v", bad, kubeletapis.KubeletLabels()))
		}
	}
	if o.bootstrapKubeconfig != "" && o.kubeconfig == "" {
		errs = append(errs, errors.New("--bootstrap-kubeconfig needs --kubeconfig (the file TLS bootstrap writes)"))
	}
	o.kubeAPIQPS = float32(*o.KubeAPIQPS)
	if o.kubeAPIQPSExact != 0 {
		o.kubeAPIQPS = float32(o.kubeAPIQPSExact)
	}
	if o.kubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be > 0"))
	}
	if o.NodeLeaseDurationSeconds <= 0 {
		errs = append(errs, errors.New("--node-lease-duration-seconds must be > 0"))
	}
	for _, t := range o.RegisterWithTaints { // the flag's are checked as parsed; the file's here
		if err := checkTaint(t); err != nil {
			errs = append(errs, fmt.Errorf("--register-with-taints %q: %w", t.ToString(), err))
		}
	}
	return errs
}

func (o *options) validateServer() []error {
	var errs []error
	if m := o.Authorization.Mode; m != "Webhook" && m != "AlwaysAllow" {
		errs = append(errs, fmt.Errorf("--authorization-mode %q: want Webhook or AlwaysAllow", m))
	}
	if (o.TLSCertFile == "") != (o.TLSPrivateKeyFile == "") {
		errs = append(errs, errors.New("give both --tls-cert-file and --tls-private-key-file, or neither"))
	}
	if o.ReadOnlyPort < 0 || o.ReadOnlyPort > 65535 {
		errs = append(errs, fmt.Errorf("--read-only-port %d: want 0 (off) to 65535", o.ReadOnlyPort))
	}
	if o.ServerTLSBootstrap && len(o.TLSCipherSuites) > 0 && o.TLSMinVersion != "VersionTLS13" &&
		!slices.ContainsFunc(o.TLSCipherSuites, func(s string) bool { return strings.Contains(s, "_ECDSA_") }) {
		errs = append(errs, errors.New("--tls-cipher-suites: the certificate --rotate-server-certificates requests has an ECDSA key; give at least one ECDHE_ECDSA suite, or --tls-min-version VersionTLS13"))
	}
	if o.ServerTLSBootstrap && o.kubeconfig == "" {
		errs = append(errs, errors.New("--rotate-server-certificates needs --kubeconfig (the serving certificate is requested from the API server)"))
	}
	return errs
}

// completeResources derives the reservations (and --reserved-cpus) and
// checks the CPU manager's settings.
func (o *options) completeResources() []error {
	var errs []error
	o.reserved = nil
	for _, r := range []struct {
		flag string
		m    map[string]string
	}{{"--kube-reserved", o.KubeReserved}, {"--system-reserved", o.SystemReserved}} {
		l := v1.ResourceList{}
		for _, k := range slices.Sorted(maps.Keys(r.m)) {
			q, err := resource.ParseQuantity(r.m[k])
			if err != nil || q.Sign() < 0 {
				errs = append(errs, fmt.Errorf("%s %s=%s: want a non-negative quantity", r.flag, k, r.m[k]))
				continue
			}
			l[v1.ResourceName(k)] = q
		}
		o.reserved = append(o.reserved, l)
	}
	switch o.CPUManagerPolicy {
	case "none", "", "static":
	default:
		errs = append(errs, fmt.Errorf("--cpu-manager-policy %q: want none or static", o.CPUManagerPolicy))
	}
	if set, err := cpuset.Parse(o.ReservedSystemCPUs); err != nil {
		errs = append(errs, fmt.Errorf("--reserved-cpus %q: want a CPU list such as 0,1 or 0-1", o.ReservedSystemCPUs))
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
	if o.CPUManagerReconcilePeriod.Duration <= 0 {
		errs = append(errs, errors.New("--cpu-manager-reconcile-period must be > 0"))
	}
	return errs
}

// completeEviction derives the eviction thresholds and grace periods.
func (o *options) completeEviction() []error {
	var errs []error
	var err error
	if o.hardThresholds, err = node.ParseThresholds(joinMap(o.EvictionHard, "<")); err != nil {
		errs = append(errs, fmt.Errorf("--eviction-hard: %w", err))
	}
	if o.softThresholds, err = node.ParseThresholds(joinMap(o.EvictionSoft, "<")); err != nil {
		errs = append(errs, fmt.Errorf("--eviction-soft: %w", err))
	}
	o.softGrace = map[string]time.Duration{}
	for _, k := range slices.Sorted(maps.Keys(o.EvictionSoftGracePeriod)) {
		d, err := time.ParseDuration(o.EvictionSoftGracePeriod[k])
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("--eviction-soft-grace-period %q: want signal=duration", k+"="+o.EvictionSoftGracePeriod[k]))
			continue
		}
		o.softGrace[k] = d
	}
	for _, t := range o.softThresholds {
		if o.softGrace[t.Signal] <= 0 {
			errs = append(errs, fmt.Errorf("--eviction-soft %s: no grace period in --eviction-soft-grace-period", t.Signal))
		}
	}
	return errs
}

func (o *options) validateCgroups() []error {
	var errs []error
	if o.CgroupDriver != "cgroupfs" && o.CgroupDriver != "systemd" {
		errs = append(errs, fmt.Errorf("--cgroup-driver %q: want cgroupfs or systemd", o.CgroupDriver))
	}
	if !strings.HasPrefix(o.CgroupRoot, "/") {
		errs = append(errs, fmt.Errorf("--cgroup-root %q: want an absolute cgroup path such as /", o.CgroupRoot))
	}
	for _, e := range o.EnforceNodeAllocatable {
		switch e {
		case "pods", "none": // pods: ignored with --cgroups-per-qos=false (no kubepods)
		case "system-reserved", "kube-reserved", "system-reserved-compressible", "kube-reserved-compressible":
			errs = append(errs, fmt.Errorf("--enforce-node-allocatable %s: not supported (no --system-reserved-cgroup / --kube-reserved-cgroup); want pods or none", e))
		default:
			errs = append(errs, fmt.Errorf("--enforce-node-allocatable %q: want pods or none", e))
		}
	}
	return errs
}

// completeLogsAndImages derives the log size in bytes and checks the
// log rotation's and the image manager's settings.
func (o *options) completeLogsAndImages() []error {
	var errs []error
	if q, err := resource.ParseQuantity(o.ContainerLogMaxSize); err != nil {
		errs = append(errs, fmt.Errorf("--container-log-max-size %q: %w", o.ContainerLogMaxSize, err))
	} else if n, ok := q.AsInt64(); !ok || n <= 0 {
		errs = append(errs, fmt.Errorf("--container-log-max-size %q: want a positive size such as 10Mi", o.ContainerLogMaxSize))
	} else {
		o.containerLogMaxBytes = n
	}
	if *o.ContainerLogMaxFiles < 2 {
		errs = append(errs, errors.New("--container-log-max-files must be >= 2 (the live file and one rotated)"))
	}
	if *o.ContainerLogMaxWorkers < 1 {
		errs = append(errs, errors.New("--container-log-max-workers must be >= 1"))
	}
	if o.ContainerLogMonitorInterval.Duration <= 0 {
		errs = append(errs, errors.New("--container-log-monitor-interval must be > 0"))
	}
	if *o.MaxParallelImagePulls < 0 {
		errs = append(errs, errors.New("--max-parallel-image-pulls must be >= 0 (0: unlimited)"))
	}
	if *o.SerializeImagePulls && *o.MaxParallelImagePulls > 1 {
		errs = append(errs, fmt.Errorf("--max-parallel-image-pulls %d needs --serialize-image-pulls=false", *o.MaxParallelImagePulls))
	}
	if o.imageGCPeriod <= 0 {
		errs = append(errs, errors.New("--image-gc-period must be > 0"))
	}
	return errs
}

// joinMap is a map setting as its flag's "k<sep>v,…", sorted.
func joinMap(m map[string]string, sep string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+sep+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
