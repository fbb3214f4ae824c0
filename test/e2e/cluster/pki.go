package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// keyPair is a certificate with its key, both also PEM-encoded.
type keyPair struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// pki is every credential the control plane needs, written under dir as
// <name>.crt / <name>.key.
type pki struct {
	dir               string
	ca                *keyPair // signs everything below and the controller-manager's CSRs
	apiserver         *keyPair // serving: 127.0.0.1, localhost, kubernetes.default.svc, 10.96.0.1
	admin             *keyPair // O=system:masters
	controllerManager *keyPair // CN=system:kube-controller-manager
	kubeletClient     *keyPair // the apiserver's client cert towards agents (O=system:masters)
	frontProxyClient  *keyPair // the aggregator's client cert towards extension API servers (metrics-server)
	serviceAccount    *ecdsa.PrivateKey
}

// File names under pki.dir.
const (
	caName                = "ca"
	apiserverName         = "apiserver"
	adminName             = "admin"
	controllerManagerName = "controller-manager"
	kubeletClientName     = "apiserver-kubelet-client"
	frontProxyClientName  = "front-proxy-client"
	serviceAccountName    = "sa"
)

func (p *pki) crt(name string) string { return filepath.Join(p.dir, name+".crt") }
func (p *pki) key(name string) string { return filepath.Join(p.dir, name+".key") }
func (p *pki) saPub() string          { return filepath.Join(p.dir, serviceAccountName+".pub") }

// newPKI generates the cluster's credentials and writes them under dir.
func newPKI(dir string, serviceIP net.IP, now time.Time) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	var err error
	if p.ca, err = selfSignedCA("nodeagent-e2e-ca", now); err != nil {
		return nil, fmt.Errorf("generate CA: %w", err)
	}
	leaves := []struct {
		name string
		dst  **keyPair
		tmpl x509.Certificate
	}{
		{apiserverName, &p.apiserver, x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), serviceIP},
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default",
				"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		}},
		{adminName, &p.admin, clientTemplate("nodeagent-e2e-admin", "system:masters")},
		{controllerManagerName, &p.controllerManager, clientTemplate("system:kube-controller-manager")},
		{kubeletClientName, &p.kubeletClient, clientTemplate("kube-apiserver-kubelet-client", "system:masters")},
		{frontProxyClientName, &p.frontProxyClient, clientTemplate(frontProxyClientName)},
	}
	for _, l := range leaves {
		kp, err := p.ca.issue(l.tmpl, now)
		if err != nil {
			return nil, fmt.Errorf("issue %s certificate: %w", l.name, err)
		}
		*l.dst = kp
	}
	if p.serviceAccount, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}

	for name, kp := range map[string]*keyPair{
		caName: p.ca, apiserverName: p.apiserver, adminName: p.admin,
		controllerManagerName: p.controllerManager, kubeletClientName: p.kubeletClient, frontProxyClientName: p.frontProxyClient,
	} {
		if err := os.WriteFile(p.crt(name), kp.certPEM, 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p.key(name), kp.keyPEM, 0o600); err != nil {
			return nil, err
		}
	}
	saKey, err := keyPEM(p.serviceAccount)
	if err != nil {
		return nil, err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&p.serviceAccount.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.key(serviceAccountName), saKey, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPub(), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

func clientTemplate(cn string, orgs ...string) x509.Certificate {
	return x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: orgs},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// selfSignedCA makes a ten-year CA, long enough that the controller-manager
// never caps a signed certificate's lifetime to it.
func selfSignedCA(cn string, now time.Time) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return newKeyPair(der, key)
}

// issue signs a one-year leaf for tmpl's subject, SANs and extended usages.
func (ca *keyPair) issue(tmpl x509.Certificate, now time.Time) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, err
	}
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return newKeyPair(der, key)
}

func newKeyPair(der []byte, key *ecdsa.PrivateKey) (*keyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  kp,
	}, nil
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}
