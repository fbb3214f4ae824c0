package main

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/kubeapi"
	"github.com/nodeagent/nodeagent/internal/metrics"
	"github.com/nodeagent/nodeagent/internal/server"
)

// nodeServer builds the node's HTTPS server (API mode: the API server
// authenticates and authorizes its callers) and opens its socket. A taken
// port costs the server, not the pods: it is logged and serve is nil.
func nodeServer(o *options, api *apiMode, rt server.Runtime, nodeName, nodeIP string, pods func() ([]*v1.Pod, error),
	s server.Config, log *zap.Logger) (serve func(context.Context) error, err error) {
	certDir := o.certDir
	if certDir == "" {
		certDir = filepath.Join(o.rootDir, "pki")
	}
	var ips []net.IP
	if ip := net.ParseIP(nodeIP); ip != nil {
		ips = append(ips, ip)
	}
	tlsOpts := server.TLSOptions{
		CertFile: o.tlsCertFile, KeyFile: o.tlsPrivateKeyFile, CertDir: certDir, Host: nodeName, IPs: ips,
		MinVersion: o.tlsMinVersion, CipherSuites: o.tlsCipherSuites,
	}
	var serving *kubeapi.ServingCert
	if o.rotateServerCertificates {
		// As the kubelet with serverTLSBootstrap: the certificate comes
		// from a CSR; --tls-cert-file, if given, is not an error but only
		// served until the first issued certificate replaces it (the
		// kubelet hands it to the same store).
		serving, err = kubeapi.NewServingCert(kubeapi.ServingConfig{
			Client: api.client.Clientset, CertDir: certDir, NodeName: nodeName, Hostnames: []string{nodeName}, IPs: ips,
			CertFile: o.tlsCertFile, KeyFile: o.tlsPrivateKeyFile, Clock: clock.RealClock{}, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		tlsOpts.Certificates = serving
	}
	tlsCfg, err := server.TLSConfig(tlsOpts)
	if err != nil {
		return nil, err
	}
	authn := server.AuthnConfig{Anonymous: o.anonymousAuth}
	if o.clientCAFile != "" {
		if authn.ClientCAs, err = certutil.NewPool(o.clientCAFile); err != nil {
			return nil, err
		}
	}
	if o.authnTokenWebhook {
		authn.Tokens = api.client.Clientset.AuthenticationV1().TokenReviews()
	}
	s.NodeName, s.Pods, s.Runtime, s.Logger, s.CallTimeout, s.PodLogsDir = nodeName, pods, rt, log, o.runtimeRequestTimeout, o.podLogsDir
	s.Authenticator = server.NewAuthenticator(authn)
	s.Authorizer = server.AlwaysAllow{}
	if o.authorizationMode == "Webhook" {
		s.Authorizer = &server.Webhook{Reviews: api.client.Clientset.AuthorizationV1().SubjectAccessReviews()}
	}
	s.Configz = func() any { return map[string]any{"kubeletconfig": configz(o)} }
	srv, err := server.New(s)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(o.address, strconv.Itoa(o.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("no node server (kubectl exec/attach/port-forward); pods are run regardless (free the port or set --port)", zap.Error(err))
		return nil, nil
	}
	log.Info("serving the node server", zap.String("address", addr), zap.String("authorization", o.authorizationMode),
		zap.Bool("clientCertificates", authn.ClientCAs != nil), zap.Bool("tokens", authn.Tokens != nil), zap.Bool("anonymous", authn.Anonymous),
		zap.Bool("csrServingCertificate", serving != nil))
	if serving == nil {
		return func(ctx context.Context) error { return srv.Serve(ctx, ln, tlsCfg) }, nil
	}
	return func(ctx context.Context) error {
		// The certificate's requests and renewals live as long as the
		// server.
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { serving.Run(gctx); return nil })
		g.Go(func() error { return srv.Serve(gctx, ln, tlsCfg) })
		return g.Wait()
	}, nil
}

// readOnlyPort serves the read-only endpoints over plain HTTP on
// --address:--read-only-port (no authentication: only when asked). A
// taken port costs the endpoint, not the pods.
func readOnlyPort(ctx context.Context, g *errgroup.Group, o *options, readers server.Config, log *zap.Logger) error {
	h, err := server.ReadOnly(readers)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(o.address, strconv.Itoa(o.readOnlyPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("no read-only port; pods are run regardless (free the port or change --read-only-port)", zap.Error(err))
		return nil
	}
	log.Warn("serving the read-only port: /healthz, /pods, /stats/summary, /metrics and /metrics/resource to anyone who can reach it, unauthenticated",
		zap.String("address", addr))
	g.Go(func() error { return metrics.Serve(ctx, ln, h) })
	return nil
}

// configz is the effective configuration in the KubeletConfiguration
// shape, for /configz (the settings with a KubeletConfiguration field).
func configz(o *options) kubeletv1beta1.KubeletConfiguration {
	i32 := func(v int) *int32 { n := int32(v); return &n }
	b := func(v bool) *bool { return &v }
	d := func(v time.Duration) metav1.Duration { return metav1.Duration{Duration: v} }
	return kubeletv1beta1.KubeletConfiguration{
		TypeMeta:           metav1.TypeMeta{Kind: "KubeletConfiguration", APIVersion: "kubelet.config.k8s.io/v1beta1"},
		StaticPodPath:      o.manifestDir,
		StaticPodURL:       o.manifestURL,
		SyncFrequency:      d(o.syncFrequency),
		FileCheckFrequency: d(o.fileCheckFrequency),
		HTTPCheckFrequency: d(o.httpCheckFrequency),
		Address:            o.address,
		Port:               int32(o.port),
		ReadOnlyPort:       int32(o.readOnlyPort),
		TLSCertFile:        o.tlsCertFile,
		TLSPrivateKeyFile:  o.tlsPrivateKeyFile,
		TLSCipherSuites:    o.tlsCipherSuites,
		TLSMinVersion:      o.tlsMinVersion,
		ServerTLSBootstrap: o.rotateServerCertificates,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: o.clientCAFile},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: b(o.authnTokenWebhook), CacheTTL: metav1.Duration{Duration: 2 * time.Minute}},
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: b(o.anonymousAuth)},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{
			Mode: kubeletv1beta1.KubeletAuthorizationMode(o.authorizationMode),
			Webhook: kubeletv1beta1.KubeletWebhookAuthorization{
				CacheAuthorizedTTL: metav1.Duration{Duration: 5 * time.Minute}, CacheUnauthorizedTTL: metav1.Duration{Duration: 30 * time.Second},
			},
		},
		HealthzBindAddress:          o.healthzBindAddress,
		HealthzPort:                 i32(o.healthzPort),
		ClusterDomain:               o.clusterDomain,
		ClusterDNS:                  o.clusterDNS,
		PodCIDR:                     o.podCIDR,
		MaxPods:                     int32(o.maxPods),
		RuntimeRequestTimeout:       d(o.runtimeRequestTimeout),
		ContainerRuntimeEndpoint:    o.containerRuntimeEndpoint,
		CgroupRoot:                  o.cgroupRoot,
		CgroupDriver:                o.cgroupDriver,
		CgroupsPerQOS:               b(o.cgroupsPerQOS),
		CPUManagerPolicy:            o.cpuManagerPolicy,
		ReservedSystemCPUs:          o.reservedCPUs,
		ContainerLogMaxSize:         o.containerLogMaxSize,
		ContainerLogMaxFiles:        i32(o.containerLogMaxFiles),
		PodLogsDir:                  o.podLogsDir,
		SerializeImagePulls:         b(o.serializeImagePulls),
		ImageGCHighThresholdPercent: i32(o.imageGCHighThreshold),
		ImageGCLowThresholdPercent:  i32(o.imageGCLowThreshold),
		SeccompDefault:              b(o.seccompDefault),
		AllowedUnsafeSysctls:        o.allowedUnsafeSysctls,
		NodeStatusUpdateFrequency:   d(o.nodeStatusUpdateFrequency),
		NodeStatusReportFrequency:   d(o.nodeStatusReportFrequency),
		NodeLeaseDurationSeconds:    int32(o.nodeLeaseDurationSeconds),
		RegisterNode:                b(o.registerNode),
		RegisterWithTaints:          o.taints,
		StaticPodURLHeader:          headers(o.manifestURLHeader.m),
		CPUManagerReconcilePeriod:   d(o.cpuManagerReconcilePeriod),
		CPUManagerPolicyOptions:     o.cpuManagerPolicyOptions.m,
		ResolverConfig:              &o.resolvConf,
		EnforceNodeAllocatable:      o.enforceNodeAllocatable,
		ContainerLogMaxWorkers:      i32(o.containerLogMaxWorkers),
		ContainerLogMonitorInterval: &metav1.Duration{Duration: o.containerLogMonitorInterval},
		MaxParallelImagePulls:       i32(o.maxParallelImagePulls),
		ImageMinimumGCAge:           d(o.imageMinimumGCAge),
		ImageMaximumGCAge:           d(o.imageMaximumGCAge),
		CrashLoopBackOff: kubeletv1beta1.CrashLoopBackOffConfig{
			MaxContainerRestartPeriod: &metav1.Duration{Duration: o.maxRestartBackoff},
		},
		EvictionHard:                     thresholdMap(o.evictionHard, "<"),
		EvictionSoft:                     thresholdMap(o.evictionSoft, "<"),
		EvictionSoftGracePeriod:          thresholdMap(o.evictionSoftGracePeriod, "="),
		EvictionPressureTransitionPeriod: d(o.evictionPressureTransition),
		EvictionMaxPodGracePeriod:        int32(o.evictionMaxPodGracePeriod),
		KubeReserved:                     o.kubeReserved.m,
		SystemReserved:                   o.systemReserved.m,
		KubeAPIQPS:                       i32(int(o.kubeAPIQPS)),
		KubeAPIBurst:                     int32(o.kubeAPIBurst),
		RotateCertificates:               o.rotateCertificates,
		Logging:                          logsapi.LoggingConfiguration{Verbosity: logsapi.VerbosityLevel(o.verbosity)},
	}
}

// headers is --manifest-url-header in the config's shape.
func headers(m map[string]string) map[string][]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = []string{v}
	}
	return out
}

// thresholdMap is a "signal<quantity,…" (op "<") or "signal=duration,…"
// (op "=") setting in the config's map shape.
func thresholdMap(s, op string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), op); ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
