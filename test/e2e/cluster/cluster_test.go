//go:build integration

package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509/pkix"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	begin := time.Now()
	c, err := Start(ctx, Options{Dir: dir, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start took %v", since(begin))
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
				t.Logf("---- %s.log ----\n%s", name, tailFile(filepath.Join(dir, name+".log"), 60))
			}
		}
		c.Stop()
	})

	t.Run("admin", func(t *testing.T) {
		if _, err := c.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list nodes as admin: %v", err)
		}
		out, err := c.Kubectl(ctx, "get", "namespace", "default", "-o", "name")
		if err != nil || strings.TrimSpace(out) != "namespace/default" {
			t.Fatalf("kubectl get namespace default = %q, %v", out, err)
		}
	})

	t.Run("bootstrap CSR", func(t *testing.T) {
		testBootstrapCSR(t, ctx, c)
	})

	t.Run("apiserver restart", func(t *testing.T) {
		begin := time.Now()
		if err := c.StopAPIServer(); err != nil {
			t.Fatal(err)
		}
		t.Logf("StopAPIServer took %v", since(begin))
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.Admin.CoreV1().Nodes().List(rctx, metav1.ListOptions{})
		rcancel()
		if err == nil {
			t.Fatal("list nodes succeeded with the apiserver stopped")
		}
		begin = time.Now()
		if err := c.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		t.Logf("StartAPIServer took %v", since(begin))
		if _, err := c.Admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list nodes after restart: %v", err)
		}
	})

	t.Run("stop", func(t *testing.T) {
		var pids []int
		for _, p := range []*process{c.etcd, c.apiserver, c.controllerManager} {
			pids = append(pids, p.cmd.Process.Pid)
		}
		u, err := url.Parse(c.URL)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		c.Stop()
		t.Logf("Stop took %v", since(begin))
		for _, pid := range pids {
			// The processes led their own groups: neither the PID nor
			// the group may remain.
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process %d after Stop: kill 0 = %v, want ESRCH", pid, err)
			}
			if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("process group %d after Stop: kill 0 = %v, want ESRCH", pid, err)
			}
		}
		if conn, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Stop", u.Host)
		}
	})
}

// testBootstrapCSR walks the agent's TLS bootstrap: the bootstrap token
// creates a kubelet client CSR, which stays pending until ApproveCSRs; the
// controller-manager signs it; the node identity is then confined by the
// Node authorizer.
func testBootstrapCSR(t *testing.T, ctx context.Context, c *Cluster) {
	const node = "e2e-node"
	signer := certificatesv1.KubeAPIServerClientKubeletSignerName
	bcfg, err := clientcmd.BuildConfigFromFlags("", c.BootstrapKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	bootstrap := kubernetes.NewForConfigOrDie(bcfg)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM, err := cert.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	name, uid, err := csr.RequestCertificateWithContext(ctx, bootstrap, csrPEM, "", signer, nil, usages, key)
	if err != nil {
		t.Fatalf("create CSR with the bootstrap token: %v", err)
	}

	// Nothing approves it on its own.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		got, err := c.Admin.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !pending(got) {
			t.Fatalf("CSR %s left pending before ApproveCSRs: %+v", name, got.Status.Conditions)
		}
		time.Sleep(250 * time.Millisecond)
	}

	n, err := c.ApproveCSRs(ctx, signer)
	if err != nil || n != 1 {
		t.Fatalf("ApproveCSRs = %d, %v; want 1, nil", n, err)
	}
	if n, err := c.ApproveCSRs(ctx, signer); err != nil || n != 0 {
		t.Fatalf("second ApproveCSRs = %d, %v; want 0, nil", n, err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	certPEM, err := csr.WaitForCertificate(wctx, bootstrap, name, uid)
	if err != nil {
		t.Fatalf("wait for the signed certificate: %v", err)
	}
	certs, err := cert.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if got := certs[0].Subject.CommonName; got != "system:node:"+node {
		t.Errorf("issued CN = %q", got)
	}
	if err := certs[0].CheckSignatureFrom(c.pki.ca.cert); err != nil {
		t.Errorf("issued certificate not signed by the cluster CA: %v", err)
	}

	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	nodeClient := kubernetes.NewForConfigOrDie(&rest.Config{
		Host: c.URL,
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   c.CAFile,
			CertData: certPEM,
			KeyData:  keyPEM,
		},
	})
	_, err = nodeClient.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("get own Node as %s: %v; want found or NotFound", certs[0].Subject.CommonName, err)
	}
	_, err = nodeClient.CoreV1().Secrets(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("list secrets as the node: %v; want Forbidden", err)
	}
}
