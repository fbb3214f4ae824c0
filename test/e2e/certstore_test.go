//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certSerial is the serial of the first certificate in a PEM file.
func certSerial(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return ""
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return c.SerialNumber.String()
		}
	}
}

// TestAPIKubeconfigWithEmbeddedCertificateIsRotated: kubeadm's
// kubelet.conf embeds the node's client certificate. As the kubelet,
// nodeagent makes it the certificate store's first one
// (<cert-dir>/kubelet-client-current.pem, which kubeadm's
// kubelet-finalize points kubelet.conf at), renews it through a CSR
// and goes on with the renewed one.
func TestAPIKubeconfigWithEmbeddedCertificateIsRotated(t *testing.T) {
	c := apiCluster(t)
	a := joined(t, c)
	a.stop()
	pki := filepath.Join(a.root, "pki")
	current := filepath.Join(pki, "kubelet-client-current.pem")
	pair, err := os.ReadFile(current)
	if err != nil {
		t.Fatal(err)
	}
	issued := certSerial(t, current)
	// kubeadm's shape: the certificate and key in the kubeconfig itself,
	// nothing in the store.
	kubeconfig := filepath.Join(a.root, "kubeconfig")
	kc, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var certPEM, keyPEM bytes.Buffer
	for rest := pair; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			pem.Encode(&certPEM, blk)
		} else {
			pem.Encode(&keyPEM, blk)
		}
	}
	for name := range kc.AuthInfos {
		kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM.Bytes(), ClientKeyData: keyPEM.Bytes()}
	}
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(pki); err != nil {
		t.Fatal(err)
	}

	a.start()
	eventually(t, 30*time.Second, "the embedded certificate in the store", func() bool {
		return certSerial(t, current) == issued
	})
	// Renewed at once (the kubelet's bootstrap certificate): a CSR for
	// the node, approved as kube-controller-manager's approver would.
	eventually(t, 60*time.Second, "the certificate renewed through a CSR", func() bool {
		c.ApproveCSRs(context.Background(), certificatesv1.KubeAPIServerClientKubeletSignerName)
		s := certSerial(t, current)
		return s != "" && s != issued
	})
	// The node goes on, with the renewed certificate: its Lease renews.
	renewed := time.Now()
	eventually(t, 30*time.Second, "Lease renewed after the renewal", func() bool {
		l, err := c.Admin.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), a.node, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(renewed)
	})
}
