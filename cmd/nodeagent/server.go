package main

import (
	"context"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	v1 "k8s.io/api/core/v1"
	certutil "k8s.io/client-go/util/cert"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/kubeapi"
	"github.com/nodeagent/nodeagent/internal/metrics"
	"github.com/nodeagent/nodeagent/internal/server"
)

// nodeServer builds the node's HTTPS server (API mode: the API server
// authenticates and authorizes its callers) and opens its socket. A taken
// port costs the server, not the pods: it is logged and serve is nil.
func nodeServer(o *options, api *kubeapi.Mode, rt server.Runtime, nodeName, nodeIP string, pods func() ([]*v1.Pod, error),
	s server.Config, log *zap.Logger) (serve func(context.Context) error, err error) {
	certDir := o.certDirOrDefault()
	var ips []net.IP
	if ip := net.ParseIP(nodeIP); ip != nil {
		ips = append(ips, ip)
	}
	tlsOpts := server.TLSOptions{
		CertFile: o.TLSCertFile, KeyFile: o.TLSPrivateKeyFile, CertDir: certDir, Host: nodeName, IPs: ips,
		MinVersion: o.TLSMinVersion, CipherSuites: o.TLSCipherSuites,
	}
	var serving *kubeapi.ServingCert
	if o.ServerTLSBootstrap {
		// As the kubelet with serverTLSBootstrap: the certificate comes
		// from a CSR; --tls-cert-file, if given, is not an error but only
		// served until the first issued certificate replaces it (the
		// kubelet hands it to the same store).
		serving, err = kubeapi.NewServingCert(kubeapi.ServingConfig{
			Client: api.Client.Clientset, CertDir: certDir, NodeName: nodeName, Hostnames: []string{nodeName}, IPs: ips,
			CertFile: o.TLSCertFile, KeyFile: o.TLSPrivateKeyFile, Clock: clock.RealClock{}, Logger: log,
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
	authn := server.AuthnConfig{Anonymous: *o.Authentication.Anonymous.Enabled}
	if o.Authentication.X509.ClientCAFile != "" {
		if authn.ClientCAs, err = certutil.NewPool(o.Authentication.X509.ClientCAFile); err != nil {
			return nil, err
		}
	}
	if *o.Authentication.Webhook.Enabled {
		authn.Tokens = api.Client.Clientset.AuthenticationV1().TokenReviews()
	}
	s.NodeName, s.Pods, s.Runtime, s.Logger, s.CallTimeout, s.PodLogsDir = nodeName, pods, rt, log, o.RuntimeRequestTimeout.Duration, o.PodLogsDir
	s.Authenticator = server.NewAuthenticator(authn)
	s.Authorizer = server.AlwaysAllow{}
	if string(o.Authorization.Mode) == "Webhook" {
		s.Authorizer = &server.Webhook{Reviews: api.Client.Clientset.AuthorizationV1().SubjectAccessReviews()}
	}
	s.Configz = func() any { return map[string]any{"kubeletconfig": configz(o)} }
	srv, err := server.New(s)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(o.Address, strconv.Itoa(int(o.Port)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Error("no node server (kubectl exec/attach/port-forward); pods are run regardless (free the port or set --port)", zap.Error(err))
		return nil, nil
	}
	log.Info("serving the node server", zap.String("address", addr), zap.String("authorization", string(o.Authorization.Mode)),
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
	addr := net.JoinHostPort(o.Address, strconv.Itoa(int(o.ReadOnlyPort)))
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

// configz is the effective configuration, for /configz: the
// KubeletConfiguration the flags and --config were parsed onto, holding
// only fields nodeagent implements, with its credentials redacted: the
// password and query values of the manifest URL and the values of its headers (an
// Authorization header, a token), which a reader of /configz (nodes/proxy
// or nodes/configz) has no business reading.
func configz(o *options) kubeletv1beta1.KubeletConfiguration {
	kc := o.KubeletConfiguration
	kc.StaticPodURL = redactURL(kc.StaticPodURL)
	if len(kc.StaticPodURLHeader) > 0 {
		kc.StaticPodURLHeader = make(map[string][]string, len(o.StaticPodURLHeader))
		for name, values := range o.StaticPodURLHeader {
			kc.StaticPodURLHeader[name] = slices.Repeat([]string{redacted}, len(values))
		}
	}
	return kc
}

// redacted stands for a credential /configz does not show.
const redacted = "[redacted]"

// redactURL hides a URL's password (user:xxxxx@host, as url.Redacted)
// and its query's values (a presigned URL's signature, a token); a URL
// that does not parse is hidden whole.
func redactURL(s string) string {
	if s == "" {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return redacted
	}
	if u.User != nil {
		// A user name alone may be the token (https://token@host/).
		if _, ok := u.User.Password(); !ok {
			u.User = url.User("xxxxx")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		var bare int
		for k, vs := range q {
			if slices.ContainsFunc(vs, func(v string) bool { return v != "" }) {
				q[k] = slices.Repeat([]string{"xxxxx"}, len(vs))
				continue
			}
			// A bare key (?<token>) is the secret itself.
			delete(q, k)
			bare++
		}
		u.RawQuery = q.Encode()
		if bare > 0 {
			u.RawQuery = strings.TrimPrefix(u.RawQuery+"&"+strings.TrimSuffix(strings.Repeat("xxxxx&", bare), "&"), "&")
		}
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "xxxxx", ""
	}
	return u.Redacted()
}
