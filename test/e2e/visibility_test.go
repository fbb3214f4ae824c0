//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A pod is visible from the moment it is admitted: a 50-container pod
// shows Pending / ContainerCreating while its containers are still being
// created (its first sync takes seconds), with startTime set then.
func TestPodVisibleBeforeFirstSync(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Pod\nmetadata: {name: wide}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "  - {name: c%d, image: %s, command: [sleep, \"100000\"]}\n", i, busybox)
	}
	written := time.Now()
	a.write("wide.yaml", b.String())
	var p *v1.Pod
	for p == nil {
		if time.Since(written) > 30*time.Second {
			t.Fatal("no status within 30s")
		}
		time.Sleep(5 * time.Millisecond)
		p = a.status("wide")
	}
	seen := time.Since(written)
	running := 0
	for _, c := range a.containers("wide", "") {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running++
		}
	}
	t.Logf("status visible %v after the manifest was written; %d of 50 containers running then", seen.Round(time.Millisecond), running)
	if running == 50 {
		t.Fatal("the status appeared only once every container ran: not at admission")
	}
	if p.Status.Phase != v1.PodPending || p.Status.StartTime == nil {
		t.Fatalf("first status: phase %s startTime %v; want Pending with a start time", p.Status.Phase, p.Status.StartTime)
	}
	if w := p.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
		t.Fatalf("first container state %+v, want ContainerCreating", p.Status.ContainerStatuses[0].State)
	}
	if d := p.Status.StartTime.Sub(written); d > 5*time.Second || d < -time.Second {
		t.Errorf("startTime %v is not when the pod was admitted (manifest written %v)", p.Status.StartTime, written)
	}
	start := p.Status.StartTime.Time
	eventually(t, 120*time.Second, "all 50 running", func() bool {
		p := a.status("wide")
		return p != nil && p.Status.Phase == v1.PodRunning
	})
	if got := a.status("wide").Status.StartTime.Time; !got.Equal(start) {
		t.Errorf("startTime moved from %v to %v", start, got)
	}
}

// A pod being removed shows Terminating (deletionTimestamp) until gone.
func TestTerminatingShown(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	// The container ignores SIGTERM: its removal takes the grace period.
	a.write("slow.yaml", `apiVersion: v1
kind: Pod
metadata: {name: slow}
spec:
  terminationGracePeriodSeconds: 6
  containers:
  - {name: main, image: `+busybox+`, command: [sh, -c, "trap '' TERM; while true; do sleep 1; done"]}
`)
	eventually(t, 60*time.Second, "slow running", func() bool { return a.running("slow", "main") != nil })
	eventually(t, 10*time.Second, "status Running", func() bool {
		p := a.status("slow")
		return p != nil && p.Status.Phase == v1.PodRunning
	})
	a.remove("slow.yaml")
	eventually(t, 5*time.Second, "Terminating shown", func() bool {
		p := a.status("slow")
		return p != nil && p.DeletionTimestamp != nil && *p.DeletionGracePeriodSeconds == 6 &&
			strings.Contains(a.pods(), "Terminating")
	})
	eventually(t, 30*time.Second, "pod gone", func() bool { return a.status("slow") == nil })
}

// pods runs `nodeagent pods` on the agent's root dir.
func (a *agent) pods() string {
	a.t.Helper()
	out, err := exec.Command(binary, "pods", "--root-dir", a.root).CombinedOutput()
	if err != nil {
		a.t.Fatalf("nodeagent pods: %v\n%s", err, out)
	}
	return string(out)
}

// During an image pull backoff the status says ImagePullBackOff (after a
// moment of ErrImagePull at each failed pull), as the kubelet shows it.
func TestImagePullBackOffShown(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("missing.yaml", `apiVersion: v1
kind: Pod
metadata: {name: missing}
spec:
  containers:
  - {name: main, image: "127.0.0.1:5055/nodeagent/does-not-exist:1", command: [sleep, "1000"]}
`)
	eventually(t, 30*time.Second, "first ErrImagePull", func() bool {
		p := a.status("missing")
		return p != nil && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImagePull"
	})
	// Sample for 12s (past the first 10s backoff): mostly ImagePullBackOff.
	counts := map[string]int{}
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if p := a.status("missing"); p != nil && p.Status.ContainerStatuses[0].State.Waiting != nil {
			counts[p.Status.ContainerStatuses[0].State.Waiting.Reason]++
		}
	}
	t.Logf("reasons sampled over 12s: %v", counts)
	if counts["ImagePullBackOff"] <= 3*counts["ErrImagePull"] {
		t.Fatalf("reasons during the backoff: %v; want ImagePullBackOff most of the time", counts)
	}
}

// containerd killed and restarted: pods show Unknown (and `nodeagent pods`
// names the outage) meanwhile and until their first sync after its
// return, which happens at once: a container killed during the outage is
// restarted. Not parallel: it takes the shared runtime
// away.
func TestRuntimeOutage(t *testing.T) {
	a := newAgent(t)
	a.start()
	a.write("steady.yaml", sleeper("steady", "s"))
	var c *runtimeapi.Container
	eventually(t, 60*time.Second, "steady running", func() bool { c = a.running("steady", "main"); return c != nil })
	eventually(t, 10*time.Second, "status Running", func() bool {
		p := a.status("steady")
		return p != nil && p.Status.Phase == v1.PodRunning && p.Status.PodIP != ""
	})
	rig := func(cmd string) {
		t.Helper()
		out, err := exec.Command("bash", filepath.Join("..", "..", "hack", "rig.sh"), cmd).CombinedOutput()
		if err != nil {
			t.Fatalf("rig.sh %s: %v\n%s", cmd, err, out)
		}
	}
	// The container's process, to be killed while containerd is down: only
	// a real sync after the outage can notice and restart it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cst, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(cst.Info["info"]), &info); err != nil || info.Pid == 0 {
		t.Fatalf("no pid in container info (%v)", err)
	}
	rig("kill-containerd")
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			rig("start-containerd")
		}
	})
	eventually(t, 15*time.Second, "pod shown Unknown, node outage in `nodeagent pods`", func() bool {
		p := a.status("steady")
		return p != nil && p.Status.Phase == v1.PodUnknown && p.Status.PodIP == "" &&
			strings.Contains(a.pods(), "container runtime unreachable")
	})
	if err := syscall.Kill(info.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the container's process: %v", err)
	}
	rig("start-containerd")
	restarted = true
	back := time.Now()
	eventually(t, 30*time.Second, "pod re-synced: Running again, its dead container restarted", func() bool {
		p := a.status("steady")
		return p != nil && p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" &&
			p.Status.ContainerStatuses[0].RestartCount == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	took := time.Since(back)
	t.Logf("pod status Running again %v after containerd answered", took.Round(time.Millisecond))
	// The bound is 5s; leave room for a loaded CI machine.
	if took > 8*time.Second {
		t.Errorf("re-synced %v after the runtime's return, want within a few seconds", took)
	}
	if strings.Contains(a.pods(), "unreachable") {
		t.Error("`nodeagent pods` still reports the outage")
	}
	if now := a.running("steady", "main"); now == nil || now.Id == c.Id {
		t.Fatalf("the container killed during the outage was not replaced: %v -> %v", c.Id, now)
	}
	if _, err := os.Stat(filepath.Join(a.root, "status", "_node.json")); err == nil {
		t.Error("node state file left after recovery")
	}
}

// A container whose process cannot start is kept as containerd records it
// (exit 128, StartError): a restartPolicy Never pod ends Failed instead of
// being retried forever.
func TestStartErrorNeverPodFails(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("nostart.yaml", `apiVersion: v1
kind: Pod
metadata: {name: nostart}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: `+busybox+`, command: ["/no/such/binary"]}
`)
	eventually(t, 60*time.Second, "pod Failed with the container terminated (128)", func() bool {
		p := a.status("nostart")
		if p == nil || p.Status.Phase != v1.PodFailed || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		return term != nil && term.ExitCode == 128
	})
	if n := len(a.containers("nostart", "main")); n != 1 {
		t.Fatalf("%d instances of the container, want the one that failed to start", n)
	}
}
