//go:build integration

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/status"
)

// Lifecycle hooks on real containerd: postStart runs inside the container
// right after it starts; preStop runs before the stop, inside the grace
// period; a failing postStart kills the container (restarted per policy)
// with a FailedPostStartHook event carrying the hook's output.
func TestLifecycleHooks(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	data := t.TempDir()
	a.write("hooks.yaml", `apiVersion: v1
kind: Pod
metadata: {name: hooks}
spec:
  terminationGracePeriodSeconds: 10
  volumes: [{name: data, hostPath: {path: `+data+`}}]
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts: [{name: data, mountPath: /data}]
    lifecycle:
      postStart: {exec: {command: ["sh", "-c", "echo started > /data/poststart"]}}
      preStop: {exec: {command: ["sh", "-c", "echo stopping > /data/prestop"]}}
`)
	eventually(t, 60*time.Second, "postStart wrote its file", func() bool {
		b, err := os.ReadFile(filepath.Join(data, "poststart"))
		return err == nil && strings.TrimSpace(string(b)) == "started"
	})
	if _, err := os.Stat(filepath.Join(data, "prestop")); err == nil {
		t.Fatal("preStop ran before any stop")
	}
	a.remove("hooks.yaml")
	eventually(t, 30*time.Second, "pod gone", func() bool { return len(a.sandboxes("hooks")) == 0 })
	if b, err := os.ReadFile(filepath.Join(data, "prestop")); err != nil || strings.TrimSpace(string(b)) != "stopping" {
		t.Fatalf("preStop did not run before the stop: %q %v", b, err)
	}

	a.write("badhook.yaml", `apiVersion: v1
kind: Pod
metadata: {name: badhook}
spec:
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    lifecycle:
      postStart: {exec: {command: ["sh", "-c", "echo no database; exit 3"]}}
`)
	eventually(t, 60*time.Second, "FailedPostStartHook event with the hook's output, and a restart", func() bool {
		p := a.status("badhook")
		if p == nil {
			return false
		}
		evs, _ := status.ReadEvents(filepath.Join(a.root, "status"), p)
		failed := false
		for _, e := range evs {
			failed = failed || (e.Reason == "FailedPostStartHook" && strings.Contains(e.Message, "no database"))
		}
		return failed && len(a.containers("badhook", "main")) >= 2 && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].RestartCount >= 1 && p.Status.Phase != v1.PodSucceeded
	})
}
