package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: epoch, NotAfter: epoch.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return &testCA{cert: c, key: key}
}

// client issues a certificate; tls.Certificate for real handshakes.
func (ca *testCA) client(t *testing.T, cn string, groups []string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: epoch, NotAfter: epoch.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

func TestAuthenticateX509(t *testing.T) {
	ca, other := newCA(t, "ca"), newCA(t, "other")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	for _, tc := range []struct {
		name string
		cert tls.Certificate
		now  time.Time
		want *User
	}{
		{"signed by the CA", ca.client(t, "kube-apiserver-kubelet-client", []string{"system:masters"}, x509.ExtKeyUsageClientAuth), epoch.Add(time.Minute),
			&User{Name: "kube-apiserver-kubelet-client", Groups: []string{"system:masters"}}},
		{"other CA", other.client(t, "mallory", []string{"system:masters"}, x509.ExtKeyUsageClientAuth), epoch.Add(time.Minute), nil},
		{"expired", ca.client(t, "alice", nil, x509.ExtKeyUsageClientAuth), epoch.Add(2 * time.Hour), nil},
		{"server usage only", ca.client(t, "alice", nil, x509.ExtKeyUsageServerAuth), epoch.Add(time.Minute), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAuthenticator(AuthnConfig{ClientCAs: pool, Clock: clocktesting.NewFakePassiveClock(tc.now)})
			r := httptest.NewRequest("GET", "/pods", nil)
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.cert.Leaf}}
			got, err := a.Authenticate(r)
			if tc.want == nil {
				if !errors.Is(err, errUnauthenticated) {
					t.Fatalf("got %v, %v; want unauthenticated", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("user (-want +got):\n%s", d)
			}
		})
	}
}

// tokenReactor authenticates the token "good" as alice; counts reviews.
func tokenReactor(calls *int, fail *bool) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		if *fail {
			return true, nil, errors.New("apiserver away")
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if tr.Spec.Token == "good" {
			tr.Status.Authenticated = true
			tr.Status.User = authenticationv1.UserInfo{Username: "alice", UID: "u1", Groups: []string{"devs"},
				Extra: map[string]authenticationv1.ExtraValue{"scopes": {"a"}}}
		}
		return true, tr, nil
	}
}

func TestAuthenticateTokenAndCache(t *testing.T) {
	var calls int
	var fail bool
	cs := fake.NewSimpleClientset()
	cs.PrependReactor("create", "tokenreviews", tokenReactor(&calls, &fail))
	clk := clocktesting.NewFakeClock(epoch)
	a := NewAuthenticator(AuthnConfig{Tokens: cs.AuthenticationV1().TokenReviews(), Clock: clk})
	auth := func(token string) (*User, error) {
		r := httptest.NewRequest("GET", "/pods", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return a.Authenticate(r)
	}
	want := &User{Name: "alice", UID: "u1", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"a"}}}
	for i := 0; i < 2; i++ {
		u, err := auth("good")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, u); d != "" {
			t.Fatalf("user (-want +got):\n%s", d)
		}
	}
	if calls != 1 {
		t.Fatalf("%d reviews for two requests with one token; want 1 (cached)", calls)
	}
	for i := 0; i < 2; i++ {
		if _, err := auth("bad"); !errors.Is(err, errUnauthenticated) {
			t.Fatalf("bad token: %v", err)
		}
	}
	if calls != 2 {
		t.Fatalf("%d reviews; want 2 (refusals cached too)", calls)
	}
	clk.Step(2*time.Minute + time.Second)
	if _, err := auth("good"); err != nil || calls != 3 {
		t.Fatalf("after the TTL: %v, %d reviews; want a new review", err, calls)
	}
	fail = true
	if _, err := auth("other"); err == nil || errors.Is(err, errUnauthenticated) {
		t.Fatalf("review error: got %v", err)
	}
	fail = false
	if _, err := auth("other"); !errors.Is(err, errUnauthenticated) || calls != 5 {
		t.Fatalf("after a failed review: %v, %d reviews; want a new review (errors not cached)", err, calls)
	}
}

func TestAuthenticateAnonymous(t *testing.T) {
	r := httptest.NewRequest("GET", "/pods", nil)
	if _, err := NewAuthenticator(AuthnConfig{}).Authenticate(r); !errors.Is(err, errUnauthenticated) {
		t.Fatalf("no credentials, anonymous off: %v; want unauthenticated", err)
	}
	u, err := NewAuthenticator(AuthnConfig{Anonymous: true}).Authenticate(r)
	if err != nil || u.Name != "system:anonymous" || !cmp.Equal(u.Groups, []string{"system:unauthenticated"}) {
		t.Fatalf("anonymous on: %+v, %v", u, err)
	}
}
