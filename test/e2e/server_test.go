//go:build integration

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

// freePort is a TCP port free on the host right now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// kubectlCmd is kubectl with the cluster's admin kubeconfig.
func kubectlCmd(c *cluster.Cluster, args ...string) *exec.Cmd {
	bin := "kubectl"
	if _, err := exec.LookPath(bin); err != nil {
		bin = filepath.Join(os.Getenv("HOME"), ".cache", "nodeagent-rig", "bin", "kubectl")
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// TestNodeServer: the agent's port-10250 API through the real API
// server: kubectl exec with stdin, kubectl attach (stdin, stdinOnce,
// output only, a TTY on a pty), kubectl port-forward with a real HTTP
// request through it, the nodes/proxy/pods list; and directly: no
// credentials → 401, a valid token without RBAC rights → 403.
func TestNodeServer(t *testing.T) {
	c := apiCluster(t)
	port := freePort(t)
	a := joined(t, c, "--port", strconv.Itoa(port), "--client-ca-file", c.CAFile)
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: a.podName("srv"), Namespace: "default"},
		Spec: v1.PodSpec{NodeName: a.node, Containers: []v1.Container{{
			Name: "web", Image: busybox,
			Command: []string{"sh", "-c", "mkdir -p /www && echo through-the-node-server >/www/index.html && exec httpd -f -p 8080 -h /www"},
		}}},
	}
	createRunning(t, c, p)

	t.Run("exec with stdin", func(t *testing.T) {
		cmd := kubectlCmd(c, "exec", "-i", p.Name, "--", "sh", "-c", "cat; echo done")
		cmd.Stdin = strings.NewReader("line one\nline two\n")
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != "line one\nline two\ndone\n" {
			t.Fatalf("kubectl exec: %v: %q", err, out)
		}
	})

	t.Run("attach", func(t *testing.T) {
		// echo: stdin open across attaches (stdinOnce false); once: stdin
		// closed after the first attach; ticker: no stdin, prints; term: a
		// TTY, which answers with its size.
		echo := "while read l; do echo got:$l; done"
		ap := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: a.podName("attach"), Namespace: "default"},
			Spec: v1.PodSpec{NodeName: a.node, Containers: []v1.Container{
				{Name: "echo", Image: busybox, Command: []string{"sh", "-c", echo}, Stdin: true},
				{Name: "once", Image: busybox, Command: []string{"sh", "-c", echo + "; echo bye"}, Stdin: true, StdinOnce: true},
				{Name: "ticker", Image: busybox, Command: []string{"sh", "-c", "i=0; while true; do i=$((i+1)); echo tick$i; sleep 0.2; done"}},
				{Name: "term", Image: busybox, Command: []string{"sh", "-c", `while read l; do echo "tty:$l:$(stty size)"; done`}, Stdin: true, TTY: true},
			}},
		}
		createRunning(t, c, ap)
		eventually(t, 30*time.Second, "all four containers running in the API", func() bool {
			got := apiPod(c, t, "default", ap.Name)
			if got == nil || len(got.Status.ContainerStatuses) != 4 {
				return false
			}
			for _, cs := range got.Status.ContainerStatuses {
				if cs.State.Running == nil {
					return false
				}
			}
			return true
		})

		t.Run("stdin", func(t *testing.T) {
			// Twice: the second attach finds the container's stdin still
			// open (stdinOnce false) and the first session's lines gone.
			for _, word := range []string{"first", "second"} {
				k := startAttach(t, kubectlCmd(c, "attach", "-i", ap.Name, "-c", "echo"))
				// Lines reach the container only once the session is up;
				// what it echoes before its stdout is attached is lost, so
				// ping until one comes back.
				pingUntil(t, k, "ping\n", "got:ping\n")
				if _, err := io.WriteString(k.stdin, word+"\nlast\n"); err != nil {
					t.Fatal(err)
				}
				eventually(t, 20*time.Second, "echo of "+word, func() bool {
					return strings.HasSuffix(k.out.String(), "got:"+word+"\ngot:last\n")
				})
				k.stop()
			}
		})

		t.Run("stdinOnce", func(t *testing.T) {
			// kubectl's stdin closed: the container's stdin closes, its
			// loop ends, and the attach ends with the container.
			k := startAttach(t, kubectlCmd(c, "attach", "-i", ap.Name, "-c", "once"))
			pingUntil(t, k, "ping\n", "got:ping\n")
			k.stdin.Close()
			done := make(chan error, 1)
			go func() { done <- k.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil || !strings.HasSuffix(k.out.String(), "got:ping\nbye\n") {
					t.Fatalf("kubectl attach: %v: %q", err, k.out.String())
				}
			case <-time.After(30 * time.Second):
				k.cmd.Process.Kill()
				<-done
				t.Fatalf("kubectl attach still running 30 s after its stdin closed: %q", k.out.String())
			}
		})

		t.Run("output only", func(t *testing.T) {
			k := startAttach(t, kubectlCmd(c, "attach", ap.Name, "-c", "ticker"))
			re := regexp.MustCompile(`(?m)^tick(\d+)$`)
			eventually(t, 30*time.Second, "two ticks through kubectl attach", func() bool {
				return len(re.FindAllString(k.out.String(), -1)) >= 2
			})
			k.stop()
		})

		t.Run("tty", func(t *testing.T) {
			// kubectl uses a TTY only when its stdin is a terminal: a pty
			// of 40 rows × 100 columns, whose size kubectl sends on.
			master, slave := openPTY(t, 40, 100)
			cmd := kubectlCmd(c, "attach", "-it", ap.Name, "-c", "term")
			cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
			cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
			k := &attachProc{cmd: cmd, stdin: master, out: &syncBuffer{}}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			slave.Close()
			go io.Copy(k.out, master) //nolint:errcheck // ends with EIO once kubectl is gone
			defer master.Close()
			defer k.stop()
			// The container's terminal echoes the line and, on output, ends
			// lines with \r\n: the answer proves a TTY at both ends.
			pingUntil(t, k, "hello\r", "tty:hello:40 100\r\n")
		})
	})

	t.Run("port-forward", func(t *testing.T) {
		cmd := kubectlCmd(c, "port-forward", "--address", "127.0.0.1", "pod/"+p.Name, ":8080")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }() //nolint:errcheck
		lines := make(chan string, 4)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		var local string
		re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)
		select {
		case l := <-lines:
			m := re.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("kubectl port-forward said %q; stderr %s", l, stderr.String())
			}
			local = m[1]
		case <-time.After(30 * time.Second):
			t.Fatalf("kubectl port-forward did not start: %s", stderr.String())
		}
		go func() {
			for range lines {
			}
		}()
		client := &http.Client{Timeout: 20 * time.Second}
		resp, err := client.Get("http://127.0.0.1:" + local + "/index.html")
		if err != nil {
			t.Fatalf("GET through the port-forward: %v; kubectl stderr %s", err, stderr.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "through-the-node-server\n" {
			t.Fatalf("through the port-forward: %d %q", resp.StatusCode, body)
		}
	})

	t.Run("logs", func(t *testing.T) {
		lp := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: a.podName("logs"), Namespace: "default"},
			Spec: v1.PodSpec{NodeName: a.node, RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{
				Name: "main", Image: busybox, Command: []string{"sh", "-c", "echo first; echo second; sleep 5; echo third"},
			}}},
		}
		createRunning(t, c, lp)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if out, err := c.Kubectl(ctx, "logs", lp.Name, "--tail=1"); err != nil || out != "second\n" {
			t.Errorf("kubectl logs --tail=1: %v: %q", err, out)
		}
		// -f ends when the container exits, with every line.
		if out, err := c.Kubectl(ctx, "logs", "-f", lp.Name); err != nil || out != "first\nsecond\nthird\n" {
			t.Errorf("kubectl logs -f: %v: %q", err, out)
		}
	})

	t.Run("nodes proxy pods", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.Kubectl(ctx, "get", "--raw", "/api/v1/nodes/"+a.node+"/proxy/pods")
		if err != nil || !strings.Contains(out, `"kind":"PodList"`) || !strings.Contains(out, `"name":"`+p.Name+`"`) {
			t.Fatalf("nodes/proxy/pods: %v: %.400s", err, out)
		}
	})

	direct := func(t *testing.T, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "https://127.0.0.1:"+strconv.Itoa(port)+"/pods", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The agent's serving certificate is self-signed, as the API
		// server's --kubelet-certificate-authority is not set either.
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	t.Run("no credentials 401", func(t *testing.T) {
		if code, body := direct(t, ""); code != http.StatusUnauthorized {
			t.Fatalf("no credentials: %d %q; want 401", code, body)
		}
	})

	t.Run("token without RBAC rights 403", func(t *testing.T) {
		ctx := context.Background()
		sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "noperm-" + a.node, Namespace: "default"}}
		if _, err := c.Admin.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		defer c.Admin.CoreV1().ServiceAccounts("default").Delete(ctx, sa.Name, metav1.DeleteOptions{}) //nolint:errcheck
		tr, err := c.Admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := "Forbidden (user=system:serviceaccount:default:" + sa.Name + ", verb=get, resource=nodes, subresource(s)=[pods proxy])"
		if code, body := direct(t, tr.Status.Token); code != http.StatusForbidden || body != want {
			t.Fatalf("token without rights: %d %q; want 403 %q", code, body, want)
		}
		if code, body := direct(t, "not-a-token"); code != http.StatusUnauthorized {
			t.Fatalf("invalid token: %d %q; want 401", code, body)
		}
	})
}

// attachProc is a kubectl attach in the background: its stdin, and its
// stdout and stderr together.
type attachProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *syncBuffer
}

func startAttach(t *testing.T, cmd *exec.Cmd) *attachProc {
	t.Helper()
	k := &attachProc{cmd: cmd, out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = k.out, k.out
	var err error
	if k.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.stop)
	return k
}

// stop ends kubectl (an attach ends only with the container or its
// client); idempotent.
func (k *attachProc) stop() {
	if k.cmd.ProcessState == nil {
		k.cmd.Process.Kill()
		k.cmd.Wait() //nolint:errcheck
	}
}

// pingUntil writes line to kubectl every half second until its output
// contains want (30 s at most).
func pingUntil(t *testing.T, k *attachProc, line, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(k.out.String(), want) {
		if time.Now().After(deadline) || k.cmd.ProcessState != nil {
			t.Fatalf("kubectl attach: no %q within 30 s; its output: %q", want, k.out.String())
		}
		if _, err := io.WriteString(k.stdin, line); err != nil {
			t.Fatalf("write to kubectl attach: %v; its output: %q", err, k.out.String())
		}
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && !strings.Contains(k.out.String(), want); {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// openPTY is a new pseudo-terminal of the given size: its master and
// slave ends.
func openPTY(t *testing.T, rows, cols uint16) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var n, unlock uint32
	if err := ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	if err := ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n)); err != nil {
		t.Fatalf("pty number: %v", err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := [4]uint16{rows, cols, 0, 0}
	if err := ioctl(slave, syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		t.Fatalf("pty size: %v", err)
	}
	return master, slave
}

func ioctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// TestNodeServerCSRServingCertificate: --rotate-server-certificates. The
// node's serving CSR (signer kubernetes.io/kubelet-serving, requestor
// system:node:<node>) stays Pending — nothing approves serving CSRs by
// itself — and meanwhile the node server refuses TLS (kubectl logs fails)
// while pods run; after `kubectl certificate approve` the
// controller-manager signs it with the cluster CA and the node server
// serves it (the node's name and IP as SANs), and kubectl logs and exec
// through the API server work.
func TestNodeServerCSRServingCertificate(t *testing.T) {
	c := apiCluster(t)
	port := freePort(t)
	// joined approves only the client CSR (signer
	// kube-apiserver-client-kubelet), never the serving one.
	a := joined(t, c, "--port", strconv.Itoa(port), "--client-ca-file", c.CAFile, "--rotate-server-certificates")
	ctx := context.Background()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	requestor := "system:node:" + a.node

	var csr *certificatesv1.CertificateSigningRequest
	eventually(t, 60*time.Second, "the node's serving CSR", func() bool {
		list, err := c.Admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.signerName=" + certificatesv1.KubeletServingSignerName})
		if err != nil {
			t.Logf("list CSRs: %v", err)
			return false
		}
		for i := range list.Items {
			if list.Items[i].Spec.Username == requestor {
				csr = &list.Items[i]
				return true
			}
		}
		return false
	})
	if len(csr.Status.Conditions) != 0 || len(csr.Status.Certificate) != 0 {
		t.Fatalf("serving CSR %s not Pending before approval: %+v", csr.Name, csr.Status.Conditions)
	}

	// Pods run regardless.
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: a.podName("csrcert"), Namespace: "default"},
		Spec: v1.PodSpec{NodeName: a.node, Containers: []v1.Container{{
			Name: "main", Image: busybox,
			Command: []string{"sh", "-c", "echo served-with-the-csr-certificate; trap 'exit 0' TERM; while true; do sleep 1; done"},
		}}},
	}
	createRunning(t, c, p)

	t.Run("refused before approval", func(t *testing.T) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // any certificate would do: there must be none
		if err == nil {
			leaf := conn.ConnectionState().PeerCertificates[0]
			conn.Close()
			t.Fatalf("node server served %q (issuer %q) before its CSR was approved", leaf.Subject.CommonName, leaf.Issuer.CommonName)
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if out, err := c.Kubectl(lctx, "logs", p.Name); err == nil {
			t.Fatalf("kubectl logs before approval: %q; want it refused", out)
		}
		log := a.out.String()
		for _, want := range []string{"no serving certificate: the node server refuses TLS", "kubectl certificate approve", "no serving certificate available for the node"} {
			if !strings.Contains(log, want) {
				t.Errorf("agent log lacks %q", want)
			}
		}
		got, err := c.Admin.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil || len(got.Status.Conditions) != 0 {
			t.Fatalf("serving CSR %s: %v %+v; want still Pending", csr.Name, err, got.Status.Conditions)
		}
	})

	if out, err := kubectlCmd(c, "certificate", "approve", csr.Name).CombinedOutput(); err != nil {
		t.Fatalf("kubectl certificate approve %s: %v: %s", csr.Name, err, out)
	}

	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("no certificate in %s", c.CAFile)
	}
	node, err := c.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodeIP string
	for _, ad := range node.Status.Addresses {
		if ad.Type == v1.NodeInternalIP {
			nodeIP = ad.Address
		}
	}
	var leaf *x509.Certificate
	eventually(t, 60*time.Second, "the node server serving the issued certificate", func() bool {
		// Verified as a client that trusts the cluster CA and dials the
		// node by name would.
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: a.node})
		if err != nil {
			return false
		}
		defer conn.Close()
		leaf = conn.ConnectionState().PeerCertificates[0]
		return true
	})
	if leaf.Subject.CommonName != requestor || len(leaf.Subject.Organization) != 1 || leaf.Subject.Organization[0] != "system:nodes" {
		t.Errorf("served subject %v; want CN %s, O system:nodes", leaf.Subject, requestor)
	}
	if nodeIP == "" {
		t.Errorf("Node %s has no InternalIP", a.node)
	} else if err := leaf.VerifyHostname(nodeIP); err != nil {
		t.Errorf("served certificate not valid for the node IP: %v (IP SANs %v)", err, leaf.IPAddresses)
	}
	if got, err := c.Admin.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{}); err != nil || len(got.Status.Certificate) == 0 {
		t.Errorf("CSR %s after approval: %v; want its certificate issued", csr.Name, err)
	}
	if _, err := os.Stat(filepath.Join(a.root, "pki", "kubelet-server-current.pem")); err != nil {
		t.Errorf("issued certificate not kept in the cert dir: %v", err)
	}

	t.Run("logs and exec through the API server", func(t *testing.T) {
		lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if out, err := c.Kubectl(lctx, "logs", p.Name); err != nil || out != "served-with-the-csr-certificate\n" {
			t.Errorf("kubectl logs: %v: %q", err, out)
		}
		if out, err := c.Kubectl(lctx, "exec", p.Name, "--", "echo", "exec-ok"); err != nil || out != "exec-ok\n" {
			t.Errorf("kubectl exec: %v: %q", err, out)
		}
	})
}
