package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Service network of the cluster; the apiserver's serving certificate
// carries the first address (the `kubernetes` Service's ClusterIP).
const (
	serviceCIDR = "10.96.0.0/16"
	issuer      = "https://kubernetes.default.svc"
)

var serviceIP = net.IPv4(10, 96, 0, 1)

// Bounds of Start's waits.
const (
	etcdTimeout      = 30 * time.Second
	apiserverTimeout = 90 * time.Second
	defaultsTimeout  = 60 * time.Second
	pollInterval     = 200 * time.Millisecond
)

// Options configure Start.
type Options struct {
	// Dir holds certificates, kubeconfigs, etcd's data and the logs
	// (etcd.log, kube-apiserver.log, kube-controller-manager.log).
	// Required; t.TempDir() is the usual choice.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and
	// kubectl. Default $NODEAGENT_RIG_CACHE/bin, else
	// /root/.cache/nodeagent-rig/bin (hack/install-controlplane.sh).
	BinDir string
	// Logf receives progress lines (t.Logf); nil discards them.
	Logf func(format string, args ...any)
}

// Cluster is a running control plane. Its exported fields are read-only.
type Cluster struct {
	URL                 string                // https://127.0.0.1:<port>
	Admin               *kubernetes.Clientset // system:masters
	AdminKubeconfig     string                // path, system:masters
	BootstrapKubeconfig string                // path, bootstrap token (group system:bootstrappers): may create CSRs
	BootstrapToken      string                // <id>.<secret>, the token in BootstrapKubeconfig
	CAFile              string                // cluster CA: serves the apiserver, signs client certs and CSRs
	Dir                 string                // Options.Dir, with the component logs

	logf          func(string, ...any)
	bin           string
	pki           *pki
	apiserverArgs []string
	etcdPorts     [2]int // client, peer

	mu                sync.Mutex // guards the processes
	etcd              *process
	apiserver         *process
	controllerManager *process
}

// Start brings up etcd, kube-apiserver and kube-controller-manager on
// 127.0.0.1 and returns once pods can be created in namespace default (its
// default ServiceAccount and kube-root-ca.crt ConfigMap exist). ctx bounds
// the start only; the processes live until Stop. On error nothing is left
// running.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	begin := time.Now()
	if o.Dir == "" {
		return nil, errors.New("cluster: Options.Dir is required")
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.BinDir == "" {
		cache := os.Getenv("NODEAGENT_RIG_CACHE")
		if cache == "" {
			cache = "/root/.cache/nodeagent-rig"
		}
		o.BinDir = filepath.Join(cache, "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("cluster: find %s: %w; build the control plane with `bash hack/install-controlplane.sh`", b, err)
		}
	}
	c := &Cluster{Dir: o.Dir, logf: o.Logf, bin: o.BinDir}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()

	if c.pki, err = newPKI(filepath.Join(o.Dir, "pki"), serviceIP, begin); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	c.CAFile = c.pki.crt(caName)
	ports, err := freePorts(3)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	etcdClient, etcdPeer, securePort := ports[0], ports[1], ports[2]
	c.URL = "https://127.0.0.1:" + strconv.Itoa(securePort)

	c.AdminKubeconfig = filepath.Join(o.Dir, "admin.kubeconfig")
	if err := c.writeKubeconfig(c.AdminKubeconfig, certUser(c.pki.admin)); err != nil {
		return nil, err
	}
	cmKubeconfig := filepath.Join(o.Dir, "controller-manager.kubeconfig")
	if err := c.writeKubeconfig(cmKubeconfig, certUser(c.pki.controllerManager)); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster: load admin kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	if c.Admin, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("cluster: admin client: %w", err)
	}

	c.etcdPorts = [2]int{etcdClient, etcdPeer}
	if err := c.startEtcd(ctx, etcdClient, etcdPeer); err != nil {
		return nil, err
	}
	c.logf("cluster: etcd ready on 127.0.0.1:%d after %v", etcdClient, since(begin))

	c.apiserverArgs = c.kubeAPIServerArgs(etcdClient, securePort)
	if err := c.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	c.logf("cluster: kube-apiserver ready at %s after %v", c.URL, since(begin))

	c.mu.Lock()
	c.controllerManager, err = startProcess("kube-controller-manager", filepath.Join(c.bin, "kube-controller-manager"),
		c.kubeControllerManagerArgs(cmKubeconfig), filepath.Join(o.Dir, "kube-controller-manager.log"))
	c.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}

	if err := c.bootstrapToken(ctx); err != nil {
		return nil, err
	}
	if err := c.waitDefaults(ctx); err != nil {
		return nil, err
	}
	c.logf("cluster: up in %v (dir %s)", since(begin), o.Dir)
	return c, nil
}

// Stop ends kube-controller-manager, kube-apiserver and etcd (SIGTERM, then
// SIGKILL after 15 s) and waits for them. It removes nothing; Dir keeps the
// logs and etcd's data. Idempotent.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range []**process{&c.controllerManager, &c.apiserver, &c.etcd} {
		(*p).stop()
		*p = nil
	}
}

// StopAPIServer stops only kube-apiserver (etcd and the controller-manager
// keep running). A no-op when it is already stopped.
func (c *Cluster) StopAPIServer() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver == nil {
		return nil
	}
	c.apiserver.stop()
	c.apiserver = nil
	c.logf("cluster: kube-apiserver stopped")
	return nil
}

// StartAPIServer starts kube-apiserver with Start's flags and port and waits
// (at most 90 s) until /readyz answers ok. A no-op when it is running.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver != nil {
		return nil
	}
	p, err := startProcess("kube-apiserver", filepath.Join(c.bin, "kube-apiserver"), c.apiserverArgs,
		filepath.Join(c.Dir, "kube-apiserver.log"))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	c.apiserver = p
	if err := c.waitReadyz(ctx, p); err != nil {
		p.stop()
		c.apiserver = nil
		return err
	}
	return nil
}

// RestartEtcd stops etcd (SIGTERM) and starts it again on its data and
// ports, waiting (at most etcdTimeout) until it is healthy; the API
// server meanwhile finds its store gone and reconnects.
func (c *Cluster) RestartEtcd(ctx context.Context) error {
	c.mu.Lock()
	if c.etcd != nil {
		c.etcd.stop()
		c.etcd = nil
	}
	c.mu.Unlock()
	c.logf("cluster: etcd stopped")
	return c.startEtcd(ctx, c.etcdPorts[0], c.etcdPorts[1])
}

// Kubectl runs the cached kubectl as system:masters and returns its stdout;
// the error carries stderr.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func (c *Cluster) startEtcd(ctx context.Context, clientPort, peerPort int) error {
	clientURL := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := []string{
		"--name=e2e",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=e2e=" + peerURL,
		"--initial-cluster-state=new",
		// A throwaway test store: skipping fsync spares the VM's disk
		// and shortens every write the apiserver makes.
		"--unsafe-no-fsync=true",
	}
	c.mu.Lock()
	p, err := startProcess("etcd", filepath.Join(c.bin, "etcd"), args, filepath.Join(c.Dir, "etcd.log"))
	c.etcd = p
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	var last error
	err = poll(ctx, etcdTimeout, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"health":"true"`)) {
			return true, nil
		}
		last = fmt.Errorf("GET /health: %s: %s", resp.Status, bytes.TrimSpace(body))
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cluster: wait for etcd: %w (last: %v); end of %s:\n%s", err, last, p.logPath, tailFile(p.logPath, 40))
	}
	return nil
}

// kubeAPIServerArgs are the apiserver's flags; StartAPIServer reuses them.
func (c *Cluster) kubeAPIServerArgs(etcdPort, securePort int) []string {
	p := c.pki
	return []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(etcdPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(securePort),
		"--tls-cert-file=" + p.crt(apiserverName),
		"--tls-private-key-file=" + p.key(apiserverName),
		"--client-ca-file=" + p.crt(caName),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--enable-bootstrap-token-auth",
		// One apiserver on loopback: no Endpoints for the kubernetes
		// Service (pods could not reach 127.0.0.1 anyway).
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--service-account-issuer=" + issuer,
		"--api-audiences=" + issuer,
		"--service-account-key-file=" + p.saPub(),
		"--service-account-signing-key-file=" + p.key(serviceAccountName),
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + p.crt(kubeletClientName),
		"--kubelet-client-key=" + p.key(kubeletClientName),
		"--kubelet-preferred-address-types=InternalIP",
		// The aggregation layer, for metrics-server (kubectl top): the
		// aggregator proxies with the front-proxy client certificate (of
		// the one CA, only that name may assert X-Remote-* headers) and
		// dials an APIService's endpoint IP rather than its Service IP
		// (no kube-proxy here).
		"--requestheader-client-ca-file=" + p.crt(caName),
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.crt(frontProxyClientName),
		"--proxy-client-key-file=" + p.key(frontProxyClientName),
		"--enable-aggregator-routing=true",
		// Anything the apiserver would generate stays under Dir.
		"--cert-dir=" + filepath.Join(c.Dir, "apiserver-certs"),
		// On SIGTERM, drain in-flight requests (answering 429 meanwhile),
		// then give open watches 2 s; without it the HTTP server waits
		// --request-timeout (60 s) for the controller-manager's watches.
		"--shutdown-send-retry-after=true",
		"--profiling=false",
	}
}

func (c *Cluster) kubeControllerManagerArgs(kubeconfig string) []string {
	p := c.pki
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=0", // no health/metrics endpoint: nothing probes it
		"--leader-elect=false",
		"--use-service-account-credentials",
		"--controllers=*,bootstrap-signer-controller,token-cleaner-controller",
		"--root-ca-file=" + p.crt(caName),
		"--service-account-private-key-file=" + p.key(serviceAccountName),
		"--cluster-signing-cert-file=" + p.crt(caName),
		"--cluster-signing-key-file=" + p.key(caName),
		"--profiling=false",
	}
}

// waitReadyz polls GET /readyz as admin until it answers ok, apiserver
// exits, or apiserverTimeout passes.
func (c *Cluster) waitReadyz(ctx context.Context, p *process) error {
	var last error
	err := poll(ctx, apiserverTimeout, func(ctx context.Context) (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		body, err := c.Admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		if err != nil {
			last = err
			return false, nil
		}
		return strings.TrimSpace(string(body)) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("cluster: wait for kube-apiserver /readyz: %w (last: %v); end of %s:\n%s", err, last, p.logPath, tailFile(p.logPath, 40))
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for the cluster, with the CA inline.
func (c *Cluster) writeKubeconfig(path string, user *clientcmdapi.AuthInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: c.pki.ca.certPEM}
	cfg.AuthInfos["e2e"] = user
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("cluster: write %s: %w", path, err)
	}
	return nil
}

func certUser(kp *keyPair) *clientcmdapi.AuthInfo {
	return &clientcmdapi.AuthInfo{ClientCertificateData: kp.certPEM, ClientKeyData: kp.keyPEM}
}

// poll calls cond every pollInterval until it returns true or an error, ctx
// ends, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w", timeout, ctx.Err())
		case <-t.C:
		}
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
