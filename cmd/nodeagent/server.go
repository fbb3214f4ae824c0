package main

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeagent/nodeagent/internal/server"
	"github.com/nodeagent/nodeagent/internal/status"
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
	tlsCfg, err := server.TLSConfig(server.TLSOptions{
		CertFile: o.tlsCertFile, KeyFile: o.tlsPrivateKeyFile, CertDir: certDir, Host: nodeName, IPs: ips,
		MinVersion: o.tlsMinVersion, CipherSuites: o.tlsCipherSuites,
	})
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
		zap.Bool("clientCertificates", authn.ClientCAs != nil), zap.Bool("tokens", authn.Tokens != nil), zap.Bool("anonymous", authn.Anonymous))
	return func(ctx context.Context) error { return srv.Serve(ctx, ln, tlsCfg) }, nil
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
		TLSCertFile:        o.tlsCertFile,
		TLSPrivateKeyFile:  o.tlsPrivateKeyFile,
		TLSCipherSuites:    o.tlsCipherSuites,
		TLSMinVersion:      o.tlsMinVersion,
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
	}
}

// runningPods counts the published pods in phase Running.
func runningPods(statusDir string) int {
	pods, err := status.List(statusDir)
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range pods {
		if p.Status.Phase == v1.PodRunning {
			n++
		}
	}
	return n
}
