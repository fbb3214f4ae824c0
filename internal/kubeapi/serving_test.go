package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	certutil "k8s.io/client-go/util/cert"
	testclock "k8s.io/utils/clock/testing"
)

// signingCA signs CSRs as the controller-manager's kubelet-serving
// signer would.
type signingCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newSigningCA(t *testing.T) *signingCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &signingCA{cert: c, key: key}
}

// sign issues the certificate the request asks for, valid an hour.
func (ca *signingCA) sign(t *testing.T, csrPEM []byte, serial int64) []byte {
	t.Helper()
	b, _ := pem.Decode(csrPEM)
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: req.Subject, DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, req.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestServingCertRequest: the real certificate manager over a fake
// clientset whose CSRs are approved and signed as they are created: the
// CSR is the kubelet's serving request, the issued certificate is served
// and kept in the cert dir, and a restart serves it again without a new
// CSR.
func TestServingCertRequest(t *testing.T) {
	ca := newSigningCA(t)
	cs := fake.NewClientset()
	var mu sync.Mutex
	var created []*certificatesv1.CertificateSigningRequest
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		mu.Lock()
		defer mu.Unlock()
		created = append(created, csr.DeepCopy())
		// Fill in what the API server and the controller-manager would;
		// the default reactor then stores it.
		csr.Name = "csr-serving"
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		csr.Status.Certificate = ca.sign(t, csr.Spec.Request, int64(len(created)+1))
		return false, nil, nil
	})
	dir := t.TempDir()
	cfg := ServingConfig{Client: cs, CertDir: dir, NodeName: "node1", Hostnames: []string{"node1"},
		IPs: []net.IP{net.ParseIP("10.0.0.7")}, Clock: testclock.NewFakeClock(time.Now()), Logger: zaptest.NewLogger(t)}
	s, err := NewServingCert(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Current(); c != nil {
		t.Fatalf("a certificate before any CSR: %v", c.Leaf.Subject)
	}
	rot, ok := s.mgr.(interface{ RotateCerts() (bool, error) })
	if !ok {
		t.Fatalf("client-go's manager %T has no RotateCerts", s.mgr)
	}
	if done, err := rot.RotateCerts(); !done || err != nil {
		t.Fatalf("RotateCerts = %v, %v; want true, nil", done, err)
	}

	if len(created) != 1 {
		t.Fatalf("%d CSRs created; want 1", len(created))
	}
	spec := created[0].Spec
	if spec.SignerName != "kubernetes.io/kubelet-serving" {
		t.Errorf("signer %q; want kubernetes.io/kubelet-serving", spec.SignerName)
	}
	// The manager's key is ECDSA: no key encipherment (only for RSA, as
	// the kubelet).
	if diff := cmp.Diff([]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}, spec.Usages); diff != "" {
		t.Errorf("usages (-want +got):\n%s", diff)
	}
	b, _ := pem.Decode(spec.Request)
	req, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	type subject struct {
		CN  string
		O   []string
		DNS []string
		IPs []string
	}
	got := subject{CN: req.Subject.CommonName, O: req.Subject.Organization, DNS: req.DNSNames}
	for _, ip := range req.IPAddresses {
		got.IPs = append(got.IPs, ip.String())
	}
	want := subject{CN: "system:node:node1", O: []string{"system:nodes"}, DNS: []string{"node1"}, IPs: []string{"10.0.0.7"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}

	cur := s.Current()
	if cur == nil || cur.Leaf.Issuer.CommonName != "cluster-ca" || cur.Leaf.Subject.CommonName != "system:node:node1" {
		t.Fatalf("current certificate after issue: %+v", cur)
	}
	if _, err := os.Stat(filepath.Join(dir, "kubelet-server-current.pem")); err != nil {
		t.Fatalf("issued certificate not kept: %v", err)
	}

	// A restart reads it back.
	again, err := NewServingCert(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := again.Current(); c == nil || c.Leaf.SerialNumber.Cmp(cur.Leaf.SerialNumber) != 0 {
		t.Fatalf("after restart: %+v; want the issued certificate", c)
	}
}

// fakeManager is a certificate.Manager whose certificate the test sets.
type fakeManager struct {
	mu            sync.Mutex
	cert          *tls.Certificate
	started, stop int
}

func (f *fakeManager) Start()              { f.mu.Lock(); f.started++; f.mu.Unlock() }
func (f *fakeManager) Stop()               { f.mu.Lock(); f.stop++; f.mu.Unlock() }
func (f *fakeManager) ServerHealthy() bool { return true }
func (f *fakeManager) Current() *tls.Certificate {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cert
}

func leafCert(t *testing.T, ca *signingCA, serial int64) *tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "system:node:node1"},
		NotBefore: now, NotAfter: now.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// TestServingCertCheck: while there is no certificate the operator is
// told to approve the CSR, at once and then every minute; each new
// certificate is logged once, a replaced one as rotated.
func TestServingCertCheck(t *testing.T) {
	ca := newSigningCA(t)
	first, second := leafCert(t, ca, 10), leafCert(t, ca, 11)
	clk := testclock.NewFakeClock(time.Now())
	core, logs := observer.New(zap.InfoLevel)
	mgr := &fakeManager{}
	s := &ServingCert{mgr: mgr, clock: clk, log: zap.New(core), node: "node1"}

	steps := []struct {
		name string
		step time.Duration
		cert *tls.Certificate
		want []string // messages logged by this check
	}{
		{name: "none at start", want: []string{"no serving certificate"}},
		{name: "none, 30s later", step: 30 * time.Second},
		{name: "none, a minute later", step: 30 * time.Second, want: []string{"no serving certificate"}},
		{name: "issued", step: time.Second, cert: first, want: []string{"serving certificate"}},
		{name: "same", step: time.Second, cert: first},
		{name: "rotated", step: time.Second, cert: second, want: []string{"serving certificate rotated"}},
		{name: "expired", step: time.Second, want: []string{"no serving certificate"}},
	}
	for _, st := range steps {
		clk.Step(st.step)
		mgr.mu.Lock()
		mgr.cert = st.cert
		mgr.mu.Unlock()
		s.check()
		var got []string
		for _, e := range logs.TakeAll() {
			msg := e.Message
			if e.Level == zap.WarnLevel {
				msg = "no serving certificate" // the long operator message
				if e.ContextMap()["requestor"] != "system:node:node1" {
					t.Errorf("%s: warning without the CSR's requestor: %v", st.name, e.ContextMap())
				}
			}
			got = append(got, msg)
		}
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s: logged (-want +got):\n%s", st.name, diff)
		}
	}
}

// TestServingCertRunStopsTheManager: Run starts the manager, checks at
// once, and stops it when its context ends.
func TestServingCertRunStopsTheManager(t *testing.T) {
	mgr := &fakeManager{}
	core, logs := observer.New(zap.InfoLevel)
	s := &ServingCert{mgr: mgr, clock: testclock.NewFakeClock(time.Now()), log: zap.New(core), node: "node1"}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Run(ctx)
	if mgr.started != 1 || mgr.stop != 1 {
		t.Fatalf("manager started %d, stopped %d times; want 1, 1", mgr.started, mgr.stop)
	}
	if logs.FilterLevelExact(zap.WarnLevel).Len() != 1 {
		t.Fatalf("no warning about the missing certificate: %v", logs.All())
	}
}

// TestNewServingCertValidates: the required fields.
func TestNewServingCertValidates(t *testing.T) {
	ok := ServingConfig{Client: fake.NewClientset(), CertDir: t.TempDir(), NodeName: "n", Hostnames: []string{"n"},
		Clock: testclock.NewFakeClock(time.Now()), Logger: zaptest.NewLogger(t)}
	for _, tc := range []struct {
		name string
		edit func(*ServingConfig)
	}{
		{"no client", func(c *ServingConfig) { c.Client = nil }},
		{"no cert dir", func(c *ServingConfig) { c.CertDir = "" }},
		{"no node", func(c *ServingConfig) { c.NodeName = "" }},
		{"no address", func(c *ServingConfig) { c.Hostnames = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			if _, err := NewServingCert(c); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	if _, err := NewServingCert(ok); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
}

// TestServingCertGivenFiles: --tls-cert-file/--tls-private-key-file are
// served until an issued certificate replaces them (as the kubelet's
// store); the issued one then wins, at the next start too.
func TestServingCertGivenFiles(t *testing.T) {
	dir := t.TempDir()
	crt, key, err := certutil.GenerateSelfSignedCertKey("node1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "given.crt"), filepath.Join(dir, "given.key")
	if err := os.WriteFile(certFile, crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	ca := newSigningCA(t)
	cs := fake.NewClientset()
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		csr := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		csr.Name = "csr-serving"
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}}
		csr.Status.Certificate = ca.sign(t, csr.Spec.Request, 2)
		return false, nil, nil
	})
	cfg := ServingConfig{Client: cs, CertDir: filepath.Join(dir, "pki"), NodeName: "node1", Hostnames: []string{"node1"},
		CertFile: certFile, KeyFile: keyFile, Clock: testclock.NewFakeClock(time.Now()), Logger: zaptest.NewLogger(t)}
	s, err := NewServingCert(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Current(); c == nil || c.Leaf.Issuer.CommonName == "cluster-ca" {
		t.Fatalf("before a CSR: %+v; want the given certificate", c)
	}
	if done, err := s.mgr.(interface{ RotateCerts() (bool, error) }).RotateCerts(); !done || err != nil {
		t.Fatalf("RotateCerts = %v, %v", done, err)
	}
	if c := s.Current(); c == nil || c.Leaf.Issuer.CommonName != "cluster-ca" {
		t.Fatalf("after issue: %+v; want the issued certificate", c)
	}
	again, err := NewServingCert(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := again.Current(); c == nil || c.Leaf.Issuer.CommonName != "cluster-ca" {
		t.Fatalf("after restart: %+v; want the issued certificate, not the given one", c)
	}
}
