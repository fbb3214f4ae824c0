package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"testing"
)

// fakeCerts is a CertificateSource whose certificate the test swaps, as
// the certificate manager does at a rotation.
type fakeCerts struct {
	mu    sync.Mutex
	cert  *tls.Certificate
	calls int
}

func (f *fakeCerts) Current() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.cert
}

func (f *fakeCerts) set(c *tls.Certificate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cert = c
}

// handshake makes one TLS connection to a server with cfg over loopback
// and returns the leaf it served, the client's error and the server's.
func handshake(t *testing.T, cfg *tls.Config) (leaf *x509.Certificate, clientErr, serverErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srvErr := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			srvErr <- err
			return
		}
		defer conn.Close()
		srvErr <- tls.Server(conn, cfg).Handshake()
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := tls.Client(conn, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test reads the served leaf itself
	if clientErr = c.Handshake(); clientErr == nil {
		leaf = c.ConnectionState().PeerCertificates[0]
	}
	conn.Close()
	return leaf, clientErr, <-srvErr
}

// TestTLSConfigRotatedCertificate: with a CertificateSource, each
// handshake serves its certificate of the moment (a rotated one from the
// next handshake on), and none fails the handshake with
// ErrNoServingCertificate — the server runs on regardless.
func TestTLSConfigRotatedCertificate(t *testing.T) {
	ca := newCA(t, "ca")
	first, second := ca.client(t, "first", nil, x509.ExtKeyUsageServerAuth), ca.client(t, "second", nil, x509.ExtKeyUsageServerAuth)
	src := &fakeCerts{}
	// CertDir and the files are not used: nothing would be generated.
	cfg, err := TLSConfig(TLSOptions{Certificates: src, CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Certificates) != 0 {
		t.Fatalf("static certificates %d beside the source; want none (Go would serve them to clients without SNI)", len(cfg.Certificates))
	}

	steps := []struct {
		name string
		cert *tls.Certificate
		want string // served CN; "" for a failed handshake
	}{
		{name: "no certificate yet", cert: nil},
		{name: "issued", cert: &first, want: "first"},
		{name: "same again", cert: &first, want: "first"},
		{name: "rotated", cert: &second, want: "second"},
		{name: "expired, none", cert: nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			src.set(s.cert)
			leaf, cErr, sErr := handshake(t, cfg)
			if s.want == "" {
				if cErr == nil {
					t.Fatalf("handshake succeeded serving %q; want it refused", leaf.Subject.CommonName)
				}
				if !errors.Is(sErr, ErrNoServingCertificate) {
					t.Fatalf("server error %v; want %v", sErr, ErrNoServingCertificate)
				}
				return
			}
			if cErr != nil || sErr != nil {
				t.Fatalf("handshake: client %v, server %v", cErr, sErr)
			}
			if leaf.Subject.CommonName != s.want {
				t.Fatalf("served %q; want %q", leaf.Subject.CommonName, s.want)
			}
		})
	}
	if src.calls != len(steps) {
		t.Errorf("source read %d times; want once per handshake (%d)", src.calls, len(steps))
	}
}
