package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// TLSOptions are the serving TLS settings (the kubelet's flags).
type TLSOptions struct {
	CertFile, KeyFile string   // both or neither: the serving certificate
	CertDir           string   // else kubelet.crt/kubelet.key here, self-signed at first start
	Host              string   // the self-signed certificate's name (the node name)
	IPs               []net.IP // and its IP SANs
	MinVersion        string   // VersionTLS12 (default) or VersionTLS13
	CipherSuites      []string // TLS 1.2 suites by Go name; empty: Go's defaults
	// Certificates, when set, is read at every handshake for a
	// certificate that changes (CSR-issued and rotated): CertFile,
	// KeyFile, CertDir, Host and IPs are then not used here.
	Certificates CertificateSource
}

// CertificateSource supplies a rotated serving certificate (client-go's
// certificate.Manager satisfies it). Current is called concurrently, once
// per handshake, and returns nil while there is no certificate.
type CertificateSource interface {
	Current() *tls.Certificate
}

// ErrNoServingCertificate fails a handshake while the CertificateSource
// has no certificate (the node's serving CSR not yet approved and issued).
var ErrNoServingCertificate = errors.New("no serving certificate available for the node: approve its CSR (kubectl certificate approve)")

// TLSConfig builds the serving tls.Config: the certificate, a minimum of
// TLS 1.2, only secure cipher suites, and client certificates requested
// (not required: they are verified by the authenticator, so that a bad
// one is a 401 rather than a failed handshake).
func TLSConfig(o TLSOptions) (*tls.Config, error) {
	cfg := &tls.Config{ClientAuth: tls.RequestClientCert}
	switch o.MinVersion {
	case "", "VersionTLS12":
		cfg.MinVersion = tls.VersionTLS12
	case "VersionTLS13":
		cfg.MinVersion = tls.VersionTLS13
	default:
		return nil, fmt.Errorf("TLS minimum version %q: want VersionTLS12 or VersionTLS13", o.MinVersion)
	}
	suites, err := cipherSuites(o.CipherSuites)
	if err != nil {
		return nil, err
	}
	cfg.CipherSuites = suites
	if o.Certificates != nil {
		cfg.GetCertificate = getCertificate(o.Certificates)
		return cfg, nil
	}
	cert, err := servingCert(o)
	if err != nil {
		return nil, err
	}
	cfg.Certificates = []tls.Certificate{cert}
	return cfg, nil
}

// getCertificate serves src's certificate of the moment, so that a
// rotated one is served from the next handshake on.
func getCertificate(src CertificateSource) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := src.Current(); c != nil {
			return c, nil
		}
		return nil, ErrNoServingCertificate
	}
}

func cipherSuites(names []string) ([]uint16, error) {
	if len(names) == 0 {
		return nil, nil
	}
	secure := map[string]uint16{}
	var known []string
	for _, s := range tls.CipherSuites() {
		secure[s.Name] = s.ID
		known = append(known, s.Name)
	}
	sort.Strings(known)
	var ids []uint16
	for _, n := range names {
		id, ok := secure[n]
		if !ok {
			return nil, fmt.Errorf("TLS cipher suite %q: unknown or insecure; want one of %s", n, strings.Join(known, ","))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// servingCert loads the given certificate, or the one in CertDir,
// generating a self-signed one there when there is none.
func servingCert(o TLSOptions) (tls.Certificate, error) {
	if (o.CertFile == "") != (o.KeyFile == "") {
		return tls.Certificate{}, fmt.Errorf("give both the TLS certificate and private key files, or neither")
	}
	certFile, keyFile := o.CertFile, o.KeyFile
	if certFile == "" {
		if o.CertDir == "" {
			return tls.Certificate{}, fmt.Errorf("no serving certificate: give its files or a cert dir")
		}
		certFile, keyFile = filepath.Join(o.CertDir, "kubelet.crt"), filepath.Join(o.CertDir, "kubelet.key")
		if ok, _ := certutil.CanReadCertAndKey(certFile, keyFile); !ok {
			if err := os.MkdirAll(o.CertDir, 0o700); err != nil {
				return tls.Certificate{}, fmt.Errorf("serving certificate: %w", err)
			}
			crt, key, err := certutil.GenerateSelfSignedCertKey(o.Host, o.IPs, nil)
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("generate self-signed serving certificate: %w", err)
			}
			if err := certutil.WriteCert(certFile, crt); err != nil {
				return tls.Certificate{}, fmt.Errorf("write serving certificate: %w", err)
			}
			if err := keyutil.WriteKey(keyFile, key); err != nil {
				return tls.Certificate{}, fmt.Errorf("write serving key: %w", err)
			}
		}
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load serving certificate: %w", err)
	}
	return cert, nil
}
