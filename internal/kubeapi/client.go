package kubeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/certificate"
	"k8s.io/utils/clock"
)

// ClientConfig says how the agent reaches the API server.
type ClientConfig struct {
	// Kubeconfig is the node's kubeconfig. With BootstrapKubeconfig set
	// and Kubeconfig missing (or its certificate expired), the agent asks
	// for a client certificate with a CSR and writes Kubeconfig itself.
	Kubeconfig          string
	BootstrapKubeconfig string
	// CertDir holds the issued certificates (kubelet-client-current.pem).
	CertDir  string
	NodeName string
	QPS      float32
	Burst    int
	// RotateCertificates requests a new client certificate before the
	// current one expires (only for certificates the agent obtained
	// itself, in CertDir).
	RotateCertificates bool
	// HeartbeatTimeout bounds each request of the heartbeat client (the
	// kubelet's: the node lease's duration); default 40s.
	HeartbeatTimeout time.Duration
	// Clock times the wait for the client certificate and judges a
	// kubeconfig certificate's expiry; the wall clock when nil.
	Clock  clock.WithTicker
	Logger *zap.Logger
}

// Client is the node's connection to the API server.
type Client struct {
	Clientset kubernetes.Interface
	// Heartbeat is the Node status's and Lease's own client, as the
	// kubelet's heartbeat client: not rate limited, each request bounded
	// by ClientConfig.HeartbeatTimeout, so that nothing else the agent asks of the API
	// server (status writes, events, tokens, the node server's reviews)
	// can delay them.
	Heartbeat kubernetes.Interface
	Config    *rest.Config
	certs     certificate.Manager
}

// Stop ends certificate rotation.
func (c *Client) Stop() {
	if c.certs != nil {
		c.certs.Stop()
	}
}

// clientPairPrefix names the client certificate files in CertDir, as the
// kubelet does.
const clientPairPrefix = "kubelet-client"

// Connect builds the node's client: from Kubeconfig when it holds a usable
// credential, or by TLS bootstrap — a CSR for signer
// kubernetes.io/kube-apiserver-client-kubelet with CN system:node:<node>
// and O system:nodes, made with BootstrapKubeconfig's credential, waited
// for until approved and issued — after which Kubeconfig is written to
// point at the issued certificate. Requests use protobuf.
func Connect(ctx context.Context, c ClientConfig) (*Client, error) {
	log := c.Logger.Named("client")
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Kubeconfig == "" {
		return nil, errors.New("--kubeconfig is required for API mode")
	}
	if c.CertDir == "" {
		return nil, errors.New("--cert-dir is required")
	}
	usable, err := kubeconfigUsable(c.Kubeconfig, c.Clock)
	if err != nil && c.BootstrapKubeconfig == "" {
		return nil, err
	}
	var mgr certificate.Manager
	if !usable {
		if c.BootstrapKubeconfig == "" {
			return nil, fmt.Errorf("kubeconfig %s: no usable credential and no --bootstrap-kubeconfig", c.Kubeconfig)
		}
		if err != nil {
			log.Info("kubeconfig not usable; bootstrapping a client certificate", zap.String("kubeconfig", c.Kubeconfig), zap.Error(err))
		}
		boot, err := clientcmd.BuildConfigFromFlags("", c.BootstrapKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("bootstrap kubeconfig: %w", err)
		}
		mgr, err = newClientCertManager(c, boot, nil, nil)
		if err != nil {
			return nil, err
		}
		mgr.Start()
		if err := waitForCert(ctx, mgr, c.Clock, log); err != nil {
			mgr.Stop()
			return nil, err
		}
		if err := writeKubeconfig(c.Kubeconfig, boot, filepath.Join(c.CertDir, clientPairPrefix+"-current.pem")); err != nil {
			mgr.Stop()
			return nil, err
		}
		log.Info("client certificate issued; kubeconfig written", zap.String("kubeconfig", c.Kubeconfig))
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		if mgr != nil {
			mgr.Stop()
		}
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	current := filepath.Join(c.CertDir, clientPairPrefix+"-current.pem")
	if mgr == nil && c.RotateCertificates && sameFile(cfg.CertFile, current) {
		// The store's certificate (an earlier bootstrap's, or kubeadm's
		// kubelet.conf after kubelet-finalize): keep rotating it, asking
		// with the current certificate.
		if mgr, err = newClientCertManager(c, rest.AnonymousClientConfig(cfg), nil, nil); err != nil {
			return nil, err
		}
		mgr.Start()
	} else if mgr == nil && c.RotateCertificates && hasClientCert(cfg) && nodeClientCert(cfg, c.NodeName, log) {
		// A client certificate of the kubeconfig's own (kubeadm's
		// kubelet.conf embeds one, valid a year): as the kubelet, it
		// becomes the store's first certificate
		// (<cert-dir>/kubelet-client-current.pem, which kubeadm's
		// kubelet-finalize then points kubelet.conf at) and is rotated
		// from there; the client reads the store's file.
		certPEM, keyPEM, err := clientCertPEM(cfg)
		if err != nil {
			return nil, err
		}
		if mgr, err = newClientCertManager(c, rest.AnonymousClientConfig(cfg), certPEM, keyPEM); err != nil {
			return nil, err
		}
		mgr.Start()
		cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = nil, nil
		cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = current, current
		log.Info("the kubeconfig's client certificate is now the certificate store's, rotated from there",
			zap.String("kubeconfig", c.Kubeconfig), zap.String("certificate", current))
	} else if mgr != nil && !c.RotateCertificates {
		mgr.Stop()
		mgr = nil
	}
	cfg.QPS, cfg.Burst = c.QPS, c.Burst
	cfg.UserAgent = "nodeagent/" + c.NodeName
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		if mgr != nil {
			mgr.Stop()
		}
		return nil, err
	}
	hbCfg := rest.CopyConfig(cfg)
	hbCfg.QPS, hbCfg.Burst, hbCfg.Timeout = -1, 0, c.HeartbeatTimeout // QPS < 0: no rate limiter
	if hbCfg.Timeout <= 0 {
		hbCfg.Timeout = 40 * time.Second
	}
	hbCfg.UserAgent = cfg.UserAgent + "-heartbeat"
	hb, err := kubernetes.NewForConfig(hbCfg)
	if err != nil {
		if mgr != nil {
			mgr.Stop()
		}
		return nil, err
	}
	return &Client{Clientset: cs, Heartbeat: hb, Config: cfg, certs: mgr}, nil
}

// newClientCertManager returns client-go's certificate manager for the
// node's client certificate: it requests one at Start when CertDir has
// none, and a new one before the current one expires. Requests are made
// with the current certificate once there is one, else with the
// bootstrap credential. A certificate given as initialCert/initialKey
// (PEM) is stored as the current one when CertDir has none, and renewed
// at once (the kubelet's bootstrap certificate handling).
func newClientCertManager(c ClientConfig, boot *rest.Config, initialCert, initialKey []byte) (certificate.Manager, error) {
	if err := os.MkdirAll(c.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("cert dir: %w", err)
	}
	store, err := certificate.NewFileStore(clientPairPrefix, c.CertDir, c.CertDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("certificate store: %w", err)
	}
	clientsetFn := func(current *tls.Certificate) (kubernetes.Interface, error) {
		cfg := rest.CopyConfig(boot)
		if current != nil {
			certPEM, keyPEM, err := pemPair(current)
			if err != nil {
				return nil, err
			}
			cfg = rest.AnonymousClientConfig(boot) // the server and CA, no credential
			cfg.TLSClientConfig.CertData, cfg.TLSClientConfig.KeyData = certPEM, keyPEM
		}
		cfg.UserAgent = "nodeagent-csr/" + c.NodeName
		return kubernetes.NewForConfig(cfg)
	}
	return certificate.NewManager(&certificate.Config{
		ClientsetFn: clientsetFn,
		Template: &x509.CertificateRequest{Subject: pkix.Name{
			CommonName:   "system:node:" + c.NodeName,
			Organization: []string{"system:nodes"},
		}},
		SignerName:              certificatesv1.KubeAPIServerClientKubeletSignerName,
		Usages:                  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		CertificateStore:        store,
		BootstrapCertificatePEM: initialCert,
		BootstrapKeyPEM:         initialKey,
		Name:                    "kubelet-client",
	})
}

// hasClientCert reports whether cfg authenticates with a client
// certificate (embedded or in files).
func hasClientCert(cfg *rest.Config) bool {
	t := cfg.TLSClientConfig
	return len(t.CertData) > 0 || t.CertFile != ""
}

// nodeClientCert reports whether cfg's client certificate is this node's
// (CN system:node:<node>, O system:nodes): only such a one goes to the
// store and is renewed through the node's CSR; any other (an operator's
// admin certificate) is used as it is, with a warning.
func nodeClientCert(cfg *rest.Config, nodeName string, log *zap.Logger) bool {
	certPEM, _, err := clientCertPEM(cfg)
	if err != nil {
		return false
	}
	certs, err := parseCerts(certPEM)
	if err != nil || len(certs) == 0 {
		return false
	}
	subj := certs[0].Subject
	if subj.CommonName == "system:node:"+nodeName && slices.Contains(subj.Organization, "system:nodes") {
		return true
	}
	log.Warn("the kubeconfig's client certificate is not this node's; used as it is and not rotated",
		zap.String("subject", subj.String()), zap.String("want", "CN=system:node:"+nodeName+",O=system:nodes"))
	return false
}

// clientCertPEM is cfg's client certificate and key, PEM.
func clientCertPEM(cfg *rest.Config) (certPEM, keyPEM []byte, err error) {
	t := cfg.TLSClientConfig
	certPEM, keyPEM = t.CertData, t.KeyData
	if len(certPEM) == 0 {
		if certPEM, err = os.ReadFile(t.CertFile); err != nil {
			return nil, nil, fmt.Errorf("kubeconfig client certificate: %w", err)
		}
	}
	if len(keyPEM) == 0 {
		if keyPEM, err = os.ReadFile(t.KeyFile); err != nil {
			return nil, nil, fmt.Errorf("kubeconfig client key: %w", err)
		}
	}
	// A kubelet's certificate store file holds both (its kubeconfig names
	// it as certificate and key): each part gets only its own blocks.
	certPEM, keyPEM = pemBlocks(certPEM, func(typ string) bool { return typ == "CERTIFICATE" }),
		pemBlocks(keyPEM, func(typ string) bool { return strings.HasSuffix(typ, "PRIVATE KEY") })
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, nil, errors.New("kubeconfig client certificate: no certificate or no private key in PEM")
	}
	return certPEM, keyPEM, nil
}

// pemBlocks re-encodes the PEM blocks of b whose type keep accepts.
func pemBlocks(b []byte, keep func(typ string) bool) []byte {
	var out []byte
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if keep(blk.Type) {
			out = append(out, pem.EncodeToMemory(blk)...)
		}
	}
}

func waitForCert(ctx context.Context, mgr certificate.Manager, clk clock.WithTicker, log *zap.Logger) error {
	t := clk.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	warned := clk.Now()
	for mgr.Current() == nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the client certificate (is the node's CSR approved?): %w", ctx.Err())
		case <-t.C():
		}
		if clk.Since(warned) > 30*time.Second {
			log.Warn("still waiting for the node's client certificate; approve its CSR (kubectl certificate approve)")
			warned = clk.Now()
		}
	}
	return nil
}

// kubeconfigUsable reports whether path is a kubeconfig with a credential
// that can be used: a token, or a client certificate not yet expired.
func kubeconfigUsable(path string, clk clock.PassiveClock) (bool, error) {
	if _, err := os.Stat(path); err != nil {
		return false, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return false, err
	}
	if cfg.BearerToken != "" || cfg.BearerTokenFile != "" || cfg.ExecProvider != nil || cfg.AuthProvider != nil || cfg.Username != "" {
		return true, nil
	}
	certPEM := cfg.TLSClientConfig.CertData
	if len(certPEM) == 0 && cfg.TLSClientConfig.CertFile != "" {
		if certPEM, err = os.ReadFile(cfg.TLSClientConfig.CertFile); err != nil {
			return false, fmt.Errorf("kubeconfig client certificate: %w", err)
		}
	}
	if len(certPEM) == 0 {
		return false, fmt.Errorf("kubeconfig %s has no credential", path)
	}
	certs, err := parseCerts(certPEM)
	if err != nil {
		return false, fmt.Errorf("kubeconfig client certificate: %w", err)
	}
	if clk.Now().After(certs[0].NotAfter) {
		return false, fmt.Errorf("kubeconfig client certificate expired at %s", certs[0].NotAfter.Format(time.RFC3339))
	}
	return true, nil
}

// writeKubeconfig writes the node's kubeconfig: boot's server and CA, and
// the issued certificate's file (cert and key in one, rotated in place).
func writeKubeconfig(path string, boot *rest.Config, certFile string) error {
	cluster := &clientcmdapi.Cluster{Server: boot.Host, CertificateAuthority: boot.TLSClientConfig.CAFile,
		CertificateAuthorityData: boot.TLSClientConfig.CAData, TLSServerName: boot.TLSClientConfig.ServerName,
		InsecureSkipTLSVerify: boot.TLSClientConfig.Insecure}
	if cluster.CertificateAuthority != "" {
		if abs, err := filepath.Abs(cluster.CertificateAuthority); err == nil {
			cluster.CertificateAuthority = abs
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["default-cluster"] = cluster
	kc.AuthInfos["default-auth"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: certFile}
	kc.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}
	kc.CurrentContext = "default-context"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*kc, tmp); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return os.Rename(tmp, path)
}

func sameFile(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}
