package kubeapi

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

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
	certPEM, keyPEM, err := pemPair(leafCert(t, ca, 7))
	if err != nil {
		t.Fatal(err)
	}
	for _, rotate := range []bool{true, false} {
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
			QPS: 5, Burst: 10, RotateCertificates: rotate, Logger: zaptest.NewLogger(t)})
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
			t.Fatalf("no rotation: store written (%v) or the embedded certificate not used", err)
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
