//go:build integration

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// memAvailable is the host's MemAvailable in MiB.
func memAvailable(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb >> 10
		}
	}
	t.Fatal("no MemAvailable in /proc/meminfo")
	return 0
}

// Eviction on the real host: with a hard memory.available threshold set
// 800 MiB below what the host has now, a BestEffort pod holding 1.5 GiB
// is evicted (Failed, Evicted, a message naming memory) and its
// containers stopped, while a Guaranteed pod is not touched.
func TestEvictionUnderMemoryPressure(t *testing.T) {
	t.Parallel()
	// The margin is wide: tests beside this one (a control plane starting)
	// move the host's memory by hundreds of MiB.
	threshold := memAvailable(t) - 800
	if threshold < 200 {
		t.Fatalf("the host has too little memory available for this test (%d MiB)", threshold+800)
	}
	a := newAgent(t, "--eviction-hard", fmt.Sprintf("memory.available<%dMi", threshold),
		"--eviction-monitoring-period", "1s", "--eviction-pressure-transition-period", "5s")
	a.start()
	a.write("guaranteed.yaml", `apiVersion: v1
kind: Pod
metadata: {name: guaranteed}
spec:
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "`+sleepLoop+`"]
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: 100m, memory: 64Mi}
`)
	eventually(t, 60*time.Second, "guaranteed pod running", func() bool { return a.running("guaranteed", "main") != nil })
	a.write("hog.yaml", `apiVersion: v1
kind: Pod
metadata: {name: hog}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "dd if=/dev/zero bs=1500M count=1 | sleep 100000"]
`)
	eventually(t, 120*time.Second, "the hog evicted", func() bool {
		p := a.status("hog")
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted" &&
			strings.Contains(p.Status.Message, "The node was low on resource: memory")
	})
	eventually(t, 30*time.Second, "the hog's containers stopped", func() bool { return a.running("hog", "main") == nil })
	p := a.status("hog")
	if !a.hasEvent(p, "Evicted", "low on resource: memory") {
		t.Error("no Evicted event")
	}
	t.Logf("evicted: %s", p.Status.Message)
	g := a.status("guaranteed")
	if g.Status.Phase != v1.PodRunning || g.Status.ContainerStatuses[0].RestartCount != 0 || a.running("guaranteed", "main") == nil {
		t.Fatalf("the Guaranteed pod was touched: phase %s, restarts %d", g.Status.Phase, g.Status.ContainerStatuses[0].RestartCount)
	}
	// Evicted stays: the manifest is still there, the pod is not started
	// again.
	time.Sleep(3 * time.Second)
	if a.running("hog", "main") != nil {
		t.Fatal("the evicted pod was started again")
	}
}

// Local storage capacity isolation, with no node pressure: a pod filling
// an emptyDir past its sizeLimit, and one whose container writes past
// its ephemeral-storage limit into its writable layer, are evicted at
// once with the kubelet's reasons; a pod within its limits runs on.
func TestLocalStorageEviction(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "--eviction-monitoring-period", "1s")
	a.start()
	pod := func(name, size, ephemeral, write string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 30
  volumes: [{name: scratch, emptyDir: {sizeLimit: ` + size + `}}]
  containers:
  - name: main
    image: ` + busybox + `
    command: [sh, -c, "` + write + `; exec sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
    resources: {limits: {ephemeral-storage: ` + ephemeral + `}}
  - name: side
    image: ` + busybox + `
    command: [sleep, "3600"]
    resources: {limits: {ephemeral-storage: 100Mi}}
`
	}
	a.write("within.yaml", pod("within", "10Mi", "50Mi", "dd if=/dev/zero of=/scratch/f bs=1M count=2"))
	a.write("overflow.yaml", pod("overflow", "2Mi", "50Mi", "dd if=/dev/zero of=/scratch/f bs=1M count=4"))
	a.write("layer.yaml", pod("layer", "10Mi", "4Mi", "dd if=/dev/zero of=/big bs=1M count=8"))
	evicted := func(name, msg string) func() bool {
		return func() bool {
			p := a.status(name)
			return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted" && p.Status.Message == msg
		}
	}
	eventually(t, 60*time.Second, "the emptyDir overrun evicted", evicted("overflow", `Usage of EmptyDir volume "scratch" exceeds the limit "2Mi".`))
	eventually(t, 90*time.Second, "the writable layer overrun evicted", evicted("layer", `Container main exceeded its local ephemeral storage limit "4Mi".`))
	for _, name := range []string{"overflow", "layer"} {
		// Failed is published once the containers stopped, with their
		// terminated states, never while they run.
		if a.running(name, "main") != nil || a.running(name, "side") != nil {
			t.Errorf("%s shown Failed while its containers still run", name)
		}
		for _, cs := range a.status(name).Status.ContainerStatuses {
			if cs.State.Terminated == nil {
				t.Errorf("%s's container %s is %+v in the evicted status; want terminated", name, cs.Name, cs.State)
			}
		}
		if !a.hasEvent(a.status(name), "Evicted", "exceed") {
			t.Errorf("%s: no Evicted event", name)
		}
	}
	w := a.status("within")
	if w == nil || w.Status.Phase != v1.PodRunning || a.running("within", "main") == nil {
		t.Fatalf("the pod within its limits was touched: %+v", w)
	}
}
