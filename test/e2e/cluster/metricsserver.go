package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
)

// metricsAPIService is the APIService metrics-server serves.
const metricsAPIService = "v1beta1.metrics.k8s.io"

// MetricsServer is metrics-server run as a host process and registered
// with the aggregation layer.
type MetricsServer struct {
	c    *Cluster
	proc *process
}

// StartMetricsServer runs the cached metrics-server (hack/install-controlplane.sh)
// on ip:port — an address of this host the API server can dial and that an
// Endpoints object may hold (not loopback: the CNI bridge's) — scraping the
// nodes' /metrics/resource every resolution with the admin credential, and
// registers it as the v1beta1.metrics.k8s.io APIService through a
// selector-less Service and its Endpoints (the API server routes to the
// endpoint: --enable-aggregator-routing). It returns once the APIService
// is Available.
func (c *Cluster) StartMetricsServer(ctx context.Context, ip net.IP, port int, resolution time.Duration) (*MetricsServer, error) {
	dir := filepath.Join(c.Dir, "metrics-server")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	args := []string{
		"--bind-address=" + ip.String(),
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + dir,
		"--kubeconfig=" + c.AdminKubeconfig,
		"--authentication-kubeconfig=" + c.AdminKubeconfig,
		"--authorization-kubeconfig=" + c.AdminKubeconfig,
		// The agents' serving certificates are self-signed.
		"--kubelet-insecure-tls",
		"--kubelet-preferred-address-types=InternalIP",
		// The port each Node publishes (daemonEndpoints), not 10250.
		"--kubelet-use-node-status-port",
		"--metric-resolution=" + resolution.String(),
		"--kubelet-request-timeout=" + (resolution / 2).String(),
		"--profiling=false",
	}
	proc, err := startProcess("metrics-server", filepath.Join(c.bin, "metrics-server"), args, filepath.Join(c.Dir, "metrics-server.log"))
	if err != nil {
		return nil, err
	}
	m := &MetricsServer{c: c, proc: proc}
	if err := m.register(ctx, ip, port); err != nil {
		m.Stop()
		return nil, err
	}
	return m, nil
}

func (m *MetricsServer) register(ctx context.Context, ip net.IP, port int) error {
	cs := m.c.Admin
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: "kube-system"},
		Spec:       v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}},
	}
	if _, err := cs.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("metrics-server Service: %w", err)
	}
	//nolint:staticcheck // Endpoints: the EndpointSlice mirroring controller makes the slice the aggregator reads.
	ep := &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-server", Namespace: "kube-system"},
		Subsets: []v1.EndpointSubset{{
			Addresses: []v1.EndpointAddress{{IP: ip.String()}},
			Ports:     []v1.EndpointPort{{Name: "https", Port: int32(port)}},
		}},
	}
	if _, err := cs.CoreV1().Endpoints("kube-system").Create(ctx, ep, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = cs.CoreV1().Endpoints("kube-system").Update(ctx, ep, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("metrics-server Endpoints: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("metrics-server Endpoints: %w", err)
	}
	apiService := fmt.Sprintf(`{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":%q},
"spec":{"group":"metrics.k8s.io","version":"v1beta1","insecureSkipTLSVerify":true,"groupPriorityMinimum":100,"versionPriority":100,
"service":{"name":"metrics-server","namespace":"kube-system","port":443}}}`, metricsAPIService)
	f := filepath.Join(m.c.Dir, "metrics-apiservice.json")
	if err := os.WriteFile(f, []byte(apiService), 0o644); err != nil {
		return err
	}
	if _, err := m.c.Kubectl(ctx, "apply", "-f", f); err != nil {
		return err
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if m.proc.exited() != nil {
			// Its usage text buries the cause: grep the error lines.
			return false, fmt.Errorf("metrics-server exited: %s", errorLines(m.proc.logPath))
		}
		out, err := m.c.Kubectl(ctx, "get", "apiservice", metricsAPIService, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}`)
		last = out
		if err != nil {
			last = err.Error()
			return false, nil
		}
		return len(out) >= 4 && out[:4] == "True", nil
	})
	if err != nil {
		return fmt.Errorf("metrics-server APIService not Available: %w (last: %s); end of %s:\n%s", err, last, m.proc.logPath, tailFile(m.proc.logPath, 30))
	}
	return nil
}

// Log is the tail of metrics-server's log, for a failing test.
func (m *MetricsServer) Log() string { return tailFile(m.proc.logPath, 30) }

// Stop unregisters the APIService, its Service and Endpoints, and stops
// the process.
func (m *MetricsServer) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m.c.Kubectl(ctx, "delete", "apiservice", metricsAPIService, "--ignore-not-found") //nolint:errcheck
	m.c.Admin.CoreV1().Services("kube-system").Delete(ctx, "metrics-server", metav1.DeleteOptions{})
	m.c.Admin.CoreV1().Endpoints("kube-system").Delete(ctx, "metrics-server", metav1.DeleteOptions{}) //nolint:staticcheck // see register
	m.proc.stop()
}

// errorLines are the lines of a log that report an error (klog's E
// lines, cobra's "Error:").
func errorLines(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Error:") || strings.HasPrefix(l, "E1") || strings.HasPrefix(l, "F1") {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return tailFile(path, 20)
	}
	return strings.Join(out, "\n")
}
