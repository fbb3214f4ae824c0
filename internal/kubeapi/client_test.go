package kubeapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A kubeconfig with an embedded client certificate (kubeadm's
// kubelet.conf) under --rotate-certificates: the certificate becomes the
// store's current one and the client reads it from there, as the
// kubelet's; without rotation the kubeconfig is used as it is.
func TestEmbeddedClientCertificateGoesToTheStore(t *testing.T) {
	ca := newSigningCA(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), NotBefore: now, NotAfter: now.Add(time.Hour),
		Subject: pkix.Name{CommonName: "system:node:node1", Organization: []string{"system:nodes"}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := pemPair(&tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	// An operator's certificate (not this node's): used as it is.
	adminPEM, adminKey, err := pemPair(leafCert(t, ca, 8)) // CN system:node:node1 but no O system:nodes
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rotate  bool
		cert    []byte
		key     []byte
		toStore bool
	}{{true, certPEM, keyPEM, true}, {false, certPEM, keyPEM, false}, {true, adminPEM, adminKey, false}} {
		rotate := tc.toStore
		certPEM, keyPEM := tc.cert, tc.key
		dir := t.TempDir()
		kubeconfig := filepath.Join(dir, "kubelet.conf")
		kc := clientcmdapi.NewConfig()
		kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
		kc.AuthInfos["a"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
		kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "a"}
		kc.CurrentContext = "x"
		if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
			t.Fatal(err)
		}
		pki := filepath.Join(dir, "pki")
		cl, err := Connect(context.Background(), ClientConfig{Kubeconfig: kubeconfig, CertDir: pki, NodeName: "node1",
			QPS: 5, Burst: 10, RotateCertificates: tc.rotate, Logger: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		cl.Stop()
		current := filepath.Join(pki, "kubelet-client-current.pem")
		stored, err := os.ReadFile(current)
		switch {
		case rotate && (err != nil || !bytes.Contains(stored, certPEM)):
			t.Fatalf("rotate: store %v, err %v: want the kubeconfig's certificate", string(stored), err)
		case rotate && (cl.Config.CertFile != current || len(cl.Config.CertData) != 0):
			t.Fatalf("rotate: client reads %q (data %d bytes), want the store's file", cl.Config.CertFile, len(cl.Config.CertData))
		case !rotate && (err == nil || len(cl.Config.CertData) == 0):
			t.Fatalf("rotate %v, certificate to the store %v: store written (%v) or the embedded certificate not used", tc.rotate, tc.toStore, err)
		}
	}
}

// The heartbeat client (Node status, Lease) is not rate limited, so the
// agent's other requests cannot starve it; the shared client is.
func TestHeartbeatClientIsNotRateLimited(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.AuthInfos["a"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "a"}
	kc.CurrentContext = "x"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	cl, err := Connect(context.Background(), ClientConfig{Kubeconfig: kubeconfig, CertDir: filepath.Join(dir, "pki"), NodeName: "node1",
		QPS: 5, Burst: 10, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	if cl.Clientset.CoreV1().RESTClient().GetRateLimiter() == nil {
		t.Error("the shared client has no rate limiter")
	}
	if rl := cl.Heartbeat.CoordinationV1().RESTClient().GetRateLimiter(); rl != nil {
		t.Errorf("the heartbeat client is rate limited (%T)", rl)
	}
}

// A kubeconfig naming another kubelet's certificate store file (one PEM
// file with the certificate and the key, given as both) under
// --rotate-certificates: its certificate becomes this store's.
func TestAnotherStoresCertificateGoesToTheStore(t *testing.T) {
	ca := newSigningCA(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(9), NotBefore: now, NotAfter: now.Add(time.Hour),
		Subject: pkix.Name{CommonName: "system:node:node1", Organization: []string{"system:nodes"}}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := pemPair(&tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	combined := filepath.Join(dir, "elsewhere", "kubelet-client-current.pem")
	os.MkdirAll(filepath.Dir(combined), 0o700)
	if err := os.WriteFile(combined, append(append([]byte{}, certPEM...), keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubelet.conf")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}
	kc.AuthInfos["a"] = &clientcmdapi.AuthInfo{ClientCertificate: combined, ClientKey: combined}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "a"}
	kc.CurrentContext = "x"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	pki := filepath.Join(dir, "pki")
	cl, err := Connect(context.Background(), ClientConfig{Kubeconfig: kubeconfig, CertDir: pki, NodeName: "node1",
		QPS: 5, Burst: 10, RotateCertificates: true, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	cl.Stop()
	current := filepath.Join(pki, "kubelet-client-current.pem")
	if stored, err := os.ReadFile(current); err != nil || !bytes.Contains(stored, certPEM) || cl.Config.CertFile != current {
		t.Fatalf("store %q (%v), client reads %q: want the other store's certificate here", stored, err, cl.Config.CertFile)
	}
}
