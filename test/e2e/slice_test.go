//go:build integration

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/status"
)

func sleeper(name string, extra string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  labels: {app: ` + name + `}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busybox + `
    command: ["sh", "-c"]
    args: ["echo started $(MSG) in $(pwd); trap 'exit 0' TERM; sleep 100000 & wait"]
    workingDir: /tmp
    env:
    - {name: MSG, value: "` + extra + `"}
`
}

// A manifest becomes a running container, observed through CRI, with the
// kubelet's labels, its log file where log tooling looks, and a pod IP from
// the node's pod CIDR.
func TestManifestPodRuns(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	// Two pods and a ConfigMap in one file; the ConfigMap is ignored.
	a.write("pods.yaml", sleeper("alpha", "hello")+"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n"+sleeper("beta", "world"))
	var c *runtimeapi.Container
	eventually(t, 60*time.Second, "alpha running", func() bool { c = a.running("alpha", "main"); return c != nil })
	eventually(t, 30*time.Second, "beta running", func() bool { return a.running("beta", "main") != nil })

	sb := a.sandboxes("alpha")[0]
	uid := sb.Metadata.Uid
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(uid) {
		t.Errorf("uid %q is not a 32-hex static pod UID", uid)
	}
	wantLabels := map[string]string{
		"io.kubernetes.pod.name":       a.podName("alpha"),
		"io.kubernetes.pod.namespace":  "default",
		"io.kubernetes.pod.uid":        uid,
		"io.kubernetes.container.name": "main",
	}
	for k, v := range wantLabels {
		if c.Labels[k] != v {
			t.Errorf("container label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if sb.Labels["app"] != "alpha" || sb.Labels["io.kubernetes.pod.uid"] != uid {
		t.Errorf("sandbox labels %v lack pod labels", sb.Labels)
	}
	if c.Annotations["io.kubernetes.container.restartCount"] != "0" || c.Annotations["io.kubernetes.container.hash"] == "" {
		t.Errorf("container annotations %v", c.Annotations)
	}
	if sb.Annotations["kubernetes.io/config.source"] != "file" || sb.Annotations["kubernetes.io/config.hash"] == "" {
		t.Errorf("sandbox annotations %v", sb.Annotations)
	}

	logFile := filepath.Join(a.logs, "default_"+a.podName("alpha")+"_"+uid, "main", "0.log")
	eventually(t, 10*time.Second, "log line in "+logFile, func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "started hello in /tmp")
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := conn.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
	if err != nil {
		t.Fatal(err)
	}
	_, podNet, _ := net.ParseCIDR(envOr("NODEAGENT_POD_CIDR", "10.99.0.0/24"))
	if ip := net.ParseIP(st.Status.Network.Ip); ip == nil || !podNet.Contains(ip) {
		t.Errorf("pod IP %q not in %s", st.Status.Network.Ip, podNet)
	}
	eventually(t, 10*time.Second, "status Running with the pod IP", func() bool {
		p := a.status("alpha")
		return p != nil && p.Status.Phase == v1.PodRunning && p.Status.PodIP == st.Status.Network.Ip
	})
	eventually(t, 10*time.Second, "Created and Started events", func() bool {
		p := a.status("alpha")
		evs, _ := status.ReadEvents(filepath.Join(a.root, "status"), p)
		seen := map[string]bool{}
		for _, e := range evs {
			seen[e.Reason] = true
		}
		return seen["Created"] && seen["Started"]
	})
}

// A pod the node cannot take is refused with the kubelet's reason, in its
// status and events, and never reaches the runtime.
func TestAdmissionRefusal(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "--node-labels", "disk=hdd")
	a.start()
	a.write("ssd.yaml", strings.Replace(sleeper("ssd", "s"), "spec:\n", "spec:\n  nodeSelector: {disk: ssd}\n", 1))
	a.write("hdd.yaml", strings.Replace(sleeper("hdd", "h"), "spec:\n", "spec:\n  nodeSelector: {disk: hdd}\n", 1))
	eventually(t, 60*time.Second, "hdd pod running", func() bool { return a.running("hdd", "main") != nil })
	eventually(t, 10*time.Second, "ssd pod Failed with NodeAffinity", func() bool {
		p := a.status("ssd")
		if p == nil || p.Status.Phase != v1.PodFailed || p.Status.Reason != "NodeAffinity" {
			return false
		}
		evs, _ := status.ReadEvents(filepath.Join(a.root, "status"), p)
		return len(evs) == 1 && evs[0].Type == v1.EventTypeWarning && evs[0].Reason == "NodeAffinity"
	})
	if len(a.sandboxes("ssd")) != 0 {
		t.Fatal("a refused pod reached the runtime")
	}
}

// Removing a manifest stops and removes the pod's containers and sandbox
// and deletes its log directory and status.
func TestManifestRemoved(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("gone.yaml", sleeper("gone", "x"))
	a.write("stays.yaml", sleeper("stays", "y"))
	eventually(t, 60*time.Second, "both running", func() bool {
		return a.running("gone", "main") != nil && a.running("stays", "main") != nil
	})
	stays := a.running("stays", "main").Id
	uid := a.sandboxes("gone")[0].Metadata.Uid
	a.remove("gone.yaml")
	eventually(t, 30*time.Second, "sandbox and containers removed", func() bool {
		return len(a.sandboxes("gone")) == 0 && len(a.containers("gone", "")) == 0
	})
	eventually(t, 10*time.Second, "log dir and status removed", func() bool {
		_, err := os.Stat(filepath.Join(a.logs, "default_"+a.podName("gone")+"_"+uid))
		return os.IsNotExist(err) && a.status("gone") == nil
	})
	if c := a.running("stays", "main"); c == nil || c.Id != stays {
		t.Fatalf("the other pod was disturbed: %v", c)
	}
}

// Changing a manifest replaces the pod: a new UID, the old one gone.
func TestManifestChanged(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("p.yaml", sleeper("change", "one"))
	eventually(t, 60*time.Second, "running", func() bool { return a.running("change", "main") != nil })
	oldUID := a.sandboxes("change")[0].Metadata.Uid
	a.write("p.yaml", sleeper("change", "two"))
	eventually(t, 60*time.Second, "replaced by a new pod", func() bool {
		sbs := a.sandboxes("change")
		return len(sbs) == 1 && sbs[0].Metadata.Uid != oldUID && a.running("change", "main") != nil
	})
	c := a.running("change", "main")
	uid := a.sandboxes("change")[0].Metadata.Uid
	// The old pod was gone before the new one got its sandbox: never two
	// versions at once.
	log := a.out.String()
	terminated := regexp.MustCompile(`pod terminated.*"uid": "` + oldUID + `"`).FindStringIndex(log)
	created := regexp.MustCompile(`sandbox ready.*"uid": "` + uid + `"`).FindStringIndex(log)
	if terminated == nil || created == nil || terminated[0] > created[0] {
		t.Errorf("old pod terminated at log offset %v, new sandbox ready at %v: want the old one gone first", terminated, created)
	}
	// The new pod's status survives the old pod's removal.
	eventually(t, 10*time.Second, "status of the new pod", func() bool {
		p := a.status("change")
		return p != nil && string(p.UID) == uid && p.Status.Phase == v1.PodRunning
	})
	logFile := filepath.Join(a.logs, "default_"+a.podName("change")+"_"+uid, "main", "0.log")
	eventually(t, 10*time.Second, "new container's log", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "started two")
	})
	// A touch without change and a rename do nothing.
	now := time.Now()
	os.Chtimes(filepath.Join(a.manifests, "p.yaml"), now, now)
	if err := os.Rename(filepath.Join(a.manifests, "p.yaml"), filepath.Join(a.manifests, "renamed.yaml")); err != nil {
		t.Fatal(err)
	}
	a.write("other.yaml", sleeper("marker", "m"))
	eventually(t, 60*time.Second, "marker running (the agent has read the directory since)", func() bool {
		return a.running("marker", "main") != nil
	})
	if got := a.running("change", "main"); got == nil || got.Id != c.Id {
		t.Fatalf("rename or touch restarted the pod: %v vs %v", got, c.Id)
	}
}

// Broken manifests are reported with file name and reason; other pods run;
// a broken edit of a running pod's manifest keeps the pod.
func TestBrokenManifests(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("good.yaml", sleeper("good", "g"))
	a.write("garbage.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [unclosed\n")
	a.write("invalid.yaml", strings.Replace(sleeper("invalid", "i"), "name: main", "name: Bad_Name", 1))
	eventually(t, 60*time.Second, "good running", func() bool { return a.running("good", "main") != nil })
	eventually(t, 10*time.Second, "both problems logged", func() bool {
		log := a.out.String()
		return regexp.MustCompile(`manifest is invalid.*"file": "garbage.yaml"`).MatchString(log) &&
			regexp.MustCompile(`manifest is invalid.*"file": "invalid.yaml".*spec.containers\[0\].name`).MatchString(log)
	})
	if len(a.sandboxes("invalid")) != 0 {
		t.Fatal("an invalid pod was started")
	}
	eventually(t, 10*time.Second, "both problems published for `nodeagent pods`", func() bool {
		probs, _ := status.ReadSourceProblems(filepath.Join(a.root, "status"))
		return probs["file"]["garbage.yaml"] != "" && strings.Contains(probs["file"]["invalid.yaml"], "spec.containers[0].name")
	})
	id := a.running("good", "main").Id
	a.write("good.yaml", "this: is: not: yaml: [")
	eventually(t, 10*time.Second, "broken edit reported", func() bool {
		return strings.Contains(a.out.String(), "its pods keep running as last read until it is fixed")
	})
	a.write("marker.yaml", sleeper("marker", "m"))
	eventually(t, 60*time.Second, "marker running", func() bool { return a.running("marker", "main") != nil })
	if c := a.running("good", "main"); c == nil || c.Id != id {
		t.Fatalf("broken edit disturbed the running pod: %v", c)
	}
}

// /healthz answers ok while the runtime and the PLEG are healthy, and
// /metrics exposes the loop, PLEG, worker, runtime and pod start metrics,
// under the kubelet's names where it has them.
func TestHealthzAndMetrics(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	a := newAgent(t, "--healthz-port", fmt.Sprint(port))
	a.start()
	a.write("m.yaml", sleeper("m", "x"))
	eventually(t, 60*time.Second, "pod running", func() bool { return a.running("m", "main") != nil })
	get := func(path string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, 10*time.Second, "healthz ok", func() bool {
		code, body := get("/healthz")
		return code == 200 && body == "ok"
	})
	eventually(t, 10*time.Second, "metrics", func() bool {
		_, body := get("/metrics")
		for _, want := range []string{
			"nodeagent_pod_workers 1",
			`nodeagent_sync_loop_iteration_duration_seconds_count{kind="config"}`,
			"kubelet_pleg_relist_duration_seconds_count",
			"kubelet_pleg_relist_interval_seconds_count",
			"kubelet_pleg_last_seen_seconds",
			"kubelet_pleg_discard_events 0",
			`kubelet_pod_worker_duration_seconds_count{operation_type="create"} 1`,
			`kubelet_runtime_operations_total{operation_type="run_podsandbox"} 1`,
			`kubelet_runtime_operations_total{operation_type="start_container"} 1`,
			`kubelet_runtime_operations_duration_seconds_count{operation_type="list_containers"}`,
			"kubelet_pod_start_duration_seconds_count 1",
			"kubelet_pod_start_sli_duration_seconds_count 1",
			"kubelet_pod_start_total_duration_seconds_count 1",
			"kubelet_first_network_pod_start_sli_duration_seconds ",
			"kubelet_running_pods 1",
			`kubelet_running_containers{container_state="running"} 1`,
		} {
			if !strings.Contains(body, want) {
				t.Logf("/metrics lacks %q so far", want)
				return false
			}
		}
		return true
	})
}

// Under systemd (Type=notify) the agent reports READY=1 once it runs,
// feeds the watchdog systemd asks for (WATCHDOG_USEC; WATCHDOG=1 every
// half interval while the loop and the PLEG are healthy), and reports
// STOPPING=1 when it stops.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	a := newAgent(t)
	a.env = append(os.Environ(), "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=2000000")
	a.start()
	read := func() string {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 256)
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return string(buf[:n])
	}
	if msg := read(); msg != "READY=1" {
		t.Fatalf("first notification %q, want READY=1", msg)
	}
	start := time.Now()
	for i := 0; i < 3; i++ {
		if msg := read(); msg != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1", msg)
		}
	}
	// Three pings, the first at once, then every second (half of 2 s).
	if d := time.Since(start); d < 1500*time.Millisecond || d > 6*time.Second {
		t.Errorf("three watchdog pings in %v; want about 2 s", d)
	}
	a.stop()
	for {
		msg := read()
		if msg == "STOPPING=1" {
			break
		}
		if msg != "WATCHDOG=1" {
			t.Fatalf("notification at stop %q, want STOPPING=1", msg)
		}
	}
}
