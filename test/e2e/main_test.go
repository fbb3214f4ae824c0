//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/status"
	"github.com/nodeagent/nodeagent/internal/volume"
)

var (
	binary   string
	endpoint string
	busybox  string
	cniConf  string
	cniBin   string
	conn     *cri.Conn
)

func TestMain(m *testing.M) {
	endpoint = os.Getenv("NODEAGENT_CONTAINERD_ADDRESS")
	if endpoint == "" {
		fmt.Fprintln(os.Stderr, "e2e: NODEAGENT_CONTAINERD_ADDRESS is not set: bring the rig up with `eval \"$(bash hack/rig.sh up)\"` or run `make test`")
		os.Exit(1)
	}
	busybox = envOr("NODEAGENT_BUSYBOX_IMAGE", "127.0.0.1:5055/nodeagent/busybox:1.36")
	cniConf = os.Getenv("NODEAGENT_CNI_CONF_DIR")
	cniBin = os.Getenv("NODEAGENT_CNI_BIN_DIR")
	dir, err := os.MkdirTemp("", "nodeagent-e2e-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "nodeagent")
	build := exec.Command("bash", "../../hack/build.sh", binary)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build nodeagent:", err)
		os.Exit(1)
	}
	if err := deadMethodsEliminated(binary); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	conn, err = cri.Dial(endpoint)
	if err != nil {
		panic(err)
	}
	if _, err := cri.Check(context.Background(), conn, 10*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: runtime not ready:", err)
		os.Exit(1)
	}
	code := m.Run()
	stopCluster()
	conn.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// agent is one nodeagent process with its own directories and node name,
// so tests run side by side.
type agent struct {
	t         *testing.T
	node      string
	manifests string
	root      string
	logs      string
	extra     []string
	env       []string // when set, the agent's whole environment
	cmd       *exec.Cmd
	out       *syncBuffer
	waitErr   chan error
}

func newAgent(t *testing.T, extra ...string) *agent {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	base := t.TempDir()
	a := &agent{
		t:         t,
		node:      "n" + hex.EncodeToString(b),
		manifests: filepath.Join(base, "manifests"),
		root:      filepath.Join(base, "root"),
		logs:      filepath.Join(base, "logs"),
		extra:     extra,
		out:       &syncBuffer{},
	}
	for _, d := range []string{a.manifests, a.root, a.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			a.dump()
		}
		a.stop()
		a.removeAllPods()
		a.removeCgroups()
		// Secret and projected volumes (every API pod's token) are
		// tmpfs mounts a stopped agent leaves: undone before the
		// temporary directory goes.
		volume.UnmountUnder(a.root)
	})
	return a
}

func (a *agent) start() {
	a.t.Helper()
	args := []string{
		"--manifest-dir", a.manifests,
		"--container-runtime-endpoint", endpoint,
		"--root-dir", a.root,
		"--pod-logs-dir", a.logs,
		"--hostname-override", a.node,
		"--file-check-frequency", "2s",
		"--healthz-port", "0", // agents run side by side; a test may pass its own port
		"--cgroup-root", a.cgroupRoot(), // each its own kubepods
		"--v", "4",
	}
	if cniConf != "" {
		args = append(args, "--cni-conf-dir", cniConf, "--cni-bin-dir", cniBin)
	}
	args = append(args, a.extra...)
	a.cmd = exec.Command(binary, args...)
	a.cmd.Stdout, a.cmd.Stderr = a.out, a.out
	a.cmd.Env = a.env
	// If the test binary dies (timeout panic), the agent dies with it
	// rather than outliving the rig.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		a.t.Fatal(err)
	}
	a.waitErr = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(a.cmd, a.waitErr)
}

// stop ends the agent with SIGTERM (pods keep running).
func (a *agent) stop() { a.signal(syscall.SIGTERM) }

// kill9 ends the agent with SIGKILL.
func (a *agent) kill9() { a.signal(syscall.SIGKILL) }

func (a *agent) signal(sig syscall.Signal) {
	if a.cmd == nil || a.cmd.Process == nil {
		return
	}
	a.cmd.Process.Signal(sig)
	select {
	case <-a.waitErr:
	case <-time.After(30 * time.Second):
		a.cmd.Process.Kill()
		<-a.waitErr
	}
	a.cmd = nil
}

// podName is the name the agent gives a manifest's pod.
func (a *agent) podName(name string) string { return name + "-" + a.node }

func (a *agent) write(file, body string) {
	a.t.Helper()
	tmp := filepath.Join(a.manifests, ".tmp-"+file)
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		a.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(a.manifests, file)); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agent) remove(file string) {
	a.t.Helper()
	if err := os.Remove(filepath.Join(a.manifests, file)); err != nil {
		a.t.Fatal(err)
	}
}

// status reads the agent's published status of a pod, nil when absent.
func (a *agent) status(name string) *v1.Pod {
	pods, err := status.List(filepath.Join(a.root, "status"))
	if err != nil {
		return nil
	}
	for _, p := range pods {
		if p.Name == a.podName(name) {
			return p
		}
	}
	return nil
}

func (a *agent) dump() {
	full := filepath.Join(os.TempDir(), "nodeagent-e2e-agent-"+a.node+".log")
	os.WriteFile(full, []byte(a.out.String()), 0o644)
	a.t.Logf("---- nodeagent log (%s; in full: %s) ----\n%s", a.node, full, tail(a.out.String(), 150))
	sbs, cs := a.runtimeState()
	for _, sb := range sbs {
		a.t.Logf("sandbox %s %s attempt=%d %s", sb.Id[:12], sb.Metadata.Name, sb.Metadata.Attempt, sb.State)
	}
	for _, c := range cs {
		a.t.Logf("container %s %s attempt=%d %s sandbox=%s", c.Id[:12], c.Metadata.Name, c.Metadata.Attempt, c.State, c.PodSandboxId[:12])
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// runtimeState lists the sandboxes and containers of this agent's pods.
func (a *agent) runtimeState() ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sbr, err := conn.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		a.t.Fatalf("list sandboxes: %v", err)
	}
	cr, err := conn.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		a.t.Fatalf("list containers: %v", err)
	}
	mine := map[string]bool{}
	var sbs []*runtimeapi.PodSandbox
	for _, sb := range sbr.Items {
		if strings.HasSuffix(sb.Metadata.Name, "-"+a.node) {
			sbs = append(sbs, sb)
			mine[sb.Id] = true
		}
	}
	var cs []*runtimeapi.Container
	for _, c := range cr.Containers {
		if mine[c.PodSandboxId] {
			cs = append(cs, c)
		}
	}
	return sbs, cs
}

// sandboxes returns this pod's sandboxes.
func (a *agent) sandboxes(name string) []*runtimeapi.PodSandbox {
	sbs, _ := a.runtimeState()
	var out []*runtimeapi.PodSandbox
	for _, sb := range sbs {
		if sb.Metadata.Name == a.podName(name) {
			out = append(out, sb)
		}
	}
	return out
}

// containers returns this pod's containers named cname ("" for all),
// oldest first.
func (a *agent) containers(name, cname string) []*runtimeapi.Container {
	sbs, cs := a.runtimeState()
	ids := map[string]bool{}
	for _, sb := range sbs {
		if sb.Metadata.Name == a.podName(name) {
			ids[sb.Id] = true
		}
	}
	var out []*runtimeapi.Container
	for _, c := range cs {
		if ids[c.PodSandboxId] && (cname == "" || c.Metadata.Name == cname) {
			out = append(out, c)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].CreatedAt < out[j-1].CreatedAt; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (a *agent) running(name, cname string) *runtimeapi.Container {
	for _, c := range a.containers(name, cname) {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c
		}
	}
	return nil
}

// removeAllPods removes whatever this agent's pods left in the runtime.
func (a *agent) removeAllPods() {
	sbs, _ := a.runtimeState()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, sb := range sbs {
		conn.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id})
		conn.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id})
	}
}

// eventually polls cond every 100ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func containerStatus(t *testing.T, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := conn.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatalf("container status %s: %v", id, err)
	}
	return r.Status
}

// startHostProcess starts a helper the test runs on the host (a device
// plugin, a provisioner, a CSI driver), dying with the test binary; at
// the end of the test it is stopped (SIGTERM, then SIGKILL after 10s)
// and, when the test failed, the end of its output logged under name.
func startHostProcess(t *testing.T, name string, cmd *exec.Cmd) *syncBuffer {
	t.Helper()
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s:\n%s", name, tail(out.String(), 80))
		}
	})
	return out
}

// deadMethodsEliminated fails when the binary at path links text/template's
// executor (whose run-time MethodByName turns off the linker's dead-method
// elimination for the whole program, ~26 MB more of mapped binary) or
// golang.org/x/net/trace (which links it: gRPC without the grpcnotrace tag).
func deadMethodsEliminated(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		return fmt.Errorf("%s: symbols: %w", path, err)
	}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "golang.org/x/net/trace.") || strings.HasPrefix(s.Name, "text/template.(*state).") {
			return fmt.Errorf("%s links %s: the linker keeps every exported method (build with hack/build.sh)", path, s.Name)
		}
	}
	return nil
}
