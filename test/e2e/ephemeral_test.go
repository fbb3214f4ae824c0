//go:build integration

package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestAPIEphemeralContainer: kubectl debug --target on a running API
// pod. The ephemeral container starts once, in the target's process
// namespace (its ps sees the target's sleep loop as PID 1), runs to its
// end and is reported terminated in ephemeralContainerStatuses; kubectl
// logs -c reaches it through the node server; it is not started again;
// and the pod's own container never restarts.
func TestAPIEphemeralContainer(t *testing.T) {
	c := apiCluster(t)
	port := freePort(t)
	a := joined(t, c, "--port", strconv.Itoa(port), "--client-ca-file", c.CAFile)
	p := createRunning(t, c, apiSleeper(a, "debugme"))
	before := apiPod(c, t, p.Namespace, p.Name)
	if before == nil || len(before.Status.ContainerStatuses) != 1 || before.Status.ContainerStatuses[0].ContainerID == "" {
		t.Fatalf("pod before kubectl debug: %+v", before)
	}
	mainID := before.Status.ContainerStatuses[0].ContainerID

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := c.Kubectl(ctx, "debug", p.Name, "--image="+busybox, "--target=main", "-c", "dbg", "--", "sh", "-c", "ps"); err != nil {
		t.Fatalf("kubectl debug: %v: %s", err, out)
	}

	var dbg v1.ContainerStatus
	eventually(t, 60*time.Second, "ephemeral container dbg terminated in the API", func() bool {
		got := apiPod(c, t, p.Namespace, p.Name)
		if got == nil {
			return false
		}
		for _, cs := range got.Status.EphemeralContainerStatuses {
			if cs.Name == "dbg" && cs.State.Terminated != nil {
				dbg = cs
				return true
			}
		}
		return false
	})
	if term := dbg.State.Terminated; term.ExitCode != 0 || dbg.ContainerID == "" || dbg.ImageID == "" || dbg.RestartCount != 0 || dbg.Ready {
		t.Errorf("ephemeral container status = %+v, want terminated with exit 0, its IDs, no restart, not ready", dbg)
	}

	out, err := c.Kubectl(ctx, "logs", p.Name, "-c", "dbg")
	if err != nil {
		t.Fatalf("kubectl logs -c dbg: %v: %q", err, out)
	}
	// In the target's PID namespace its sleep loop is PID 1 (in a
	// namespace of its own, PID 1 would be the debugger's ps).
	sawTarget := false
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "1" && strings.Contains(line, "while true; do sleep 1; done") {
			sawTarget = true
		}
	}
	if !sawTarget {
		t.Errorf("kubectl logs -c dbg = %q, want the target's sleep loop as PID 1", out)
	}

	// Never started again: one instance, marked ephemeral, through more
	// than a sync period (--sync-frequency 10s).
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if n := len(a.containers("debugme", "dbg")); n != 1 {
			t.Fatalf("%d runtime instances of dbg, want the one", n)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if ann := a.containers("debugme", "dbg")[0].Annotations["io.nodeagent.container.ephemeral"]; ann != "true" {
		t.Errorf("dbg's ephemeral annotation = %q, want true", ann)
	}

	after := apiPod(c, t, p.Namespace, p.Name)
	if after == nil || len(after.Status.ContainerStatuses) != 1 {
		t.Fatalf("pod after kubectl debug: %+v", after)
	}
	if cs := after.Status.ContainerStatuses[0]; cs.ContainerID != mainID || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("main after kubectl debug = %+v, want %s still running, never restarted", cs, mainID)
	}
	if after.Status.Phase != v1.PodRunning {
		t.Errorf("phase after kubectl debug = %s, want Running", after.Status.Phase)
	}
	for _, cond := range after.Status.Conditions {
		if cond.Type == v1.PodReady && cond.Status != v1.ConditionTrue {
			t.Errorf("Ready after kubectl debug = %+v, want True (ephemeral containers count for nothing)", cond)
		}
	}
}
