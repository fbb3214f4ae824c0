package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
	"k8s.io/utils/clock"
)

// servingPairPrefix names the serving certificate files in the cert dir
// (kubelet-server-current.pem), as the kubelet does.
const servingPairPrefix = "kubelet-server"

// servingWarnEvery is how often the missing serving certificate is
// logged again.
const servingWarnEvery = time.Minute

// ServingConfig says what the node's serving certificate is requested
// for.
type ServingConfig struct {
	// Client is the node's own client: the CSR's requestor is then
	// system:node:<node>, which is what an approver checks.
	Client   kubernetes.Interface
	CertDir  string
	NodeName string
	// Hostnames and IPs are the certificate's DNS and IP SANs: the
	// addresses the API server dials the node at.
	Hostnames []string
	IPs       []net.IP
	// CertFile and KeyFile, when given, are served until the first
	// issued certificate replaces them — the kubelet's store does the
	// same with --tls-cert-file under --rotate-server-certificates. One
	// that does not match the request (CN, O, SANs) is replaced at once,
	// one that does at 70–90% of its lifetime.
	CertFile, KeyFile string
	Clock             clock.WithTicker
	Logger            *zap.Logger
}

// ServingCert is the node server's certificate, requested through a CSR
// for signer kubernetes.io/kubelet-serving (CN system:node:<node>, O
// system:nodes) and renewed by client-go's certificate manager at 70–90%
// of its lifetime, as the kubelet's server certificate manager. Issued
// certificates are kept in CertDir (kubelet-server-current.pem) and
// reused at the next start.
//
// Current is safe for concurrent use (the server calls it at every
// handshake) and returns nil until a certificate is issued. Run starts
// the requests and stops them when its context ends; Current before Run
// returns what CertDir (or CertFile) already holds.
type ServingCert struct {
	mgr   certificate.Manager
	clock clock.WithTicker
	log   *zap.Logger
	node  string

	// Run's goroutine only.
	served *tls.Certificate // last certificate logged
	warned time.Time        // last warning about there being none
}

// NewServingCert builds the node's serving certificate manager; nothing
// is requested before Run.
func NewServingCert(c ServingConfig) (*ServingCert, error) {
	switch {
	case c.Client == nil:
		return nil, errors.New("serving certificate: no API client")
	case c.CertDir == "":
		return nil, errors.New("serving certificate: no cert dir")
	case c.NodeName == "":
		return nil, errors.New("serving certificate: no node name")
	case c.Clock == nil || c.Logger == nil:
		return nil, errors.New("serving certificate: no clock or logger")
	case len(c.Hostnames) == 0 && len(c.IPs) == 0:
		return nil, errors.New("serving certificate: no DNS name nor IP to request it for")
	}
	mgr, err := newServingCertManager(c)
	if err != nil {
		return nil, err
	}
	return &ServingCert{mgr: mgr, clock: c.Clock, log: c.Logger.Named("serving-cert"), node: c.NodeName}, nil
}

// newServingCertManager is client-go's certificate manager configured as
// the kubelet's NewKubeletServerCertificateManager: signer
// kubernetes.io/kubelet-serving, usages digital signature and server auth
// (plus key encipherment for an RSA key), the node's identity and
// addresses.
func newServingCertManager(c ServingConfig) (certificate.Manager, error) {
	if err := os.MkdirAll(c.CertDir, 0o700); err != nil {
		return nil, fmt.Errorf("cert dir: %w", err)
	}
	store, err := certificate.NewFileStore(servingPairPrefix, c.CertDir, c.CertDir, c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate store: %w", err)
	}
	client := c.Client
	mgr, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
		Template: &x509.CertificateRequest{
			Subject: pkix.Name{
				CommonName:   "system:node:" + c.NodeName,
				Organization: []string{"system:nodes"},
			},
			DNSNames:    c.Hostnames,
			IPAddresses: c.IPs,
		},
		SignerName:       certificatesv1.KubeletServingSignerName,
		GetUsages:        certificate.DefaultKubeletServingGetUsages,
		CertificateStore: store,
		Name:             "kubelet-serving",
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	return mgr, nil
}

// Current is the certificate to serve, nil while none is issued (or the
// last one expired).
func (s *ServingCert) Current() *tls.Certificate { return s.mgr.Current() }

// Run requests the certificate (when there is none, or the one there
// does not match the request) and renews it, logging a warning while
// there is none, until ctx ends; then it stops the manager.
func (s *ServingCert) Run(ctx context.Context) {
	s.mgr.Start()
	defer s.mgr.Stop()
	t := s.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.check()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// check logs the certificate's state once: a warning while there is none
// (at once, then every servingWarnEvery), an Info line for each new one.
func (s *ServingCert) check() {
	cur := s.mgr.Current()
	now := s.clock.Now()
	if cur == nil || len(cur.Certificate) == 0 {
		if s.warned.IsZero() || now.Sub(s.warned) >= servingWarnEvery {
			s.log.Warn("no serving certificate: the node server refuses TLS (kubectl exec/logs/port-forward fail) until the node's CSR is approved and issued; pods run regardless. Approve it: kubectl get csr, then kubectl certificate approve <name>",
				zap.String("signer", certificatesv1.KubeletServingSignerName), zap.String("requestor", "system:node:"+s.node))
			s.warned = now
		}
		return
	}
	s.warned = time.Time{}
	if s.served != nil && bytes.Equal(s.served.Certificate[0], cur.Certificate[0]) {
		return
	}
	leaf := cur.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cur.Certificate[0]); err != nil {
			s.log.Error("serving certificate unreadable", zap.Error(err))
			return
		}
	}
	msg := "serving certificate"
	if s.served != nil {
		msg = "serving certificate rotated"
	}
	s.log.Info(msg, zap.String("issuer", leaf.Issuer.CommonName), zap.Strings("dnsNames", leaf.DNSNames),
		zap.Time("notBefore", leaf.NotBefore), zap.Time("notAfter", leaf.NotAfter))
	s.served = cur
}
