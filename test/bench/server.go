package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

// logLines is how many lines the measured container has written.
const logLines = 1000

// nodeServerPath measures, on an API-mode agent serving its node server
// on 127.0.0.1 and one running pod that has written logLines lines,
// `kubectl logs` and `kubectl exec -- true` beside the same read and exec
// made nearer the runtime, each step of the path peeled off in turn:
// the kubectl process, the API server (client-go in process: its proxy
// to the node), the node server (HTTPS with the admin client
// certificate: our authn/authz, our log reader, our proxy to the
// runtime's streaming server), crictl (the CLI floor beside kubectl), and
// the CRI itself (the log file parsed in process; ExecSync, and Exec
// with its streaming URL). The methods take turns, -server-runs rounds
// after two unmeasured ones; every answer is checked once.
func nodeServerPath(ctx context.Context) {
	c, took, stopCluster := controlPlane(ctx)
	defer stopCluster()
	port := freeLocalPort()
	node := "benchsrv"
	fmt.Printf("node server — kubectl logs and exec through a real kube-apiserver beside the same calls nearer the runtime\n"+
		"  (control plane up in %v; 1 pod, %d log lines; median and p90 of %d, ratio of medians to the last row)\n",
		took.Round(100*time.Millisecond), logLines, *serverRuns)
	a := joinAgent(ctx, c, node, "--address", "127.0.0.1", "--node-ip", "127.0.0.1", "--port", strconv.Itoa(port), "--client-ca-file", c.CAFile)
	defer a.stop()
	name := "logs-" + node
	if _, err := c.Admin.CoreV1().Pods("default").Create(ctx, serverBenchPod(name, node), metav1.CreateOptions{}); err != nil {
		fail("create pod: " + err.Error())
	}
	err := func() error {
		defer func() {
			c.Admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
			gone(ctx, map[string]bool{name: true}, 60*time.Second)
		}()
		return measureNodeServer(ctx, c, port, name)
	}()
	if err != nil {
		fail("node server: " + err.Error())
	}
	fmt.Println()
}

func measureNodeServer(ctx context.Context, c *cluster.Cluster, port int, name string) error {
	id, logPath, want, err := loggedContainer(ctx, name, 60*time.Second)
	if err != nil {
		return err
	}
	// The admin client certificate, for the node server (whose
	// certificate is self-signed: not verified, as the API server does
	// not either) and for the API server.
	rc, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
	if err != nil {
		return err
	}
	apiTLS, err := rest.TLSConfigFor(rc)
	if err != nil {
		return err
	}
	apiTLS.NextProtos = []string{"http/1.1"}
	nodeTLS := apiTLS.Clone()
	nodeTLS.InsecureSkipVerify = true //nolint:gosec
	nodeTLS.RootCAs = nil
	nodeURL := "https://127.0.0.1:" + strconv.Itoa(port)
	nodeClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: nodeTLS}}
	crictl := crictlPath()
	same := func(what string, got []byte) error {
		if !bytes.Equal(got, want) {
			return fmt.Errorf("%s answered %d bytes, not the %d of the container's log", what, len(got), len(want))
		}
		return nil
	}
	type method struct {
		name string
		run  func() error
	}
	logs := []method{
		{"kubectl logs (process)", func() error {
			out, err := c.Kubectl(ctx, "logs", name, "-c", "main")
			if err != nil {
				return err
			}
			return same("kubectl logs", []byte(out))
		}},
		{"API server pods/log (client-go, in process)", func() error {
			out, err := c.Admin.CoreV1().Pods("default").GetLogs(name, &v1.PodLogOptions{Container: "main"}).DoRaw(ctx)
			if err != nil {
				return err
			}
			return same("pods/log", out)
		}},
		{"node server /containerLogs (HTTPS, keep-alive)", func() error {
			resp, err := nodeClient.Get(nodeURL + "/containerLogs/default/" + name + "/main")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			out, err := io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("/containerLogs: %s: %s", resp.Status, out)
			}
			return same("/containerLogs", out)
		}},
	}
	if crictl != "" {
		logs = append(logs, method{"crictl logs (process)", func() error {
			out, err := exec.CommandContext(ctx, crictl, "-r", endpoint, "logs", id).Output()
			if err != nil {
				return fmt.Errorf("crictl logs: %w", err)
			}
			return same("crictl logs", out)
		}})
	}
	logs = append(logs, method{"CRI log file read and parsed (in process)", func() error {
		out, err := readCRILog(logPath)
		if err != nil {
			return err
		}
		return same("the log file", out)
	}})

	execPath := "/exec/default/" + name + "/main?command=true&output=1&error=1"
	apiExec := strings.TrimSuffix(c.URL, "/") + "/api/v1/namespaces/default/pods/" + name + "/exec?container=main&command=true&stdout=true&stderr=true"
	execs := []method{
		{"kubectl exec -- true (process)", func() error {
			_, err := c.Kubectl(ctx, "exec", name, "-c", "main", "--", "true")
			return err
		}},
		{"API server pods/exec (websocket, in process)", func() error { return wsExec(apiExec, apiTLS) }},
		{"node server /exec (websocket, HTTPS)", func() error { return wsExec(nodeURL+execPath, nodeTLS) }},
	}
	if crictl != "" {
		execs = append(execs, method{"crictl exec true (process)", func() error {
			if out, err := exec.CommandContext(ctx, crictl, "-r", endpoint, "exec", id, "true").CombinedOutput(); err != nil {
				return fmt.Errorf("crictl exec: %w: %s", err, out)
			}
			return nil
		}})
	}
	execs = append(execs,
		method{"CRI Exec + its streaming URL (websocket)", func() error {
			r, err := conn.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true, Stderr: true})
			if err != nil {
				return err
			}
			return wsExec(r.Url, nil)
		}},
		method{"CRI ExecSync true", func() error {
			r, err := conn.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"true"}, Timeout: 10})
			if err == nil && r.ExitCode != 0 {
				err = fmt.Errorf("ExecSync true: exit code %d", r.ExitCode)
			}
			return err
		}})

	for _, group := range []struct {
		title   string
		methods []method
	}{
		{fmt.Sprintf("logs, %d lines (%d B)", logLines, len(want)), logs},
		{"exec round trip of `true`", execs},
	} {
		took := make([][]time.Duration, len(group.methods))
		for r := -2; r < *serverRuns; r++ { // two warm-up rounds
			for i, m := range group.methods {
				t0 := time.Now()
				if err := m.run(); err != nil {
					return fmt.Errorf("%s: %w", m.name, err)
				}
				if r >= 0 {
					took[i] = append(took[i], time.Since(t0))
				}
			}
		}
		fmt.Printf("  %s\n", group.title)
		floor := median(took[len(took)-1])
		for i, m := range group.methods {
			fmt.Printf("    %-46s median %8s   p90 %8s   ratio %6.1f×\n", m.name, short(median(took[i])), short(p90(took[i])),
				float64(median(took[i]))/float64(floor))
		}
	}
	return nil
}

// serverBenchPod writes logLines lines, then waits.
func serverBenchPod(name, node string) *v1.Pod {
	grace := int64(5)
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "log line $i: the quick brown fox jumps over the lazy dog"; i=$((i+1)); done; `+
		`trap 'exit 0' TERM; sleep 100000 & wait`, logLines)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{
			Name: "main", Image: image, ImagePullPolicy: v1.PullIfNotPresent, Command: []string{"sh", "-c", script},
		}}}}
}

// loggedContainer waits until the pod's container runs and its log file
// holds logLines lines: its ID, the log file and the log's content.
func loggedContainer(ctx context.Context, pod string, timeout time.Duration) (id, logPath string, content []byte, err error) {
	deadline := time.Now().Add(timeout)
	for ; time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r, err := conn.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.name": pod}}})
		if err != nil || len(r.Containers) == 0 {
			continue
		}
		st, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: r.Containers[0].Id})
		if err != nil {
			continue
		}
		b, err := readCRILog(st.Status.LogPath)
		if err == nil && bytes.Count(b, []byte("\n")) == logLines {
			return st.Status.Id, st.Status.LogPath, b, nil
		}
	}
	return "", "", nil, fmt.Errorf("pod %s: no running container with %d log lines after %v", pod, logLines, timeout)
}

// readCRILog reads a CRI log file ("<time> <stream> <P|F> <content>"
// lines) back into what the container wrote, both streams interleaved.
func readCRILog(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []byte
	for len(b) > 0 {
		line, rest, ok := bytes.Cut(b, []byte("\n"))
		if !ok { // a line being written
			break
		}
		b = rest
		f := bytes.SplitN(line, []byte(" "), 4)
		if len(f) < 3 {
			return nil, fmt.Errorf("%s: malformed line %q", path, line)
		}
		if len(f) == 4 {
			out = append(out, f[3]...)
		}
		if string(f[2]) == "F" {
			out = append(out, '\n')
		}
	}
	return out, nil
}

// wsExec runs an exec stream without stdin to its end over a websocket
// (v5 or v4.channel.k8s.io) and checks its status, on channel 3, is
// Success. tlsCfg is for https and wss URLs.
func wsExec(raw string, tlsCfg *tls.Config) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	var c net.Conn
	d := &net.Dialer{Timeout: 10 * time.Second}
	switch u.Scheme {
	case "http", "ws":
		c, err = d.Dial("tcp", u.Host)
	case "https", "wss":
		c, err = tls.DialWithDialer(d, "tcp", u.Host, tlsCfg)
	default:
		err = fmt.Errorf("scheme of %q", raw)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	key := make([]byte, 16)
	rand.Read(key)
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString(key))
	req.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io, v4.channel.k8s.io")
	if err := req.Write(c); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("websocket upgrade: %s: %s", resp.Status, b)
	}
	var status []byte
	channel := byte(0)
	for {
		op, payload, err := readFrame(br)
		if errors.Is(err, io.EOF) || op == 8 { // the server closed the stream
			break
		}
		if err != nil {
			return err
		}
		switch op {
		case 1, 2: // a message: its first byte is the channel
			if len(payload) > 0 {
				channel, payload = payload[0], payload[1:]
			}
			fallthrough
		case 0: // its continuation
			if channel == 3 {
				status = append(status, payload...)
			}
		}
	}
	if !bytes.Contains(status, []byte(`"Success"`)) {
		return fmt.Errorf("exec status %q", status)
	}
	return nil
}

// readFrame reads one websocket frame from the server (unmasked).
func readFrame(r *bufio.Reader) (op byte, payload []byte, err error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	if n >= 126 { // a big-endian length follows: 2 bytes, or 8
		b := make([]byte, 2)
		if n == 127 {
			b = make([]byte, 8)
		}
		if _, err := io.ReadFull(r, b); err != nil {
			return 0, nil, err
		}
		n = 0
		for _, x := range b {
			n = n<<8 | uint64(x)
		}
	}
	if h[1]&0x80 != 0 || n > 1<<24 {
		return 0, nil, fmt.Errorf("unexpected websocket frame (masked or %d bytes)", n)
	}
	payload = make([]byte, n)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, payload, nil
}

func crictlPath() string {
	if p, err := exec.LookPath("crictl"); err == nil {
		return p
	}
	p := filepath.Join(os.Getenv("HOME"), ".cache", "nodeagent-rig", "bin", "crictl")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

func freeLocalPort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err.Error())
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func p90(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[(len(s)*9+9)/10-1]
}

// short rounds to what the number can show: ms above 10 ms, 10 µs below.
func short(d time.Duration) time.Duration {
	if d >= 10*time.Millisecond {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Microsecond)
}
