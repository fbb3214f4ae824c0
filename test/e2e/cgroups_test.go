//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const cgroupMount = "/sys/fs/cgroup"

// cgroupRoot is the agent's --cgroup-root: agents side by side on one
// containerd each get their own kubepods.
func (a *agent) cgroupRoot() string { return "/nodeagent-e2e-" + a.node }

// removeCgroups removes the agent's cgroup tree from every hierarchy,
// deepest first, once the runtime has let go of its containers' cgroups.
func (a *agent) removeCgroups() {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var left []string
		hier, _ := os.ReadDir(cgroupMount)
		for _, h := range hier {
			if h.IsDir() {
				if err := rmTree(filepath.Join(cgroupMount, h.Name(), a.cgroupRoot())); err != nil {
					left = append(left, err.Error())
				}
			}
		}
		if len(left) == 0 {
			return
		}
		a.reapRuntimeOrphans()
		if time.Now().After(deadline) {
			a.t.Errorf("cgroups of agent %s left: %v", a.node, left)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reapRuntimeOrphans ends the processes of the agent's container cgroups
// whose container the runtime no longer knows: a container whose create
// was in flight when the test stopped the agent can complete after its
// sandbox was removed, and containerd then forgets it while its runc
// init waits in the cgroup. The agent is not to blame (it stopped
// mid-call); a container the runtime still lists is left to the error.
func (a *agent) reapRuntimeOrphans() {
	root := filepath.Join(cgroupMount, "pids", a.cgroupRoot())
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || len(d.Name()) != 64 {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, cerr := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: d.Name()})
		_, serr := conn.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: d.Name()})
		if grpcstatus.Code(cerr) != codes.NotFound || grpcstatus.Code(serr) != codes.NotFound {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				a.t.Logf("cgroup %s: the runtime forgot container %s; killing its process %d", path, d.Name(), pid)
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		return filepath.SkipDir
	})
}

func rmTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := rmTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := unix.Rmdir(dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// cgroupFile reads a file of a cgroup of the v1 hierarchy ctrl.
func cgroupFile(t *testing.T, ctrl, cgroup, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cgroupMount, ctrl, cgroup, file))
	if err != nil {
		t.Fatalf("read cgroup file: %v", err)
	}
	return strings.TrimSpace(string(b))
}

// containerPID is the container's PID from containerd's verbose status.
func containerPID(t *testing.T, id string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("container status %s: %v", id, err)
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(r.Info["info"]), &info); err != nil || info.Pid == 0 {
		t.Fatalf("no pid in the verbose status of %s (%v): %q", id, err, r.Info["info"])
	}
	return info.Pid
}

// procCgroups maps a process's v1 hierarchies (by controller list) to
// its cgroup, as the host sees them.
func procCgroups(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			out[parts[1]] = parts[2]
		}
	}
	return out
}

// TestPodCgroups: each pod's cgroup exists under its QoS tier of the
// agent's kubepods with the pod's limits, its containers' cgroups are
// beneath it, the containers have their QoS oom_score_adj, and the pod
// cgroup is gone once the pod is removed.
func TestPodCgroups(t *testing.T) {
	if _, err := os.Stat(filepath.Join(cgroupMount, "cgroup.controllers")); err == nil {
		t.Fatal("this test reads cgroup v1 files; the host has cgroup v2")
	}
	t.Parallel()
	a := newAgent(t)
	a.start()
	pod := func(name, resources string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: ` + busybox + `
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]
` + resources
	}
	a.write("g.yaml", pod("guaranteed", "    resources: {limits: {cpu: 200m, memory: 64Mi}}\n"))
	a.write("b.yaml", pod("burstable", "    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {cpu: 300m, memory: 128Mi}}\n"))
	a.write("e.yaml", pod("besteffort", ""))

	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		t.Fatal(err)
	}
	memTotal := int64(info.Totalram) * int64(info.Unit)
	containerdAdj := 0
	if b, err := os.ReadFile(filepath.Join(os.Getenv("NODEAGENT_RIG_DIR"), "containerd.pid")); err == nil {
		if adj, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/oom_score_adj"); err == nil {
			containerdAdj, _ = strconv.Atoi(strings.TrimSpace(string(adj)))
		}
	}
	kubepods := a.cgroupRoot() + "/kubepods"
	eventually(t, 30*time.Second, "kubepods made", func() bool {
		_, err := os.Stat(filepath.Join(cgroupMount, "memory", kubepods, "besteffort"))
		return err == nil
	})
	// kubepods: node allocatable (no reservations here: capacity).
	if got, want := cgroupFile(t, "cpu", kubepods, "cpu.shares"), strconv.Itoa(1024*runtime.NumCPU()); got != want {
		t.Errorf("kubepods cpu.shares %s, want %s", got, want)
	}
	if got := cgroupFile(t, "memory", kubepods, "memory.limit_in_bytes"); got != strconv.FormatInt(memTotal, 10) {
		t.Errorf("kubepods memory.limit_in_bytes %s, want the node's memory %d", got, memTotal)
	}

	for _, tc := range []struct {
		name, tier    string
		shares, quota string
		memory        string
		oomScoreAdj   int
	}{
		// Restricted: containerd (restrict_oom_score_adj, root without
		// CAP_SYS_RESOURCE here) raises -997 to its own score.
		{"guaranteed", "", "204", "20000", "67108864", max(-997, containerdAdj)},
		{"burstable", "/burstable", "102", "30000", "134217728", int(1000 - 1000*(32<<20)/memTotal)},
		{"besteffort", "/besteffort", "2", "-1", "9223372036854771712", 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *runtimeapi.Container
			eventually(t, 90*time.Second, tc.name+" running", func() bool { c = a.running(tc.name, "main"); return c != nil })
			uid := a.sandboxes(tc.name)[0].Metadata.Uid
			cg := kubepods + tc.tier + "/pod" + uid
			for file, want := range map[string]string{"cpu.shares": tc.shares, "cpu.cfs_quota_us": tc.quota} {
				if got := cgroupFile(t, "cpu", cg, file); got != want {
					t.Errorf("%s %s = %s, want %s", cg, file, got, want)
				}
			}
			if got := cgroupFile(t, "memory", cg, "memory.limit_in_bytes"); got != tc.memory {
				t.Errorf("%s memory.limit_in_bytes = %s, want %s", cg, got, tc.memory)
			}
			pid := containerPID(t, c.Id)
			cgs := procCgroups(t, pid)
			for _, ctrl := range []string{"cpu", "memory", "pids"} {
				if got := cgs[ctrl]; !strings.HasPrefix(got, cg+"/") {
					t.Errorf("container %s cgroup %q, want beneath the pod cgroup %s", ctrl, got, cg)
				}
			}
			// And as the container sees it.
			if out := execIn(t, c.Id, "cat", "/proc/self/cgroup"); !strings.Contains(out, "pod"+uid) {
				t.Errorf("/proc/self/cgroup in the container does not name the pod cgroup:\n%s", out)
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != strconv.Itoa(tc.oomScoreAdj) {
				t.Errorf("oom_score_adj %s, want %d", got, tc.oomScoreAdj)
			}
		})
	}
	if t.Failed() {
		return
	}
	// The burstable tier's shares: its one pod's 100m.
	if got := cgroupFile(t, "cpu", kubepods+"/burstable", "cpu.shares"); got != "102" {
		t.Errorf("burstable tier cpu.shares %s, want 102", got)
	}

	var gone []string
	for _, name := range []string{"guaranteed", "burstable", "besteffort"} {
		uid := a.sandboxes(name)[0].Metadata.Uid
		for _, tier := range []string{"", "/burstable", "/besteffort"} {
			gone = append(gone, kubepods+tier+"/pod"+uid)
		}
	}
	for _, f := range []string{"g.yaml", "b.yaml", "e.yaml"} {
		a.remove(f)
	}
	eventually(t, 60*time.Second, "pod cgroups removed from every hierarchy", func() bool {
		hier, _ := os.ReadDir(cgroupMount)
		for _, h := range hier {
			for _, cg := range gone {
				if _, err := os.Stat(filepath.Join(cgroupMount, h.Name(), cg)); err == nil {
					return false
				}
			}
		}
		return true
	})
	if sbs, _ := a.runtimeState(); len(sbs) != 0 {
		t.Errorf("%d sandboxes left", len(sbs))
	}
	if got := cgroupFile(t, "cpu", kubepods+"/burstable", "cpu.shares"); got != "2" {
		t.Errorf("burstable tier cpu.shares %s after its pod left, want 2", got)
	}
}
