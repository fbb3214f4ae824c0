//go:build integration

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// kubeletProc is the upstream kubelet (k8s.io/kubernetes cmd/kubelet, built
// by hack/install-controlplane.sh) running an agent's node without an API
// server: the agent's manifest directory, root dir, pod logs dir and
// cgroup root, on the rig's containerd.
type kubeletProc struct {
	t       *testing.T
	a       *agent
	flags   []string
	config  string
	port    int
	cmd     *exec.Cmd
	out     *syncBuffer
	waitErr chan error
}

// newKubelet is a kubelet on a's directories; extraConfig is more of its
// KubeletConfiguration (YAML lines), flags more flags.
func newKubelet(t *testing.T, a *agent, extraConfig string, flags ...string) *kubeletProc {
	t.Helper()
	// The kubelet wants its cgroup root in every hierarchy (nodeagent
	// makes its own).
	hier, _ := os.ReadDir(cgroupMount)
	for _, h := range hier {
		if !h.IsDir() || h.Name() == "unified" {
			continue
		}
		d := filepath.Join(cgroupMount, h.Name(), a.cgroupRoot())
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if h.Name() == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, _ := os.ReadFile(filepath.Join(cgroupMount, "cpuset", f))
				os.WriteFile(filepath.Join(d, f), b, 0o644)
			}
		}
	}
	k := &kubeletProc{t: t, a: a, flags: flags, config: filepath.Join(t.TempDir(), "kubelet.yaml"), port: freePort(t), out: &syncBuffer{}}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupRoot: %s
enforceNodeAllocatable: []
staticPodPath: %s
fileCheckFrequency: 2s
podLogsDir: %s
containerRuntimeEndpoint: %s
readOnlyPort: 0
port: %d
healthzPort: %d
authentication:
  webhook:
    enabled: false
  anonymous:
    enabled: true
authorization:
  mode: AlwaysAllow
`, a.cgroupRoot(), a.manifests, a.logs, endpoint, k.port, freePort(t)) + extraConfig
	if err := os.WriteFile(k.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// The kubelet makes /var/lib/kubelet/device-plugins whatever its root
	// dir: removed again when the test made it.
	_, err := os.Stat("/var/lib/kubelet")
	made := os.IsNotExist(err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- kubelet log ----\n%s", tail(k.out.String(), 80))
		}
		k.stop()
		if made {
			os.RemoveAll("/var/lib/kubelet")
		}
	})
	return k
}

func (k *kubeletProc) start() {
	k.t.Helper()
	bin, err := exec.LookPath("kubelet")
	if err != nil {
		k.t.Fatalf("the upstream kubelet (hack/install-controlplane.sh builds it): %v", err)
	}
	// --cert-dir is not under --root-dir by default (/var/lib/kubelet/pki).
	k.cmd = exec.Command(bin, append([]string{"--config", k.config, "--root-dir", k.a.root, "--cert-dir", filepath.Join(k.a.root, "pki"),
		"--hostname-override", k.a.node, "--v", "2"}, k.flags...)...)
	k.cmd.Stdout, k.cmd.Stderr = k.out, k.out
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	k.waitErr = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(k.cmd, k.waitErr)
}

// alive reports whether the kubelet still runs.
func (k *kubeletProc) alive() bool {
	select {
	case err := <-k.waitErr:
		k.waitErr <- err
		return false
	default:
		return k.cmd != nil
	}
}

// stop ends the kubelet with SIGTERM: its pods keep running.
func (k *kubeletProc) stop() {
	if k.cmd == nil {
		return
	}
	k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.waitErr:
	case <-time.After(30 * time.Second):
		k.cmd.Process.Kill()
		<-k.waitErr
	}
	k.cmd = nil
}

// runningInstance is one running container as the runtime knows it.
type runningInstance struct {
	id       string
	started  int64
	restarts string
}

// instances are the running containers of the agent's node by pod and
// container name, and how many containers there are in all.
func instances(t *testing.T, a *agent) (map[string]runningInstance, int) {
	t.Helper()
	_, cs := a.runtimeState()
	out := map[string]runningInstance{}
	for _, c := range cs {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		st := containerStatus(t, c.Id)
		out[c.Labels["io.kubernetes.pod.name"]+"/"+c.Metadata.Name] = runningInstance{id: c.Id, started: st.StartedAt,
			restarts: c.Annotations["io.kubernetes.container.restartCount"]}
	}
	return out, len(cs)
}

// TestKubeletTakeoverAndHandback: a node the upstream kubelet runs (two
// static pods, one of them restarted once, its emptyDir keeping a mark) is
// taken over by nodeagent started on the same files with the kubelet
// stopped — no container restarted, the pods Running under the kubelet's
// UIDs with their restart counts, their logs readable — and handed back
// to the kubelet the same way, after nodeagent restarted a container.
func TestKubeletTakeoverAndHandback(t *testing.T) {
	a := newAgent(t, "--adopt-kubelet-pods") // its --pod-logs-dir is the kubelet's podLogsDir too
	a.write("web.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "echo web up; while true; do sleep 1; done"]
`, busybox))
	// Exits the first time, then finds its mark in the emptyDir and stays.
	a.write("once.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: once}
spec:
  volumes: [{name: data, emptyDir: {}}]
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "if [ -f /data/mark ]; then echo stays; while true; do sleep 1; done; fi; touch /data/mark; exit 1"]
    volumeMounts: [{name: data, mountPath: /data}]
`, busybox))

	k := newKubelet(t, a, "")
	k.start()
	web, once := a.podName("web")+"/app", a.podName("once")+"/app"
	var before map[string]runningInstance
	var count int
	eventually(t, 90*time.Second, "the kubelet running both pods, once restarted once", func() bool {
		before, count = instances(t, a)
		return before[web].id != "" && before[once].restarts == "1"
	})
	if !k.alive() {
		t.Fatal("the kubelet exited")
	}
	k.stop()

	// nodeagent on the kubelet's files: every pod adopted as it runs.
	a.start()
	eventually(t, 30*time.Second, "both pods Running in nodeagent's statuses", func() bool {
		w, o := a.status("web"), a.status("once")
		return w != nil && o != nil && w.Status.Phase == "Running" && o.Status.Phase == "Running" &&
			len(o.Status.ContainerStatuses) == 1 && o.Status.ContainerStatuses[0].RestartCount == 1
	})
	after, afterCount := instances(t, a)
	for key, b := range before {
		if after[key] != b {
			t.Errorf("%s: %+v under the kubelet, %+v under nodeagent: restarted", key, b, after[key])
		}
	}
	if afterCount != count {
		t.Errorf("%d containers under the kubelet, %d under nodeagent", count, afterCount)
	}
	for _, name := range []string{"web", "once"} {
		sbs := a.sandboxes(name)
		if len(sbs) != 1 {
			t.Fatalf("%s: %d sandboxes, want the kubelet's one", name, len(sbs))
		}
		if st := a.status(name); st == nil || string(st.UID) != sbs[0].Metadata.Uid {
			t.Errorf("%s: nodeagent's UID is not the kubelet's %s", name, sbs[0].Metadata.Uid)
		}
	}
	// The logs the kubelet's containers wrote, through nodeagent.
	if out := a.logsOK(t, a.podName("web")); !strings.Contains(out, "web up") {
		t.Errorf("nodeagent logs of the kubelet's container: %q", out)
	}

	// nodeagent restarts a container of the kubelet's: the restart count
	// goes on, the pod's emptyDir is the kubelet's.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: before[once].id, Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	var restarted map[string]runningInstance
	eventually(t, 60*time.Second, "nodeagent restarting the stopped container", func() bool {
		restarted, _ = instances(t, a)
		return restarted[once].id != "" && restarted[once].id != before[once].id
	})
	if restarted[once].restarts != "2" {
		t.Errorf("restart count %s after nodeagent's restart, want 2", restarted[once].restarts)
	}
	eventually(t, 10*time.Second, "once's status: running, restart count 2", func() bool {
		st := a.status("once")
		return st != nil && len(st.Status.ContainerStatuses) == 1 && st.Status.ContainerStatuses[0].RestartCount == 2 &&
			st.Status.ContainerStatuses[0].State.Running != nil
	})
	a.stop()

	_, restartedCount := instances(t, a)

	// Handed back: the kubelet keeps every container. Its own /pods says
	// when it has synced them (statuses of running containers).
	k.start()
	eventually(t, 60*time.Second, "the kubelet's statuses of both pods, their containers running", func() bool {
		if !k.alive() {
			t.Fatalf("the kubelet exited on nodeagent's files:\n%s", tail(k.out.String(), 40))
		}
		running := 0
		for _, p := range k.pods(t) {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					running++
				}
			}
		}
		return running == 2
	})
	back, backCount := instances(t, a)
	for key, r := range restarted {
		if back[key] != r {
			t.Errorf("%s: %+v under nodeagent, %+v under the kubelet again: restarted", key, r, back[key])
		}
	}
	if backCount != restartedCount {
		t.Errorf("%d containers under nodeagent, %d under the kubelet again", restartedCount, backCount)
	}
	for _, p := range k.pods(t) {
		for _, cs := range p.Status.ContainerStatuses {
			if want := restarted[p.Name+"/"+cs.Name]; cs.ContainerID != "containerd://"+want.id {
				t.Errorf("the kubelet's %s/%s is %s, want nodeagent's %s", p.Name, cs.Name, cs.ContainerID, want.id)
			}
		}
	}
	if strings.Contains(k.out.String(), "checkpoint is corrupted") {
		t.Errorf("the kubelet refused nodeagent's state:\n%s", tail(k.out.String(), 40))
	}
}

// pods is the kubelet's /pods (its node server; anonymous, AlwaysAllow).
func (k *kubeletProc) pods(t *testing.T) []v1.Pod {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the kubelet's self-signed certificate, on loopback
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/pods", k.port))
	if err != nil {
		return nil // not serving yet
	}
	defer resp.Body.Close()
	var l v1.PodList
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&l) != nil {
		return nil
	}
	return l.Items
}

// cpusetOf is the cpuset the runtime gives a running container.
func cpusetOf(t *testing.T, id string) string {
	t.Helper()
	st := containerStatus(t, id)
	return st.GetResources().GetLinux().GetCpusetCpus()
}

// TestKubeletTakeoverAPIMode: a node the upstream kubelet runs in a real
// cluster — three static pods with their mirror pods, and five API pods:
// one reading a ConfigMap volume and its service account token, one
// Guaranteed pod pinned to a CPU of its own by the static CPU manager, one
// restarted once — is taken over by nodeagent on the kubelet's files (its
// kubeconfig and client certificate, root dir, cpu_manager_state): no
// container restarted, restart counts unchanged in the API, the mirror
// pods kept, the pinned container on its CPU, a ConfigMap edit and a new
// service account token reaching the kubelet's volumes, kubectl logs
// answered for every pod; then handed back to the kubelet, which keeps
// every container.
func TestKubeletTakeoverAPIMode(t *testing.T) {
	c := apiCluster(t)
	ctx := context.Background()
	a := newAgent(t)
	kubeconfig, certDir := filepath.Join(a.root, "kubeconfig"), filepath.Join(a.root, "pki")
	a.extra = []string{"--adopt-kubelet-pods", "--kubeconfig", kubeconfig, "--cert-dir", certDir, "--node-status-update-frequency", "2s",
		"--sync-frequency", "10s", "--cpu-manager-policy", "static", "--reserved-cpus", "0",
		"--port", strconv.Itoa(freePort(t)), "--client-ca-file", c.CAFile} // kubectl logs through the API server
	t.Cleanup(func() { c.Admin.CoreV1().Nodes().Delete(context.Background(), a.node, metav1.DeleteOptions{}) })
	statics := []string{"static", "static2", "static3"}
	for _, name := range statics {
		a.write(name+".yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  containers:
  - name: app
    image: %s
    command: ["sh", "-c", "while true; do sleep 1; done"]
`, name, busybox))
	}
	k := newKubelet(t, a, `cpuManagerPolicy: static
reservedSystemCPUs: "0"
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
`, "--kubeconfig", kubeconfig, "--bootstrap-kubeconfig", c.BootstrapKubeconfig)
	k.start()
	approveUntilIssued(t, c, a)
	eventually(t, 60*time.Second, "the kubelet's Node Ready", func() bool { return nodeReady(c, a.node) })

	cmName := "cfg-" + a.node
	if _, err := c.Admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName},
		Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Admin.CoreV1().ConfigMaps("default").Delete(context.Background(), cmName, metav1.DeleteOptions{})
	})
	cfg := apiSleeper(a, "cfg")
	cfg.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: cmName}}}}}
	cfg.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
	pinned := apiSleeper(a, "pinned")
	one := resource.MustParse("1")
	mem := resource.MustParse("64Mi")
	pinned.Spec.Containers[0].Resources = v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: one, v1.ResourceMemory: mem},
		Requests: v1.ResourceList{v1.ResourceCPU: one, v1.ResourceMemory: mem}}
	crash := apiSleeper(a, "crash")
	crash.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	crash.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	crash.Spec.Containers[0].Command = []string{"sh", "-c", "if [ -f /data/mark ]; then while true; do sleep 1; done; fi; touch /data/mark; exit 1"}
	apiPods := []*v1.Pod{cfg, pinned, crash, apiSleeper(a, "plain1"), apiSleeper(a, "plain2")}
	for _, p := range apiPods {
		createPod(t, c, p)
	}
	mirrorUIDs := map[string]types.UID{}
	eventually(t, 90*time.Second, "every pod Running in the API (crash restarted once), the static pods' mirrors", func() bool {
		for _, p := range apiPods {
			got := apiPod(c, t, "default", p.Name)
			if got == nil || got.Status.Phase != v1.PodRunning || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Running == nil {
				return false
			}
			if p == crash && got.Status.ContainerStatuses[0].RestartCount != 1 {
				return false
			}
		}
		for _, name := range statics {
			m := apiPod(c, t, "default", a.podName(name))
			if m == nil {
				return false
			}
			mirrorUIDs[m.Name] = m.UID
		}
		return true
	})
	before, count := instances(t, a)
	pinnedKey := pinned.Name + "/main"
	pinnedSet := cpusetOf(t, before[pinnedKey].id)
	if pinnedSet != "1" {
		t.Fatalf("the kubelet pinned %s to %q, want CPU 1", pinned.Name, pinnedSet)
	}
	const tokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	kubeletToken := execIn(t, before[cfg.Name+"/main"].id, "cat", tokenPath)
	if kubeletToken == "" {
		t.Fatalf("no service account token in %s under the kubelet", cfg.Name)
	}
	k.stop()

	// nodeagent on the kubelet's files.
	a.start()
	eventually(t, 30*time.Second, "nodeagent's Node Ready, the pods Running in its statuses", func() bool {
		if !nodeReady(c, a.node) {
			return false
		}
		for _, n := range append([]string{"cfg", "pinned", "crash", "plain1", "plain2"}, statics...) {
			if st := a.status(n); st == nil || st.Status.Phase != v1.PodRunning {
				return false
			}
		}
		return true
	})
	after, afterCount := instances(t, a)
	for key, b := range before {
		if after[key] != b {
			t.Errorf("%s: %+v under the kubelet, %+v under nodeagent: restarted", key, b, after[key])
		}
	}
	if afterCount != count {
		t.Errorf("%d containers under the kubelet, %d under nodeagent", count, afterCount)
	}
	if got := apiPod(c, t, "default", crash.Name); got == nil || got.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("crash's restart count in the API after the takeover: %+v", got)
	}
	for name, uid := range mirrorUIDs {
		if m := apiPod(c, t, "default", name); m == nil || m.UID != uid {
			t.Errorf("the mirror pod %s was not kept (%v)", name, m)
		}
	}
	// kubectl logs, through the API server and nodeagent's node server,
	// for every pod (the static ones by their mirror pods).
	var logged []string
	for _, p := range apiPods {
		logged = append(logged, p.Name)
	}
	for name := range mirrorUIDs {
		logged = append(logged, name)
	}
	for _, name := range logged {
		if _, err := c.Admin.CoreV1().Pods("default").GetLogs(name, &v1.PodLogOptions{}).DoRaw(ctx); err != nil {
			t.Errorf("kubectl logs %s under nodeagent: %v", name, err)
		}
	}
	if got := cpusetOf(t, after[pinnedKey].id); got != pinnedSet {
		t.Errorf("the pinned container's cpuset is %q under nodeagent, was %q", got, pinnedSet)
	}
	// A ConfigMap edit reaches the kubelet's volume.
	cm, err := c.Admin.CoreV1().ConfigMaps("default").Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "taken over"
	if _, err := c.Admin.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfgID := after[cfg.Name+"/main"].id
	eventually(t, 30*time.Second, "the ConfigMap edit in the kubelet's volume", func() bool {
		return execIn(t, cfgID, "cat", "/cfg/greeting") == "taken over"
	})
	// A token nodeagent requested (its cache starts empty, as the
	// kubelet's after a restart) replaces the kubelet's in the kubelet's
	// projected volume.
	eventually(t, 30*time.Second, "a token of nodeagent's in the kubelet's projected volume", func() bool {
		tok := execIn(t, cfgID, "cat", tokenPath)
		return tok != "" && tok != kubeletToken
	})
	after, _ = instances(t, a)
	a.stop()

	// Handed back.
	k.start()
	eventually(t, 60*time.Second, "the kubelet's statuses of every pod, their containers running", func() bool {
		if !k.alive() {
			t.Fatalf("the kubelet exited on nodeagent's files:\n%s", tail(k.out.String(), 40))
		}
		running := 0
		for _, p := range k.pods(t) {
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil {
					running++
				}
			}
		}
		return running == len(apiPods)+len(statics)
	})
	back, _ := instances(t, a)
	for key, r := range after {
		if back[key] != r {
			t.Errorf("%s: %+v under nodeagent, %+v under the kubelet again: restarted", key, r, back[key])
		}
	}
	if got := cpusetOf(t, back[pinnedKey].id); got != pinnedSet {
		t.Errorf("the pinned container's cpuset is %q under the kubelet again, was %q", got, pinnedSet)
	}
	if strings.Contains(k.out.String(), "checkpoint is corrupted") {
		t.Errorf("the kubelet refused nodeagent's state:\n%s", tail(k.out.String(), 40))
	}
	k.stop()
}
