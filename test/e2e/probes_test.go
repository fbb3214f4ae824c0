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

// podCondition is the status of one of p's conditions ("" when absent).
func podCondition(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// hasEvent reports whether p has an event of that reason whose message
// contains msg.
func (a *agent) hasEvent(p *v1.Pod, reason, msg string) bool {
	evs, _ := status.ReadEvents(filepath.Join(a.root, "status"), p)
	for _, e := range evs {
		if e.Reason == reason && strings.Contains(e.Message, msg) {
			return true
		}
	}
	return false
}

const sleepLoop = `trap 'exit 0' TERM; while true; do sleep 1; done`

// Probes on real containerd: a liveness probe that starts failing
// restarts the container (Unhealthy, then Killing); a readiness probe
// toggles Ready both ways; a startup probe holds a failing liveness probe
// back until it passes; httpGet against busybox httpd and tcpSocket.
func TestProbes(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	data := t.TempDir()
	a.write("probes.yaml", `apiVersion: v1
kind: Pod
metadata: {name: live}
spec:
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "touch /tmp/alive; sleep 3; rm /tmp/alive; `+sleepLoop+`"]
    livenessProbe: {exec: {command: ["test", "-f", "/tmp/alive"]}, periodSeconds: 1, failureThreshold: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: ready}
spec:
  volumes: [{name: data, hostPath: {path: `+data+`}}]
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "`+sleepLoop+`"]
    volumeMounts: [{name: data, mountPath: /data}]
    readinessProbe: {exec: {command: ["test", "-f", "/data/ready"]}, periodSeconds: 1, failureThreshold: 1}
    startupProbe: {exec: {command: ["test", "-f", "/data/started"]}, periodSeconds: 1, failureThreshold: 600}
    livenessProbe: {exec: {command: ["test", "-f", "/data/alive"]}, periodSeconds: 1, failureThreshold: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: httpd
    image: `+busybox+`
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe: {httpGet: {path: /healthz, port: http}, periodSeconds: 1}
    livenessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1, failureThreshold: 1}
`)
	// Liveness: ~3 s after the start the file goes, two failures later the
	// container is killed and restarted.
	eventually(t, 60*time.Second, "liveness failure restarts the container", func() bool {
		p := a.status("live")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1 &&
			a.hasEvent(p, "Unhealthy", "Liveness probe failed") && a.hasEvent(p, "Killing", "failed liveness probe, will be restarted")
	})
	if n := len(a.containers("live", "main")); n < 2 {
		t.Fatalf("%d instances of the liveness-failed container in the runtime, want a restart", n)
	}

	// Startup holds the failing liveness probe back: the container runs,
	// not started, not ready, not restarted.
	eventually(t, 60*time.Second, "ready pod running", func() bool {
		p := a.status("ready")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	for i := 0; i < 4; i++ { // four startup probe periods
		p := a.status("ready")
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 0 || cs.Started == nil || *cs.Started || cs.Ready {
			t.Fatalf("before its startup probe passed: restarts %d, started %v, ready %v", cs.RestartCount, *cs.Started, cs.Ready)
		}
		time.Sleep(time.Second)
	}
	touch := func(name string) {
		if err := os.WriteFile(filepath.Join(data, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch("alive")
	touch("started")
	eventually(t, 10*time.Second, "started once the startup probe passed", func() bool {
		p := a.status("ready")
		cs := p.Status.ContainerStatuses[0]
		return cs.Started != nil && *cs.Started && !cs.Ready && podCondition(p, v1.PodReady) == v1.ConditionFalse
	})
	// Readiness both ways (threshold 1, period 1 s): the flip is in the
	// status one period and a probe later; on this loaded 2-core box with
	// the whole suite beside it, within 10 s.
	touch("ready")
	t0 := time.Now()
	eventually(t, 10*time.Second, "Ready once the readiness probe passes", func() bool {
		p := a.status("ready")
		return p.Status.ContainerStatuses[0].Ready && podCondition(p, v1.PodReady) == v1.ConditionTrue &&
			podCondition(p, v1.ContainersReady) == v1.ConditionTrue
	})
	t.Logf("Ready %v after the readiness file appeared", time.Since(t0).Round(10*time.Millisecond))
	os.Remove(filepath.Join(data, "ready"))
	t0 = time.Now()
	eventually(t, 10*time.Second, "not Ready once the readiness probe fails", func() bool {
		p := a.status("ready")
		return !p.Status.ContainerStatuses[0].Ready && podCondition(p, v1.PodReady) == v1.ConditionFalse
	})
	t.Logf("not Ready %v after the readiness file went", time.Since(t0).Round(10*time.Millisecond))
	if p := a.status("ready"); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatal("a readiness failure restarted the container")
	}
	// Liveness runs now that startup passed.
	os.Remove(filepath.Join(data, "alive"))
	eventually(t, 30*time.Second, "liveness failure after startup restarts", func() bool {
		p := a.status("ready")
		return p.Status.ContainerStatuses[0].RestartCount >= 1
	})

	eventually(t, 30*time.Second, "httpGet readiness against busybox httpd", func() bool {
		p := a.status("web")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready &&
			podCondition(p, v1.PodReady) == v1.ConditionTrue
	})
	if p := a.status("web"); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("the tcpSocket liveness probe restarted a healthy httpd: %d", p.Status.ContainerStatuses[0].RestartCount)
	}
}

// Sidecars: an init container with restartPolicy Always keeps running
// beside the app, is stopped after it on removal; a Never pod with a
// sidecar completes Succeeded and its sidecar is stopped.
func TestSidecars(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	data := t.TempDir()
	a.write("side.yaml", `apiVersion: v1
kind: Pod
metadata: {name: side}
spec:
  terminationGracePeriodSeconds: 10
  volumes: [{name: data, hostPath: {path: `+data+`}}]
  initContainers:
  - name: logship
    image: `+busybox+`
    restartPolicy: Always
    command: ["sh", "-c", "trap 'echo sidecar >> /data/order; exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts: [{name: data, mountPath: /data}]
    startupProbe: {exec: {command: ["true"]}, periodSeconds: 1}
  - name: setup
    image: `+busybox+`
    command: ["sh", "-c", "echo setup > /data/setup"]
    volumeMounts: [{name: data, mountPath: /data}]
  containers:
  - name: app
    image: `+busybox+`
    command: ["sh", "-c", "trap 'echo app >> /data/order; exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts: [{name: data, mountPath: /data}]
`)
	eventually(t, 60*time.Second, "sidecar and app running, pod Ready", func() bool {
		p := a.status("side")
		return p != nil && p.Status.Phase == v1.PodRunning && podCondition(p, v1.PodReady) == v1.ConditionTrue &&
			len(p.Status.InitContainerStatuses) == 2 && p.Status.InitContainerStatuses[0].State.Running != nil &&
			p.Status.InitContainerStatuses[1].State.Terminated != nil && a.running("side", "app") != nil
	})
	if _, err := os.Stat(filepath.Join(data, "setup")); err != nil {
		t.Fatal("the init container after the sidecar did not run")
	}
	a.remove("side.yaml")
	eventually(t, 60*time.Second, "pod gone", func() bool { return len(a.sandboxes("side")) == 0 })
	b, _ := os.ReadFile(filepath.Join(data, "order"))
	if got := strings.Fields(string(b)); len(got) != 2 || got[0] != "app" || got[1] != "sidecar" {
		t.Fatalf("stop order %q, want the app first, then the sidecar", got)
	}

	a.write("job.yaml", `apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  initContainers:
  - name: helper
    image: `+busybox+`
    restartPolicy: Always
    command: ["sh", "-c", "`+sleepLoop+`"]
  containers:
  - name: work
    image: `+busybox+`
    command: ["sh", "-c", "sleep 2; echo done"]
`)
	eventually(t, 60*time.Second, "Never pod with a sidecar Succeeded, its sidecar stopped", func() bool {
		p := a.status("job")
		return p != nil && p.Status.Phase == v1.PodSucceeded && len(p.Status.InitContainerStatuses) == 1 &&
			p.Status.InitContainerStatuses[0].State.Terminated != nil && a.running("job", "helper") == nil
	})
}
