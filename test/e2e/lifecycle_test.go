//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func crasher(name, policy, script string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  restartPolicy: ` + policy + `
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: ` + busybox + `
    command: ["sh", "-c", "` + script + `"]
`
}

// instance is one observed run of a container.
type instance struct {
	id                string
	started, finished time.Time
	attempt           uint32
}

// observe polls the pod's container instances until n have finished,
// keeping each one's times even after the agent collected it.
func observe(t *testing.T, a *agent, pod string, n int, timeout time.Duration) []instance {
	t.Helper()
	seen := map[string]*instance{}
	deadline := time.Now().Add(timeout)
	for {
		for _, c := range a.containers(pod, "c") {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
			cancel()
			if err != nil {
				continue // collected between list and inspect; its times were recorded earlier
			}
			st := r.Status
			in := seen[c.Id]
			if in == nil {
				in = &instance{id: c.Id, attempt: c.Metadata.Attempt}
				seen[c.Id] = in
			}
			if st.StartedAt > 0 {
				in.started = time.Unix(0, st.StartedAt)
			}
			if st.FinishedAt > 0 {
				in.finished = time.Unix(0, st.FinishedAt)
			}
		}
		done := 0
		for _, in := range seen {
			if !in.finished.IsZero() {
				done++
			}
		}
		if done >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d container runs finished within %v", done, n, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	out := make([]instance, 0, len(seen))
	for _, in := range seen {
		out = append(out, *in)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].attempt < out[j-1].attempt; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// A crashing container is restarted at once, then after 10s, 20s, 40s
// (each within ±20%), and its status says CrashLoopBackOff meanwhile.
func TestCrashLoopBackOffGaps(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("crash.yaml", crasher("crash", "Always", "sleep 1; exit 1"))
	runs := observe(t, a, "crash", 5, 150*time.Second)
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second}
	var gaps []time.Duration
	for i := 1; i < len(runs) && i <= len(want); i++ {
		if runs[i].started.IsZero() {
			continue
		}
		gaps = append(gaps, runs[i].started.Sub(runs[i-1].finished))
	}
	if len(gaps) < 4 {
		t.Fatalf("saw %d restarts, want 4 (runs %+v)", len(gaps), runs)
	}
	t.Logf("restart gaps: %v", gaps)
	if gaps[0] > 2*time.Second {
		t.Errorf("first restart after %v, want at once", gaps[0])
	}
	for i := 1; i < len(gaps); i++ {
		lo, hi := want[i]*8/10, want[i]*12/10
		if gaps[i] < lo || gaps[i] > hi {
			t.Errorf("restart %d after %v, want %v ±20%%", i+1, gaps[i], want[i])
		}
	}
	for i, r := range runs {
		if r.attempt != uint32(i) {
			t.Errorf("run %d has attempt %d", i, r.attempt)
		}
	}
}

// The first restart is immediate and the second crash puts the container
// in CrashLoopBackOff, with the exit recorded as its last state.
func TestCrashLoopFirstRestartAndStatus(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("crash.yaml", crasher("crash2", "Always", "sleep 1; exit 7"))
	runs := observe(t, a, "crash2", 2, 60*time.Second)
	if len(runs) < 2 || runs[1].started.IsZero() {
		t.Fatalf("no restart seen: %+v", runs)
	}
	if gap := runs[1].started.Sub(runs[0].finished); gap > 2*time.Second {
		t.Errorf("first restart after %v, want at once (relist ≤ 1s)", gap)
	}
	eventually(t, 20*time.Second, "status CrashLoopBackOff with last exit 7", func() bool {
		p := a.status("crash2")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" &&
			cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode == 7 &&
			cs.RestartCount >= 1 && p.Status.Phase == v1.PodRunning
	})
}

// restartPolicy Never: exit 0 → Succeeded/Completed, exit 3 → Failed/Error
// with the exit code, and no restart.
func TestRestartPolicyNever(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("ok.yaml", crasher("ok", "Never", "exit 0"))
	a.write("bad.yaml", crasher("bad", "Never", "exit 3"))
	// OnFailure with an init container, finishing with 0: done for good.
	a.write("onf.yaml", strings.Replace(crasher("onf", "OnFailure", "exit 0"), "  containers:\n",
		"  initContainers:\n  - {name: init, image: "+busybox+", command: [\"true\"]}\n  containers:\n", 1))
	check := func(name string, phase v1.PodPhase, reason string, code int32) {
		eventually(t, 60*time.Second, name+" "+string(phase), func() bool {
			p := a.status(name)
			if p == nil || p.Status.Phase != phase || len(p.Status.ContainerStatuses) != 1 {
				return false
			}
			term := p.Status.ContainerStatuses[0].State.Terminated
			return term != nil && term.Reason == reason && term.ExitCode == code
		})
	}
	check("ok", v1.PodSucceeded, "Completed", 0)
	check("bad", v1.PodFailed, "Error", 3)
	check("onf", v1.PodSucceeded, "Completed", 0)
	// A finished pod's sandbox is stopped: its IP and ports are free.
	eventually(t, 30*time.Second, "finished pods' sandboxes stopped", func() bool {
		for _, name := range []string{"ok", "bad"} {
			sbs := a.sandboxes(name)
			if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
				return false
			}
		}
		return true
	})
	// Let the agent see more events: a marker pod comes up, then count.
	a.write("marker.yaml", sleeper("marker", "m"))
	eventually(t, 60*time.Second, "marker running", func() bool { return a.running("marker", "main") != nil })
	for _, name := range []string{"ok", "bad", "onf"} {
		if n := len(a.containers(name, "c")); n != 1 {
			t.Errorf("%s: %d container instances, want 1 (no restart)", name, n)
		}
		if n := len(a.sandboxes(name)); n != 1 {
			t.Errorf("%s: %d sandboxes, want 1 (a finished pod gets no new one)", name, n)
		}
	}
}

// Init containers run strictly in order, each after the previous exited 0.
func TestInitContainersInOrder(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("init.yaml", `apiVersion: v1
kind: Pod
metadata: {name: init}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - {name: one, image: `+busybox+`, command: ["sh", "-c", "sleep 1; echo one >> /w/order"], volumeMounts: [{name: w, mountPath: /w}]}
  - {name: two, image: `+busybox+`, command: ["sh", "-c", "grep -q one /w/order && echo two >> /w/order"], volumeMounts: [{name: w, mountPath: /w}]}
  containers:
  - {name: main, image: `+busybox+`, command: ["sh", "-c", "cat /w/order; trap 'exit 0' TERM; sleep 100000 & wait"], volumeMounts: [{name: w, mountPath: /w}]}
  volumes: [{name: w, emptyDir: {}}]
`)
	eventually(t, 60*time.Second, "main running", func() bool { return a.running("init", "main") != nil })
	one := containerStatus(t, a.containers("init", "one")[0].Id)
	two := containerStatus(t, a.containers("init", "two")[0].Id)
	main := containerStatus(t, a.running("init", "main").Id)
	if one.ExitCode != 0 || two.ExitCode != 0 {
		t.Fatalf("init exit codes %d %d", one.ExitCode, two.ExitCode)
	}
	if two.StartedAt < one.FinishedAt || main.StartedAt < two.FinishedAt {
		t.Fatalf("not in order: one %d-%d, two %d-%d, main %d", one.StartedAt, one.FinishedAt, two.StartedAt, two.FinishedAt, main.StartedAt)
	}
	eventually(t, 10*time.Second, "status Initialized", func() bool {
		p := a.status("init")
		if p == nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodInitialized && c.Status == v1.ConditionTrue {
				return p.Status.Phase == v1.PodRunning
			}
		}
		return false
	})
}

// nodeagent killed with SIGKILL and restarted adopts its running pods:
// not one container is restarted. A manifest changed while it was down is
// replaced, one removed while it was down is killed.
func TestAdoptAfterSIGKILL(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	const n = 10
	for i := 0; i < n; i++ {
		a.write(fmt.Sprintf("p%d.yaml", i), sleeper(fmt.Sprintf("p%d", i), "x"))
	}
	ids := map[string]string{}
	eventually(t, 120*time.Second, "10 pods running", func() bool {
		for i := 0; i < n; i++ {
			c := a.running(fmt.Sprintf("p%d", i), "main")
			if c == nil {
				return false
			}
			ids[fmt.Sprintf("p%d", i)] = c.Id
		}
		return true
	})
	sandboxes := map[string]string{}
	for name := range ids {
		sandboxes[name] = a.sandboxes(name)[0].Id
	}
	a.kill9()
	oldUID := a.sandboxes("p0")[0].Metadata.Uid
	a.write("p0.yaml", sleeper("p0", "changed while down"))
	a.remove("p1.yaml")
	delete(ids, "p0")
	delete(ids, "p1")
	restarted := time.Now()
	a.start()
	// The restarted agent has synced every pod (status rewritten) and
	// handles new work (a marker pod runs).
	a.write("marker.yaml", sleeper("marker", "m"))
	eventually(t, 60*time.Second, "marker running and all statuses rewritten", func() bool {
		if a.running("marker", "main") == nil {
			return false
		}
		for name := range ids {
			fi, err := os.Stat(filepath.Join(a.root, "status", "default_"+a.podName(name)+".json"))
			if err != nil || fi.ModTime().Before(restarted) {
				return false
			}
		}
		return true
	})
	eventually(t, 60*time.Second, "p0 replaced and p1 removed", func() bool {
		sbs := a.sandboxes("p0")
		return len(sbs) == 1 && sbs[0].Metadata.Uid != oldUID && a.running("p0", "main") != nil && len(a.sandboxes("p1")) == 0
	})
	for name, id := range ids {
		cs := a.containers(name, "main")
		if len(cs) != 1 || cs[0].Id != id || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("%s: containers %v, want only %s running", name, cs, id)
		}
		if sbs := a.sandboxes(name); len(sbs) != 1 || sbs[0].Id != sandboxes[name] {
			t.Errorf("%s: sandbox replaced", name)
		}
		if p := a.status(name); p == nil || p.Status.Phase != v1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("%s: status after adoption %+v", name, p)
		}
	}
}

// sandboxPID reads the pause process's PID from the runtime.
func sandboxPID(t *testing.T, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := conn.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(r.Info["info"]), &info); err != nil || info.Pid == 0 {
		t.Fatalf("no pid in sandbox info (%v): %.300s", err, r.Info["info"])
	}
	return info.Pid
}

// A dead sandbox (pause killed) is replaced: attempt 1, init containers
// re-run, containers recreated in it.
func TestSandboxDeathRecreatesPod(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("sb.yaml", `apiVersion: v1
kind: Pod
metadata: {name: sb}
spec:
  terminationGracePeriodSeconds: 2
  initContainers:
  - {name: init, image: `+busybox+`, command: ["true"]}
  containers:
  - {name: main, image: `+busybox+`, command: ["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]}
`)
	eventually(t, 60*time.Second, "main running", func() bool { return a.running("sb", "main") != nil })
	old := a.sandboxes("sb")[0]
	if err := syscall.Kill(sandboxPID(t, old.Id), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "new sandbox with init and main re-run", func() bool {
		for _, sb := range a.sandboxes("sb") {
			if sb.Id == old.Id || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY || sb.Metadata.Attempt != 1 {
				continue
			}
			c := a.running("sb", "main")
			inits := a.containers("sb", "init")
			reran := false
			for _, i := range inits {
				reran = reran || i.PodSandboxId == sb.Id
			}
			// The restart count carries over from the dead sandbox.
			return c != nil && c.PodSandboxId == sb.Id && reran && c.Metadata.Attempt == 1 &&
				c.Annotations["io.kubernetes.container.restartCount"] == "1"
		}
		return false
	})
	eventually(t, 10*time.Second, "status shows restart count 1", func() bool {
		p := a.status("sb")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 1 &&
			p.Status.Phase == v1.PodRunning
	})
}

// A sandbox carrying nodeagent's labels for this node but belonging to no
// manifest is removed by housekeeping, with its log directory.
func TestOrphanSandboxRemoved(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("marker.yaml", sleeper("marker", "m"))
	eventually(t, 60*time.Second, "marker running", func() bool { return a.running("marker", "main") != nil })
	uid := "0123456789abcdef0123456789abcdef"
	name := a.podName("orphan")
	logDir := filepath.Join(a.logs, "default_"+name+"_"+uid)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := conn.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		Labels:       map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": uid, "io.nodeagent.managed": "true", "io.nodeagent.node": a.node},
		LogDirectory: logDir,
		Linux:        &runtimeapi.LinuxPodSandboxConfig{},
	}})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	eventually(t, 30*time.Second, "orphan sandbox removed", func() bool {
		for _, sb := range a.sandboxes("orphan") {
			if sb.Id == resp.PodSandboxId {
				return false
			}
		}
		return true
	})
	t.Logf("orphan removed %v after creation", time.Since(created).Round(time.Millisecond))
	eventually(t, 10*time.Second, "orphan log dir removed", func() bool {
		_, err := os.Stat(logDir)
		return os.IsNotExist(err)
	})
	if a.running("marker", "main") == nil {
		t.Fatal("housekeeping touched a wanted pod")
	}
}

// 20 pods added and removed, twice, plus pods removed before they ever
// ran: nothing is left in the runtime, on disk, in IPAM or in cgroups.
func TestChurnLeavesNothing(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	const n = 20
	var ids []string
	for round := 0; round < 2; round++ {
		for i := 0; i < n; i++ {
			a.write(fmt.Sprintf("c%d.yaml", i), sleeper(fmt.Sprintf("c%d", i), fmt.Sprint(round)))
		}
		eventually(t, 180*time.Second, "20 pods running", func() bool {
			for i := 0; i < n; i++ {
				if a.running(fmt.Sprintf("c%d", i), "main") == nil {
					return false
				}
			}
			return true
		})
		sbs, cs := a.runtimeState()
		for _, sb := range sbs {
			ids = append(ids, sb.Id)
		}
		for _, c := range cs {
			ids = append(ids, c.Id)
		}
		for i := 0; i < n; i++ {
			a.remove(fmt.Sprintf("c%d.yaml", i))
		}
		eventually(t, 120*time.Second, "everything removed", func() bool {
			sbs, cs := a.runtimeState()
			return len(sbs) == 0 && len(cs) == 0
		})
	}
	// Added and removed at once, before they could run.
	for i := 0; i < 5; i++ {
		a.write(fmt.Sprintf("flash%d.yaml", i), sleeper(fmt.Sprintf("flash%d", i), "f"))
	}
	for i := 0; i < 5; i++ {
		a.remove(fmt.Sprintf("flash%d.yaml", i))
	}
	a.write("marker.yaml", sleeper("marker", "m"))
	eventually(t, 60*time.Second, "marker running", func() bool { return a.running("marker", "main") != nil })
	a.remove("marker.yaml")
	eventually(t, 60*time.Second, "runtime, log dirs, pod dirs and statuses empty", func() bool {
		sbs, cs := a.runtimeState()
		return len(sbs) == 0 && len(cs) == 0 && empty(a.logs) && empty(filepath.Join(a.root, "pods")) && empty(filepath.Join(a.root, "status"))
	})
	// No pod cgroup is left under the agent's kubepods.
	eventually(t, 30*time.Second, "pod cgroups removed", func() bool {
		left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", a.cgroupRoot(), "kubepods", "pod*"))
		more, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", a.cgroupRoot(), "kubepods", "*", "pod*"))
		return len(left)+len(more) == 0
	})
	// No IP lease and no cgroup of ours is left.
	leases := leaseFiles(t)
	for _, id := range ids {
		for file, body := range leases {
			if strings.Contains(body, id) {
				t.Errorf("IPAM lease %s still held by %s", file, id[:12])
			}
		}
		for _, ctrl := range []string{"memory", "cpu", "pids"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctrl, "k8s.io", id)); err == nil {
				t.Errorf("cgroup %s/k8s.io/%s left", ctrl, id[:12])
			}
		}
	}
	t.Logf("checked %d sandbox/container IDs against %d lease files", len(ids), len(leases))
}

func empty(dir string) bool {
	entries, err := os.ReadDir(dir)
	return (err == nil || os.IsNotExist(err)) && len(entries) == 0
}

// leaseFiles reads host-local's lease files of the rig's network (its
// dataDir is <rig>/cni/ipam, see hack/rig.sh).
func leaseFiles(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := os.Getenv("NODEAGENT_RIG_DIR")
	if root == "" {
		t.Fatal("NODEAGENT_RIG_DIR not set: cannot check IPAM leases")
	}
	found := false
	filepath.Walk(filepath.Join(root, "cni", "ipam"), func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		found = true
		if b, err := os.ReadFile(path); err == nil {
			out[path] = string(b)
		}
		return nil
	})
	if !found {
		t.Fatalf("no host-local IPAM directory under %s", root)
	}
	return out
}

// Removal honours terminationGracePeriodSeconds: a container that ignores
// SIGTERM is killed when the grace period ends, one that exits on SIGTERM
// goes at once.
func TestGracefulTermination(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	pod := func(name, script string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 4
  containers:
  - {name: main, image: ` + busybox + `, command: ["sh", "-c", "` + script + `"]}
`
	}
	a.write("stubborn.yaml", pod("stubborn", "trap '' TERM; while true; do sleep 1; done"))
	a.write("polite.yaml", pod("polite", "trap 'exit 0' TERM; sleep 100000 & wait"))
	var stubborn, polite *runtimeapi.Container
	eventually(t, 60*time.Second, "both running", func() bool {
		stubborn, polite = a.running("stubborn", "main"), a.running("polite", "main")
		return stubborn != nil && polite != nil
	})
	removed := time.Now()
	a.remove("stubborn.yaml")
	a.remove("polite.yaml")
	finished := map[string]time.Duration{}
	eventually(t, 30*time.Second, "both containers stopped", func() bool {
		for name, c := range map[string]*runtimeapi.Container{"stubborn": stubborn, "polite": polite} {
			if _, ok := finished[name]; ok {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
			cancel()
			switch {
			case err != nil:
				// Already removed: it finished before this poll.
				finished[name] = time.Since(removed)
			case r.Status.FinishedAt > 0:
				finished[name] = time.Unix(0, r.Status.FinishedAt).Sub(removed)
			}
		}
		return len(finished) == 2
	})
	t.Logf("stopped after: %v", finished)
	if d := finished["stubborn"]; d < 3500*time.Millisecond || d > 8*time.Second {
		t.Errorf("SIGTERM-ignoring container stopped after %v, want the 4s grace period", d)
	}
	if d := finished["polite"]; d > 2*time.Second {
		t.Errorf("SIGTERM-honouring container stopped after %v, want at once", d)
	}
	eventually(t, 30*time.Second, "both pods removed", func() bool {
		return len(a.sandboxes("stubborn")) == 0 && len(a.sandboxes("polite")) == 0
	})
}
