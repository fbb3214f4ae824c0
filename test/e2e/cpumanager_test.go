//go:build integration

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"
)

func guaranteedPod(name, cpu string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + busybox + `
    command: ["sleep", "3600"]
    resources:
      requests: {cpu: "` + cpu + `", memory: 32Mi}
      limits: {cpu: "` + cpu + `", memory: 32Mi}
`
}

// burstablePod requests memory only: no CPU request, so it fits beside
// the Guaranteed pods whatever the node's allocatable CPU.
func burstablePod(name string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + busybox + `
    command: ["sleep", "3600"]
    resources:
      requests: {memory: 16Mi}
`
}

// cpusOf reads a running container's CPUs from inside it: what the
// kernel lets it run on, and its cpuset cgroup (v2, else v1).
func cpusOf(t *testing.T, id string) (allowed, cgroup string) {
	t.Helper()
	out := execIn(t, id, "grep", "Cpus_allowed_list", "/proc/self/status")
	_, allowed, _ = strings.Cut(strings.TrimSpace(out), ":")
	cg := execIn(t, id, "sh", "-c", "cat /sys/fs/cgroup/cpuset.cpus.effective 2>/dev/null || cat /sys/fs/cgroup/cpuset/cpuset.cpus")
	return strings.TrimSpace(allowed), strings.TrimSpace(cg)
}

// TestCPUManagerStaticPolicy: with CPU 0 reserved, a Guaranteed pod asking
// for every other CPU runs pinned to them (seen from inside the container
// and its cgroup) while a Burstable pod runs on CPU 0; a second
// Guaranteed pod is refused at admission by the CPU manager; a restarted
// agent keeps the assignment and restarts no container; when the
// Guaranteed pod goes the Burstable pod gets every CPU within a reconcile
// period; a corrupt state file stops the next start with what to do.
func TestCPUManagerStaticPolicy(t *testing.T) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	online, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if online.Size() < 2 || !online.Contains(0) {
		t.Fatalf("the static policy test needs CPU 0 and at least one more online CPU; online: %s", online)
	}
	reserved := cpuset.New(0)
	exclusive := online.Difference(reserved)
	const period = 10 * time.Second
	// --reserved-cpus takes its CPUs out of allocatable, as the kubelet.
	a := newAgent(t, "--cpu-manager-policy", "static", "--reserved-cpus", reserved.String(),
		"--cpu-manager-reconcile-period", period.String())
	a.start()

	a.write("pinned.yaml", guaranteedPod("pinned", strconv.Itoa(exclusive.Size())))
	eventually(t, 90*time.Second, "the Guaranteed pod running", func() bool { return a.running("pinned", "c") != nil })
	a.write("shared.yaml", burstablePod("shared"))
	eventually(t, 90*time.Second, "the Burstable pod running", func() bool { return a.running("shared", "c") != nil })
	pinned, shared := a.running("pinned", "c"), a.running("shared", "c")

	allowed, cg := cpusOf(t, pinned.Id)
	t.Logf("Guaranteed container %s: Cpus_allowed_list %s, cpuset cgroup %s", pinned.Id[:12], allowed, cg)
	if allowed != exclusive.String() || cg != exclusive.String() {
		t.Errorf("Guaranteed container: Cpus_allowed_list %q, cpuset cgroup %q; want %s", allowed, cg, exclusive)
	}
	desc, err := exec.Command(binary, "describe", "--root-dir", a.root, "pinned").CombinedOutput()
	if err != nil || !strings.Contains(string(desc), "exclusive: "+exclusive.String()) {
		t.Errorf("nodeagent describe pinned (%v) does not show exclusive: %s:\n%s", err, exclusive, desc)
	}
	eventually(t, period+5*time.Second, "the Burstable pod on the shared pool "+reserved.String(), func() bool {
		allowed, cg := cpusOf(t, shared.Id)
		return allowed == reserved.String() && cg == reserved.String()
	})

	// No exclusive CPU left: the CPU manager refuses the next one.
	a.write("second.yaml", guaranteedPod("second", "1"))
	var refused *v1.Pod
	eventually(t, 30*time.Second, "the second Guaranteed pod refused", func() bool {
		refused = a.status("second")
		return refused != nil && refused.Status.Phase == v1.PodFailed
	})
	t.Logf("second Guaranteed pod: %s: %s", refused.Status.Reason, refused.Status.Message)
	// The reserved CPU is out of allocatable (as the kubelet): the
	// resource fit refuses the second pod before the CPU manager would
	// (whose own refusal, UnexpectedAdmissionError with requested and
	// available CPUs, the unit tests prove).
	if refused.Status.Reason != "OutOfcpu" {
		t.Errorf("refusal: reason %q message %q, want OutOfcpu", refused.Status.Reason, refused.Status.Message)
	}
	if c := a.containers("second", ""); len(c) != 0 {
		t.Errorf("refused pod has %d containers", len(c))
	}
	a.remove("second.yaml")

	// Restart: the same CPUs, nothing re-pinned, no container restarted.
	assignedBefore := strings.Count(a.out.String(), "exclusive CPUs assigned")
	admittedBefore := strings.Count(a.out.String(), "pod admitted")
	a.stop()
	a.start()
	eventually(t, 60*time.Second, "both pods admitted again", func() bool {
		return strings.Count(a.out.String(), "pod admitted") >= admittedBefore+2
	})
	// Through a whole reconcile period after the restart.
	deadline := time.Now().Add(period + 2*time.Second)
	for time.Now().Before(deadline) {
		if c := a.running("pinned", "c"); c == nil || c.Id != pinned.Id {
			t.Fatalf("Guaranteed container after the restart: %v, want %s still running", c, pinned.Id)
		}
		if c := a.running("shared", "c"); c == nil || c.Id != shared.Id {
			t.Fatalf("Burstable container after the restart: %v, want %s still running", c, shared.Id)
		}
		if allowed, _ := cpusOf(t, pinned.Id); allowed != exclusive.String() {
			t.Fatalf("Guaranteed container on %q after the restart, want %s", allowed, exclusive)
		}
		if allowed, _ := cpusOf(t, shared.Id); allowed != reserved.String() {
			t.Fatalf("Burstable container on %q after the restart, want %s", allowed, reserved)
		}
		time.Sleep(time.Second)
	}
	if n := strings.Count(a.out.String(), "exclusive CPUs assigned"); n != assignedBefore {
		t.Errorf("%d new exclusive assignments after the restart, want 0", n-assignedBefore)
	}

	// The Guaranteed pod goes: its CPUs return to the shared pool.
	a.remove("pinned.yaml")
	eventually(t, 60*time.Second, "the Guaranteed pod gone", func() bool { return len(a.sandboxes("pinned")) == 0 })
	eventually(t, period, "the Burstable pod on every CPU", func() bool {
		allowed, cg := cpusOf(t, shared.Id)
		return allowed == online.String() && cg == online.String()
	})

	// A corrupt state file: start-up refused, saying what to do.
	a.stop()
	state := filepath.Join(a.root, "cpu_manager_state")
	if err := os.WriteFile(state, []byte(`{"policyName":"static","defaultCpuSet":"0","checksum":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	logStart := len(a.out.String())
	a.start()
	select {
	case err := <-a.waitErr:
		a.cmd = nil
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Errorf("agent exit: %v, want a non-zero exit", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent started over a corrupt CPU manager state")
	}
	out := a.out.String()[logStart:]
	t.Logf("agent output over a corrupt state:\n%s", tail(out, 3))
	for _, want := range []string{"cpu manager state " + state + " is corrupt", "delete " + state, "start nodeagent again"} {
		if !strings.Contains(out, want) {
			t.Errorf("agent output lacks %q:\n%s", want, out)
		}
	}
}
