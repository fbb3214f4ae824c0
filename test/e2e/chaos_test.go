//go:build integration

package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/internal/volume"
	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

// The chaos suite: one API-mode agent with static and API pods (some
// with probes, a ConfigMap volume, every API pod with its projected
// token, one pinned by the static CPU manager) goes through faults one
// after the other, and after each the suite measures what a user would
// see. Not parallel: it restarts the shared containerd and control
// plane. `make test` runs the short scale, `make chaos` the full one
// (NODEAGENT_CHAOS=full); both print the figures as a table.
type chaosScale struct {
	name                                         string
	pods, kills, containerdRestarts, apiRestarts int
	hang, logsFull, flood                        time.Duration
	floodConns, slowConns                        int
}

var chaosScales = map[string]chaosScale{
	"short": {name: "short", pods: 10, kills: 3, containerdRestarts: 1, apiRestarts: 1,
		hang: 15 * time.Second, logsFull: 10 * time.Second, flood: 15 * time.Second, floodConns: 200, slowConns: 50},
	"full": {name: "full", pods: 50, kills: 20, containerdRestarts: 5, apiRestarts: 5,
		hang: 60 * time.Second, logsFull: 30 * time.Second, flood: 60 * time.Second, floodConns: 1000, slowConns: 200},
}

// chaosRow is one fault's figures.
type chaosRow struct {
	fault       string
	restarts    int           // containers restarted (none died)
	duplicates  int           // pods with more than one ready sandbox
	recovery    time.Duration // fault over → every pod Running and Ready in the API
	leaseMissed int           // renewals missed while the fault lasted
	rssPeakMiB  int64         // the agent's peak RSS so far
	notes       string
}

func TestChaos(t *testing.T) {
	scale := chaosScales[envOr("NODEAGENT_CHAOS", "short")]
	if scale.name == "" {
		t.Fatalf("NODEAGENT_CHAOS=%q: want short or full", os.Getenv("NODEAGENT_CHAOS"))
	}
	c := apiCluster(t)
	ch := newChaos(t, c, scale)
	ch.startPods()
	ch.baseline()

	ch.fault("agent SIGKILLed ×"+strconv.Itoa(scale.kills), func() {
		for i := 0; i < scale.kills; i++ {
			time.Sleep(time.Duration(rand.IntN(3000)+200) * time.Millisecond)
			ch.sampleRSS()
			ch.a.kill9()
			ch.a.start()
		}
	})
	ch.fault("containerd restarted ×"+strconv.Itoa(scale.containerdRestarts), func() {
		for i := 0; i < scale.containerdRestarts; i++ {
			rigCmd(t, "kill-containerd")
			time.Sleep(time.Duration(rand.IntN(2000)+500) * time.Millisecond)
			rigCmd(t, "start-containerd")
			time.Sleep(3 * time.Second)
		}
	})
	ch.fault("API server restarted ×"+strconv.Itoa(scale.apiRestarts)+", etcd once", func() {
		ctx := context.Background()
		for i := 0; i < scale.apiRestarts; i++ {
			if err := c.StopAPIServer(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rand.IntN(3000)+1000) * time.Millisecond)
			if err := c.StartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.RestartEtcd(ctx); err != nil {
			t.Fatal(err)
		}
	})
	ch.fault(fmt.Sprintf("CRI socket accepting, never answering, %v", scale.hang), func() {
		ch.proxy.freeze()
		time.Sleep(scale.hang)
		ch.proxy.thaw()
	})
	ch.fault(fmt.Sprintf("pod log file system full, %v", scale.logsFull), func() {
		filler := filepath.Join(ch.logs, "filler")
		f, err := os.Create(filler)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<20)
		for {
			if _, err := f.Write(buf); err != nil {
				break // ENOSPC: full
			}
		}
		f.Close()
		time.Sleep(scale.logsFull)
		os.Remove(filler)
	})
	ch.fault(fmt.Sprintf("node server flooded (%d bad-token and %d slow connections), %v", scale.floodConns, scale.slowConns, scale.flood), func() {
		ch.flood(scale)
	})
	ch.report()
	ch.teardownAndCheckLeaks()
	for _, r := range ch.rows {
		if r.restarts != 0 || r.duplicates != 0 {
			t.Errorf("%s: %d containers restarted, %d duplicate sandboxes; want none", r.fault, r.restarts, r.duplicates)
		}
	}
	if last := ch.rows[len(ch.rows)-1]; last.leaseMissed != 0 {
		t.Errorf("%s: %d Lease renewals missed; want none", last.fault, last.leaseMissed)
	}
}

// chaos is the suite's state.
type chaos struct {
	t       *testing.T
	c       *cluster.Cluster
	a       *agent
	scale   chaosScale
	proxy   *criProxy
	logs    string // the pod log dir: a small tmpfs
	port    int    // the node server's
	names   []string
	static  map[string]bool
	before  map[string]string // pod → its running container's ID
	seenSBs map[string]bool   // every sandbox ID of this agent seen
	rows    []chaosRow
	rssPeak int64
	lease   *leaseWatch
	// notReady says what allReady last found missing.
	notReady string
}

func newChaos(t *testing.T, c *cluster.Cluster, scale chaosScale) *chaos {
	ch := &chaos{t: t, c: c, scale: scale, static: map[string]bool{}, seenSBs: map[string]bool{}}
	// The pod log dir is a 64 MiB tmpfs, to be filled; unmounted after
	// the agent's cleanup (cleanups run last-registered first).
	ch.logs = filepath.Join(t.TempDir(), "logs")
	if err := os.MkdirAll(ch.logs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", ch.logs, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(ch.logs, syscall.MNT_DETACH) })
	ch.proxy = startCRIProxy(t, strings.TrimPrefix(endpoint, "unix://"))
	ch.port = freePort(t)
	ch.a = newAPIAgent(t, c, "--container-runtime-endpoint", "unix://"+ch.proxy.path, "--pod-logs-dir", ch.logs,
		"--runtime-request-timeout", "10s",
		"--port", strconv.Itoa(ch.port), "--client-ca-file", c.CAFile,
		"--cpu-manager-policy", "static", "--reserved-cpus", "0")
	ch.a.logs = ch.logs
	ch.a.start()
	approveUntilIssued(t, c, ch.a)
	eventually(t, 60*time.Second, "Node Ready", func() bool { return nodeReady(c, ch.a.node) })
	ch.lease = watchLease(t, c, ch.a.node)
	return ch
}

// startPods starts half the pods from manifests, half through the API:
// every third with exec and HTTP probes, every fourth logging each
// second, the API pods' first with a ConfigMap volume, and one
// Guaranteed pod with a whole CPU (pinned by the static policy).
func (ch *chaos) startPods() {
	t, a := ch.t, ch.a
	ctx := context.Background()
	cm := "chaos-" + a.node
	if _, err := ch.c.Admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ch.c.Admin.CoreV1().ConfigMaps("default").Delete(context.Background(), cm, metav1.DeleteOptions{})
	})
	for i := 0; i < ch.scale.pods; i++ {
		name := fmt.Sprintf("chaos%02d", i)
		ch.names = append(ch.names, name)
		p := apiSleeper(a, name)
		ctr := &p.Spec.Containers[0]
		say := ""
		if i%4 == 1 {
			say = "echo tick $(date); "
		}
		ctr.Command = []string{"sh", "-c", "trap 'exit 0' TERM; mkdir -p /www; echo ok > /www/index.html; httpd -p 8080 -h /www; while true; do " + say + "sleep 1; done"}
		if i%3 == 0 {
			ctr.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 2}
			ctr.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 3, FailureThreshold: 3}
		}
		if i == 0 {
			q := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("32Mi")}
			ctr.Resources = v1.ResourceRequirements{Requests: q, Limits: q}
		}
		if i%2 == 0 {
			ch.static[name] = true
			p.Name, p.Namespace, p.Spec.NodeName = name, "", ""
			p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			a.write(name+".yaml", toYAML(t, p))
			continue
		}
		if i == 1 {
			p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: cm}}}}}
			ctr.VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}}
		}
		createPod(t, ch.c, p)
	}
	start := time.Now()
	if !waitFor(time.Duration(ch.scale.pods)*6*time.Second+60*time.Second, ch.allReady) {
		t.Fatalf("not every pod Running and Ready in the API: %s", ch.notReady)
	}
	t.Logf("chaos: %d pods Running and Ready in %v", ch.scale.pods, time.Since(start).Round(time.Millisecond))
}

// toYAML is p as a manifest.
func toYAML(t *testing.T, p *v1.Pod) string {
	b, err := yaml.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// allReady: every pod (mirror pods for the static ones) Running and Ready
// in the API, each with one running container.
func (ch *chaos) allReady() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := ch.c.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + ch.a.node})
	if err != nil {
		return false
	}
	ready := 0
	var not []string
	for _, p := range list.Items {
		ok := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodReady && cond.Status == v1.ConditionTrue && p.Status.Phase == v1.PodRunning {
				ok = true
				ready++
			}
		}
		if !ok {
			not = append(not, fmt.Sprintf("%s %s %v", p.Name, p.Status.Phase, p.Status.Conditions))
		}
	}
	ch.notReady = fmt.Sprintf("%d of %d pods in the API, %d Ready; not: %v", len(list.Items), ch.scale.pods, ready, not)
	return ready == ch.scale.pods
}

// state is each pod's running container and the number of ready
// sandboxes of each pod.
func (ch *chaos) state() (running map[string]string, sandboxes map[string]int) {
	sbs, cs := ch.a.runtimeState()
	running, sandboxes = map[string]string{}, map[string]int{}
	byID := map[string]string{}
	for _, sb := range sbs {
		ch.seenSBs[sb.Id] = true
		name := strings.TrimSuffix(sb.Metadata.Name, "-"+ch.a.node)
		byID[sb.Id] = name
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			sandboxes[name]++
		}
	}
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			running[byID[c.PodSandboxId]] = c.Id
		}
	}
	return running, sandboxes
}

func (ch *chaos) baseline() {
	running, _ := ch.state()
	if len(running) != ch.scale.pods {
		ch.t.Fatalf("%d pods with a running container; want %d", len(running), ch.scale.pods)
	}
	ch.before = running
}

// fault runs one fault and measures: recovery time from its end, the
// containers restarted and the duplicate sandboxes, the Lease renewals
// missed while it lasted, and the agent's peak RSS.
func (ch *chaos) fault(name string, do func()) {
	t := ch.t
	t.Logf("chaos: %s", name)
	from := time.Now()
	do()
	end := time.Now()
	ch.sampleRSS()
	r := chaosRow{fault: name}
	if !waitFor(3*time.Minute, ch.allReady) {
		r.notes = "not every pod Ready after 3 min: " + ch.notReady
		t.Errorf("%s: %s", name, r.notes)
	}
	r.recovery = time.Since(end)
	// The runtime view settles with the API's: give the agent's sync a
	// moment to do what it would (a restart would show here).
	time.Sleep(5 * time.Second)
	running, sandboxes := ch.state()
	for pod, id := range ch.before {
		if running[pod] != id {
			r.restarts++
			t.Logf("chaos: %s: %s's container %s is now %q", name, pod, id, running[pod])
		}
		if sandboxes[pod] > 1 {
			r.duplicates++
		}
	}
	ch.before = running
	r.leaseMissed = ch.lease.missed(from, end)
	ch.sampleRSS()
	r.rssPeakMiB = ch.rssPeak
	ch.rows = append(ch.rows, r)
}

// waitFor polls cond every 200 ms until it holds (true) or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// sampleRSS keeps the running agent's peak RSS (VmHWM).
func (ch *chaos) sampleRSS() {
	if ch.a.cmd == nil || ch.a.cmd.Process == nil {
		return
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", ch.a.cmd.Process.Pid))
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			ch.rssPeak = max(ch.rssPeak, n>>10)
		}
	}
}

// flood opens floodConns connections that each send requests with a
// random bearer token, and slowConns that send their headers a byte at a
// time, for the scale's flood duration.
func (ch *chaos) flood(scale chaosScale) {
	ctx, cancel := context.WithTimeout(context.Background(), scale.flood)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ch.port))
	var wg sync.WaitGroup
	var requests, refused atomic.Int64
	for i := 0; i < scale.floodConns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, MaxIdleConnsPerHost: 1}} //nolint:gosec // the test's own server
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/pods", nil)
				req.Header.Set("Authorization", fmt.Sprintf("Bearer %016x%016x", rand.Uint64(), rand.Uint64()))
				resp, err := client.Do(req)
				requests.Add(1)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusUnauthorized {
						refused.Add(1)
					}
				}
			}
		}()
	}
	for i := 0; i < scale.slowConns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the test's own server
				conn, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				for _, b := range []byte("GET /pods HTTP/1.1\r\nHost: node\r\nX-Slow: ") {
					if ctx.Err() != nil {
						break
					}
					if _, err := conn.Write([]byte{b}); err != nil {
						break
					}
					time.Sleep(time.Second)
				}
				conn.Close()
			}
		}()
	}
	wg.Wait()
	ch.t.Logf("chaos: flood made %d requests, %d refused 401", requests.Load(), refused.Load())
	if refused.Load() == 0 {
		ch.t.Error("the flood got no 401: it did not reach the node server's authentication")
	}
}

func (ch *chaos) report() {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos suite (%s): %d pods (%d static, %d API)\n", ch.scale.name, ch.scale.pods, len(ch.static), ch.scale.pods-len(ch.static))
	fmt.Fprintf(&b, "%-72s %8s %10s %9s %12s %8s\n", "fault", "restarts", "duplicates", "recovery", "lease missed", "RSS MiB")
	for _, r := range ch.rows {
		fmt.Fprintf(&b, "%-72s %8d %10d %9s %12d %8d %s\n", r.fault, r.restarts, r.duplicates, r.recovery.Round(100*time.Millisecond), r.leaseMissed, r.rssPeakMiB, r.notes)
	}
	ch.t.Log("\n" + b.String())
	os.WriteFile(filepath.Join(os.TempDir(), "nodeagent-chaos-"+ch.scale.name+".txt"), []byte(b.String()), 0o644) //nolint:errcheck
}

// teardownAndCheckLeaks deletes every pod, waits until the agent has
// removed them, stops it and finds nothing left: no sandbox, no IP
// reservation of its sandboxes, no pod cgroup, no mount and no pod
// directory beneath its root.
func (ch *chaos) teardownAndCheckLeaks() {
	t, a := ch.t, ch.a
	for _, name := range ch.names {
		if ch.static[name] {
			a.remove(name + ".yaml")
			continue
		}
		zero := int64(0)
		ch.c.Admin.CoreV1().Pods("default").Delete(context.Background(), a.podName(name), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}
	if !waitFor(3*time.Minute, func() bool { sbs, _ := a.runtimeState(); return len(sbs) == 0 }) {
		sbs, _ := a.runtimeState()
		t.Errorf("leak: %d sandboxes left 3 min after every pod was deleted", len(sbs))
	}
	// Pod directories and cgroups go at housekeeping: give it its rounds.
	var left []string
	waitFor(30*time.Second, func() bool { left = ch.leaks(); return len(left) == 0 })
	a.stop()
	if len(left) > 0 {
		t.Errorf("leaks after every pod was deleted: %v", left)
	} else {
		t.Log("chaos: no leaked sandbox, IP, cgroup, mount or pod directory")
	}
}

func (ch *chaos) leaks() []string {
	var left []string
	for ip, id := range reservations(ch.t) {
		if ch.seenSBs[id] {
			left = append(left, "IP "+ip)
		}
	}
	hier, _ := os.ReadDir(cgroupMount)
	for _, h := range hier {
		filepath.WalkDir(filepath.Join(cgroupMount, h.Name(), ch.a.cgroupRoot()), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), "pod") {
				left = append(left, "cgroup "+p)
				return filepath.SkipDir
			}
			return nil
		})
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	root := volume.Canonical(ch.a.root)
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], root+"/") {
			left = append(left, "mount "+f[4])
		}
	}
	pods, _ := os.ReadDir(filepath.Join(ch.a.root, "pods"))
	for _, p := range pods {
		left = append(left, "pod directory "+p.Name())
	}
	return left
}

// leaseWatch records every renewal of the node's Lease.
type leaseWatch struct {
	mu       sync.Mutex
	renewals []time.Time
	interval time.Duration
}

func watchLease(t *testing.T, c *cluster.Cluster, node string) *leaseWatch {
	w := &leaseWatch{interval: 10 * time.Second} // a quarter of the kubelet's 40 s lease
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		var last metav1.MicroTime
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			l, err := c.Admin.CoordinationV1().Leases("kube-node-lease").Get(rctx, node, metav1.GetOptions{})
			rcancel()
			if err == nil && l.Spec.RenewTime != nil && !l.Spec.RenewTime.Equal(&last) {
				last = *l.Spec.RenewTime
				w.mu.Lock()
				w.renewals = append(w.renewals, last.Time)
				w.mu.Unlock()
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()
	return w
}

// missed counts the renewals missing between from and to: every gap
// between renewals (and the window's edges) longer than 1.5 intervals
// lacks gap/interval - 1 of them, rounded.
func (w *leaseWatch) missed(from, to time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev := from
	n := 0
	for _, r := range append(w.renewals, to) {
		if r.Before(from) {
			continue
		}
		if r.After(to) {
			r = to
		}
		if gap := r.Sub(prev); gap > w.interval*3/2 {
			n += int((gap+w.interval/2)/w.interval) - 1
		}
		prev = r
		if r.Equal(to) {
			break
		}
	}
	return n
}

// criProxy stands between the agent and containerd on a unix socket of
// its own; frozen, it accepts connections and forwards nothing either
// way, on old and new connections alike, until thawed.
type criProxy struct {
	path   string
	target string
	mu     sync.Mutex
	thawed chan struct{} // closed while not frozen
}

func startCRIProxy(t *testing.T, target string) *criProxy {
	p := &criProxy{path: filepath.Join(t.TempDir(), "cri.sock"), target: target, thawed: make(chan struct{})}
	close(p.thawed)
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.thaw(); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *criProxy) serve(c net.Conn) {
	defer c.Close()
	p.gate()
	up, err := net.Dial("unix", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(up, c); done <- struct{}{} }()
	go func() { p.pipe(c, up); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, holding each chunk while frozen.
func (p *criProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					cw.CloseWrite()
				}
			}
			return
		}
	}
}

func (p *criProxy) gate() {
	p.mu.Lock()
	ch := p.thawed
	p.mu.Unlock()
	<-ch
}

func (p *criProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

func (p *criProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

// rigCmd runs hack/rig.sh with one command.
func rigCmd(t *testing.T, cmd string) {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join("..", "..", "hack", "rig.sh"), cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("rig.sh %s: %v\n%s", cmd, err, out)
	}
}
