//go:build integration

package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
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

	authenticationv1 "k8s.io/api/authentication/v1"
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
// server: kubectl exec with stdin, kubectl port-forward with a real HTTP
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
