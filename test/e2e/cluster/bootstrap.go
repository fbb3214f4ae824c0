package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Bootstrap RBAC: the group of every bootstrap token and the built-in role
// that lets it create and read CSRs. Nothing grants the group the
// nodeclient auto-approval role, so kubelet client CSRs stay pending until
// ApproveCSRs.
const (
	bootstrappersGroup   = "system:bootstrappers"
	nodeBootstrapperRole = "system:node-bootstrapper"
	bootstrapBinding     = "nodeagent-e2e:node-bootstrapper"
)

// bootstrapToken creates a bootstrap token Secret and the binding that lets
// its group create CSRs, and writes BootstrapKubeconfig.
func (c *Cluster) bootstrapToken(ctx context.Context) error {
	id, secret := randomToken(6), randomToken(16)
	_, err := c.Admin.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{
			"description":                    "nodeagent e2e bootstrap token",
			"token-id":                       id,
			"token-secret":                   secret,
			"usage-bootstrap-authentication": "true",
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("cluster: create bootstrap token: %w", err)
	}
	_, err = c.Admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapBinding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: nodeBootstrapperRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: bootstrappersGroup}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("cluster: bind %s: %w", bootstrappersGroup, err)
	}
	c.BootstrapToken = id + "." + secret
	c.BootstrapKubeconfig = filepath.Join(c.Dir, "bootstrap.kubeconfig")
	return c.writeKubeconfig(c.BootstrapKubeconfig, &clientcmdapi.AuthInfo{Token: c.BootstrapToken})
}

// randomToken returns n characters of [a-z0-9], the bootstrap token
// alphabet.
func randomToken(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// waitDefaults waits until the controller-manager has made namespace
// default usable for pods: its ServiceAccount `default` (required by the
// ServiceAccount admission plugin) and ConfigMap kube-root-ca.crt (mounted
// by every projected service-account volume).
func (c *Cluster) waitDefaults(ctx context.Context) error {
	var last error
	err := poll(ctx, defaultsTimeout, func(ctx context.Context) (bool, error) {
		if err := c.controllerManager.exited(); err != nil {
			return false, err
		}
		if _, err := c.Admin.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			last = fmt.Errorf("serviceaccount default/default: %w", err)
			return false, nil
		}
		if _, err := c.Admin.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
			last = fmt.Errorf("configmap default/kube-root-ca.crt: %w", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		p := c.controllerManager
		return fmt.Errorf("cluster: wait for the controller-manager's defaults: %w (last: %v); end of %s:\n%s", err, last, p.logPath, tailFile(p.logPath, 40))
	}
	return nil
}

// ApproveCSRs approves every pending CSR (neither approved, denied nor
// failed) for signerName through the approval subresource, as
// `kubectl certificate approve` does, and returns how many it approved. The
// controller-manager then signs them with the cluster CA.
func (c *Cluster) ApproveCSRs(ctx context.Context, signerName string) (int, error) {
	list, err := c.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.signerName", signerName).String(),
	})
	if err != nil {
		return 0, fmt.Errorf("list CSRs of %s: %w", signerName, err)
	}
	n := 0
	for i := range list.Items {
		csr := &list.Items[i]
		if !pending(csr) {
			continue
		}
		csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
			Type:           certificatesv1.CertificateApproved,
			Status:         corev1.ConditionTrue,
			Reason:         "NodeagentE2EApprove",
			Message:        "approved by the nodeagent e2e test",
			LastUpdateTime: metav1.Now(),
		})
		_, err := c.Admin.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{})
		if err != nil {
			return n, fmt.Errorf("approve CSR %s: %w", csr.Name, err)
		}
		n++
	}
	return n, nil
}

func pending(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return false
		}
	}
	return true
}
