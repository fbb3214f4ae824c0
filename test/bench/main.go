// Command bench measures nodeagent against its floor — the same CRI calls
// made directly — on the rig's containerd, and prints medians and ratios.
// Run it through `make bench` (which brings the rig up).
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/status"
)

var (
	binary     = flag.String("nodeagent", "bin/nodeagent", "nodeagent binary")
	runs       = flag.Int("runs", 7, "repetitions of the one-pod measurement")
	bulkRuns   = flag.Int("bulk-runs", 5, "repetitions of the 30-pod measurements")
	idle       = flag.Duration("idle", 60*time.Second, "steady-state window")
	only       = flag.String("only", "", "comma-separated subset: single,bulk,idle,pleg,manifests,api,probes,cpu,server")
	serverRuns = flag.Int("server-runs", 20, "repetitions of each kubectl logs/exec measurement")

	conn     *cri.Conn
	endpoint string
	image    string
	pause    string
	work     string
)

func main() {
	flag.Parse()
	endpoint = os.Getenv("NODEAGENT_CONTAINERD_ADDRESS")
	image = os.Getenv("NODEAGENT_BUSYBOX_IMAGE")
	if endpoint == "" || image == "" {
		fail("NODEAGENT_CONTAINERD_ADDRESS / NODEAGENT_BUSYBOX_IMAGE not set: run through `make bench`")
	}
	var err error
	if conn, err = cri.Dial(endpoint); err != nil {
		fail(err.Error())
	}
	if work, err = os.MkdirTemp("", "nodeagent-bench"); err != nil {
		fail(err.Error())
	}
	defer os.RemoveAll(work)
	ctx := context.Background()
	// Pull-free: the image is present before anything is timed.
	if _, err := conn.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		fail("pull " + image + ": " + err.Error())
	}
	want := func(s string) bool { return *only == "" || strings.Contains(*only, s) }
	fmt.Printf("nodeagent bench — containerd at %s, image %s\n\n", endpoint, image)
	if want("single") {
		single(ctx)
	}
	if want("bulk") {
		bulk(ctx)
	}
	if want("idle") {
		steady(ctx)
	}
	if want("pleg") {
		plegLatency(ctx, true)
		plegLatency(ctx, false)
	}
	if want("manifests") {
		manifestBurst(1000)
	}
	if want("api") {
		apiPath(ctx)
	}
	if want("probes") {
		probeCost(ctx)
	}
	if want("cpu") {
		pinnedStart(ctx)
	}
	if want("server") {
		nodeServerPath(ctx)
	}
}

// manifestBurst moves n manifest files into the directory at once and
// reports the agent's CPU until every one is accounted for: n valid pods
// whose nodeSelector matches no node (refused at admission, so the
// runtime does no work and what is measured is reading, decoding,
// validation, the source merge, admission and status publication), then n
// broken files (each listed as a problem), then two re-list periods with
// the broken files in place (nothing changed: no parse, no log).
func manifestBurst(n int) {
	a := startAgent("benchmanifests", "--file-check-frequency", "5s")
	defer a.stop()
	stage := filepath.Join(a.dir, "stage")
	os.MkdirAll(stage, 0o755)
	mdir := filepath.Join(a.dir, "manifests")
	sdir := filepath.Join(a.dir, "root", "status")
	burst := func(kind string, body func(i int) string, done func() bool) {
		for i := 0; i < n; i++ {
			os.WriteFile(filepath.Join(stage, fmt.Sprintf("%s%04d.yaml", kind, i)), []byte(body(i)), 0o644)
		}
		c0, _ := procStat(a.cmd.Process.Pid)
		start := time.Now()
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("%s%04d.yaml", kind, i)
			os.Rename(filepath.Join(stage, name), filepath.Join(mdir, name))
		}
		for !done() {
			if time.Since(start) > 2*time.Minute {
				fail(kind + " manifests: not all accounted for after 2 minutes")
			}
			time.Sleep(50 * time.Millisecond)
		}
		took := time.Since(start)
		c1, rss := procStat(a.cmd.Process.Pid)
		fmt.Printf("%d %s manifest files moved in at once: all handled in %v, agent CPU %.2f s, RSS %.1f MiB\n",
			n, kind, took.Round(time.Millisecond), (c1 - c0).Seconds(), float64(rss)/1024)
	}
	burst("valid", func(i int) string {
		return strings.Replace(manifest(fmt.Sprintf("m%04d", i)), "spec:\n", "spec:\n  nodeSelector: {bench: nowhere}\n", 1)
	}, func() bool {
		entries, _ := os.ReadDir(sdir)
		return len(entries) >= n // one status file per refused pod (plus _sources.json)
	})
	burst("broken", func(i int) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: b%04d}\nspec:\n  containers: [{name: Bad_%d, image: x}]\n", i, i)
	}, func() bool {
		probs, _ := status.ReadSourceProblems(sdir)
		return len(probs["file"]) >= n
	})
	info0, _ := os.Stat(a.log)
	c0, _ := procStat(a.cmd.Process.Pid)
	time.Sleep(11 * time.Second) // two re-lists of the directory
	c1, _ := procStat(a.cmd.Process.Pid)
	info1, _ := os.Stat(a.log)
	fmt.Printf("%d valid + %d broken files, 2 re-lists without change: agent CPU %.2f s, %d bytes of log\n\n",
		n, n, (c1 - c0).Seconds(), info1.Size()-info0.Size())
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "bench:", msg)
	os.Exit(1)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func row(what string, agent, floor []time.Duration) {
	a, f := median(agent), median(floor)
	fmt.Printf("  %-44s nodeagent %9s   floor %9s   ratio %.2f×\n", what, a.Round(time.Millisecond), f.Round(time.Millisecond), float64(a)/float64(f))
}

// ---- the agent ----

type agentProc struct {
	cmd       *exec.Cmd
	dir, node string
	log       string
}

func startAgent(node string, extra ...string) *agentProc {
	a := &agentProc{dir: filepath.Join(work, node), node: node}
	for _, d := range []string{"manifests", "root", "logs"} {
		os.MkdirAll(filepath.Join(a.dir, d), 0o755)
	}
	a.log = filepath.Join(a.dir, "agent.log")
	out, _ := os.Create(a.log)
	args := append([]string{
		"--manifest-dir", filepath.Join(a.dir, "manifests"),
		"--container-runtime-endpoint", endpoint,
		"--root-dir", filepath.Join(a.dir, "root"),
		"--pod-logs-dir", filepath.Join(a.dir, "logs"),
		"--hostname-override", node,
		"--cni-conf-dir", os.Getenv("NODEAGENT_CNI_CONF_DIR"),
		"--cni-bin-dir", os.Getenv("NODEAGENT_CNI_BIN_DIR"),
		"--healthz-port", "0",
		"--cgroup-root", benchCgroupRoot(node), // its own kubepods, removed at stop
	}, extra...)
	a.cmd = exec.Command(*binary, args...)
	a.cmd.Stdout, a.cmd.Stderr = out, out
	if err := a.cmd.Start(); err != nil {
		fail(err.Error())
	}
	time.Sleep(500 * time.Millisecond) // let it connect and read the empty directory
	return a
}

func (a *agentProc) stop() {
	if a.cmd.ProcessState != nil {
		return // stopped already
	}
	a.cmd.Process.Signal(os.Interrupt)
	a.cmd.Wait()
	removeCgroups(benchCgroupRoot(a.node))
}

func manifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]
`, name, image)
}

// manifest2 is a pod of two containers (an app and a sidecar-like
// second process), the steady-state shape.
func manifest2(name string) string {
	return manifest(name) + fmt.Sprintf(`  - name: second
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]
`, image)
}

func (a *agentProc) write(name string) { a.writeBody(name, manifest(name)) }

func (a *agentProc) writeBody(name, body string) {
	tmp := filepath.Join(a.dir, "manifests", "."+name)
	os.WriteFile(tmp, []byte(body), 0o644)
	os.Rename(tmp, filepath.Join(a.dir, "manifests", name+".yaml"))
}

func (a *agentProc) remove(name string) { os.Remove(filepath.Join(a.dir, "manifests", name+".yaml")) }

// startedAt waits until the pod's container runs and returns when it
// started, by the runtime's clock.
func startedAt(ctx context.Context, podName string, timeout time.Duration) time.Time {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		r, err := conn.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.name": podName}}})
		if err == nil && len(r.Containers) > 0 {
			st, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: r.Containers[0].Id})
			if err == nil {
				return time.Unix(0, st.Status.StartedAt)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	fail("pod " + podName + " not running in time")
	return time.Time{}
}

// gone waits until no sandbox of the named pods is left.
func gone(ctx context.Context, names map[string]bool, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		r, err := conn.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err == nil {
			left := 0
			for _, sb := range r.Items {
				if names[sb.Metadata.Name] {
					left++
				}
			}
			if left == 0 {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	fail("pods not gone in time")
}

// ---- the floor ----

type floorPod struct{ sandbox, container string }

func floorRun(ctx context.Context, name string) (floorPod, time.Time) {
	uid := fmt.Sprintf("floor-%s-%d", name, time.Now().UnixNano())
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		Hostname:     name,
		LogDirectory: filepath.Join(work, "floorlogs", uid),
		// io.nodeagent.managed set, but not "true": not a kubelet's pod
		// that a running nodeagent would adopt (and kill as an orphan).
		Labels: map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.uid": uid, "io.nodeagent.managed": "floor"},
		Linux:  &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{}}},
	}
	os.MkdirAll(sbCfg.LogDirectory, 0o755)
	// As nodeagent (and the kubelet): a termination-message file is bind
	// mounted into the container.
	termFile := filepath.Join(sbCfg.LogDirectory, "termination-log")
	os.WriteFile(termFile, nil, 0o666)
	sb, err := conn.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		fail("floor RunPodSandbox: " + err.Error())
	}
	c, err := conn.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbCfg, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  []string{"sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"},
		Labels:   map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.container.name": "main", "io.nodeagent.managed": "floor"},
		LogPath:  "main/0.log",
		Mounts:   []*runtimeapi.Mount{{ContainerPath: "/dev/termination-log", HostPath: termFile}},
	}})
	if err != nil {
		fail("floor CreateContainer: " + err.Error())
	}
	if _, err := conn.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		fail("floor StartContainer: " + err.Error())
	}
	st, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
	if err != nil {
		fail(err.Error())
	}
	return floorPod{sb.PodSandboxId, c.ContainerId}, time.Unix(0, st.Status.StartedAt)
}

func floorRemove(ctx context.Context, p floorPod) {
	conn.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: p.container, Timeout: 5})
	conn.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.sandbox})
	conn.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.sandbox})
}

// ---- measurements ----

func single(ctx context.Context) {
	fmt.Println("one pod: manifest written → container running (runtime's StartedAt)")
	a := startAgent("bench1")
	defer a.stop()
	var agent, floor []time.Duration
	for i := 0; i < *runs; i++ {
		name := fmt.Sprintf("one%d", i)
		t0 := time.Now()
		a.write(name)
		agent = append(agent, startedAt(ctx, name+"-bench1", 60*time.Second).Sub(t0))
		a.remove(name)
		gone(ctx, map[string]bool{name + "-bench1": true}, 60*time.Second)

		t0 = time.Now()
		p, started := floorRun(ctx, fmt.Sprintf("floor%d", i))
		floor = append(floor, started.Sub(t0))
		floorRemove(ctx, p)
	}
	row("1 pod up (median of "+strconv.Itoa(*runs)+")", agent, floor)
	fmt.Println()
}

func bulk(ctx context.Context) {
	const n = 30
	fmt.Printf("%d pods at once (floor: the same CRI calls, %d in parallel)\n", n, n)
	a := startAgent("bench30")
	defer a.stop()
	var upA, upF, downA, downF, cpuUp []time.Duration
	for r := 0; r < *bulkRuns; r++ {
		up, cpu, down := a.staticRound(ctx, n)
		upA, cpuUp, downA = append(upA, up), append(cpuUp, cpu), append(downA, down)

		var mu sync.Mutex
		var wg sync.WaitGroup
		pods := make([]floorPod, n)
		var last time.Time
		t0 := time.Now()
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				p, s := floorRun(ctx, fmt.Sprintf("fb%d-%d", r, i))
				mu.Lock()
				pods[i] = p
				if s.After(last) {
					last = s
				}
				mu.Unlock()
			}(i)
		}
		wg.Wait()
		upF = append(upF, last.Sub(t0))
		t0 = time.Now()
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(p floorPod) { defer wg.Done(); floorRemove(ctx, p) }(pods[i])
		}
		wg.Wait()
		downF = append(downF, time.Since(t0))
	}
	row(fmt.Sprintf("%d pods up (median of %d)", n, *bulkRuns), upA, upF)
	row(fmt.Sprintf("%d pods removed, all gone (median of %d)", n, *bulkRuns), downA, downF)
	fmt.Printf("  nodeagent CPU while %d pods start: %v (median)\n", n, median(cpuUp))
	fmt.Println()
}

// staticRound writes n pods' manifests at once for a, waits until all
// their containers run, then removes them and waits until they are gone:
// the time to all running, the agent's CPU meanwhile, the time to gone.
func (a *agentProc) staticRound(ctx context.Context, n int) (up, cpu, down time.Duration) {
	names := map[string]bool{}
	cpu0, _ := procStat(a.cmd.Process.Pid)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		a.write(fmt.Sprintf("b%d", i))
		names[fmt.Sprintf("b%d-%s", i, a.node)] = true
	}
	var last time.Time
	for name := range names {
		if s := startedAt(ctx, name, 120*time.Second); s.After(last) {
			last = s
		}
	}
	cpu1, _ := procStat(a.cmd.Process.Pid)
	t1 := time.Now()
	for i := 0; i < n; i++ {
		a.remove(fmt.Sprintf("b%d", i))
	}
	gone(ctx, names, 120*time.Second)
	return last.Sub(t0), cpu1 - cpu0, time.Since(t1)
}

func procStat(pid int) (cpu time.Duration, rssKiB int) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	cpu = time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
	s, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	sc := bufio.NewScanner(strings.NewReader(string(s)))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VmRSS:") {
			rssKiB, _ = strconv.Atoi(strings.Fields(sc.Text())[1])
		}
	}
	return cpu, rssKiB
}

// rssParts is the process's RSS by kind (RssAnon, RssFile: pages of the
// binary and files it maps), for the reports.
func rssParts(pid int) string {
	s, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	kib := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(s)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && (f[0] == "RssAnon:" || f[0] == "RssFile:") {
			kib[f[0]], _ = strconv.Atoi(f[1])
		}
	}
	return fmt.Sprintf("anonymous %.1f MiB, file-backed %.1f MiB", float64(kib["RssAnon:"])/1024, float64(kib["RssFile:"])/1024)
}

func steady(ctx context.Context) {
	const n = 30
	for _, evented := range []bool{true, false} {
		mode := "evented PLEG"
		if !evented {
			mode = "relist PLEG (1s)"
		}
		a := startAgent("benchidle", fmt.Sprintf("--evented-pleg=%v", evented))
		names := map[string]bool{}
		for i := 0; i < n; i++ {
			a.writeBody(fmt.Sprintf("s%d", i), manifest2(fmt.Sprintf("s%d", i)))
			names[fmt.Sprintf("s%d-benchidle", i)] = true
		}
		for name := range names {
			startedAt(ctx, name, 120*time.Second)
		}
		time.Sleep(3 * time.Second) // let the start-up work settle
		c0, _ := procStat(a.cmd.Process.Pid)
		time.Sleep(*idle)
		c1, rss := procStat(a.cmd.Process.Pid)
		fmt.Printf("steady state, %d pods × 2 containers, %v, %s: CPU %.2f s (%.2f%% of a core), RSS %.1f MiB\n",
			n, *idle, mode, (c1 - c0).Seconds(), 100*(c1-c0).Seconds()/idle.Seconds(), float64(rss)/1024)
		for i := 0; i < n; i++ {
			a.remove(fmt.Sprintf("s%d", i))
		}
		gone(ctx, names, 120*time.Second)
		a.stop()
	}
	fmt.Println()
}

var eventLine = regexp.MustCompile(`^(\S+)\s.*pleg event.*"uid": "([0-9a-f]+)", "event": "ContainerDied", "containerID": "([0-9a-f]+)"`)

func plegLatency(ctx context.Context, evented bool) {
	const n = 10
	mode := "evented"
	if !evented {
		mode = "relist"
	}
	node := "benchpleg" + mode
	a := startAgent(node, "--v", "4", fmt.Sprintf("--evented-pleg=%v", evented))
	defer a.stop()
	// Crash once each, staggered: the first restart of each is immediate.
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("x%d", i)
		body := strings.Replace(manifest(name), `["sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"]`,
			fmt.Sprintf(`["sh", "-c", "sleep %d.%d; exit 1"]`, 1+i/5, (i%5)*2), 1)
		body = strings.Replace(body, "spec:\n", "spec:\n  restartPolicy: OnFailure\n", 1)
		os.WriteFile(filepath.Join(a.dir, "manifests", name+".yaml"), []byte(body), 0o644)
	}
	var died, restart []time.Duration
	deadline := time.Now().Add(60 * time.Second)
	done := map[string]bool{}
	for len(done) < n && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		logb, _ := os.ReadFile(a.log)
		for _, line := range strings.Split(string(logb), "\n") {
			m := eventLine.FindStringSubmatch(line)
			if m == nil || done[m[3]] {
				continue
			}
			st, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: m[3]})
			if err != nil || st.Status.Metadata.Attempt != 0 {
				continue
			}
			at, err := time.Parse("2006-01-02T15:04:05.000Z0700", m[1])
			if err != nil {
				continue
			}
			finished := time.Unix(0, st.Status.FinishedAt)
			// The replacement: attempt 1 of the same pod.
			r, _ := conn.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
				LabelSelector: map[string]string{"io.kubernetes.pod.uid": m[2]}}})
			var next time.Time
			for _, c := range r.Containers {
				if c.Metadata.Attempt == 1 {
					next = time.Unix(0, c.CreatedAt)
				}
			}
			if next.IsZero() {
				continue
			}
			done[m[3]] = true
			died = append(died, at.Sub(finished))
			restart = append(restart, next.Sub(finished))
		}
	}
	if len(died) == 0 {
		fmt.Printf("PLEG latency (%s): no sample\n", mode)
		return
	}
	fmt.Printf("PLEG latency, %s (median of %d): exit → ContainerDied event %v (log has ms resolution), exit → replacement created %v\n",
		mode, len(died), median(died).Round(time.Millisecond), median(restart).Round(time.Millisecond))
	names := map[string]bool{}
	for i := 0; i < n; i++ {
		os.Remove(filepath.Join(a.dir, "manifests", fmt.Sprintf("x%d.yaml", i)))
		names[fmt.Sprintf("x%d-%s", i, node)] = true
	}
	gone(ctx, names, 60*time.Second)
}
