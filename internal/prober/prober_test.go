package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// execCall is one ExecSync the fake received; the test answers it.
type execCall struct {
	id    string
	cmd   string
	at    time.Time
	reply chan int32 // exit code
}

type fakeExec struct {
	clk   *clocktesting.FakeClock
	calls chan execCall
	// hung makes Version not answer either (the runtime is stuck).
	hung bool
}

func (f *fakeExec) Version(ctx context.Context, _ *runtimeapi.VersionRequest, _ ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	if f.hung {
		<-ctx.Done()
		return nil, status.Error(codes.DeadlineExceeded, ctx.Err().Error())
	}
	return &runtimeapi.VersionResponse{RuntimeName: "fake"}, nil
}

func (f *fakeExec) ExecSync(ctx context.Context, in *runtimeapi.ExecSyncRequest, _ ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	c := execCall{id: in.ContainerId, cmd: strings.Join(in.Cmd, " "), at: f.clk.Now(), reply: make(chan int32, 1)}
	f.calls <- c
	select {
	case code := <-c.reply:
		return &runtimeapi.ExecSyncResponse{ExitCode: code, Stdout: []byte("exit " + strconv.Itoa(int(code)))}, nil
	case <-ctx.Done():
		// A runtime that never answers: the client's deadline, as gRPC
		// reports it.
		return nil, status.Error(codes.DeadlineExceeded, ctx.Err().Error())
	}
}

type events struct{ reasons chan string }

func (e *events) Event(_ *v1.Pod, _, reason, message string) {
	select {
	case e.reasons <- reason + ": " + message:
	default:
	}
}

type harness struct {
	t   *testing.T
	clk *clocktesting.FakeClock
	ex  *fakeExec
	m   *Manager
	ev  *events
}

func newHarness(t *testing.T) *harness {
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	ex := &fakeExec{clk: clk, calls: make(chan execCall)}
	ev := &events{reasons: make(chan string, 100)}
	m, err := New(Config{Runtime: ex, Clock: clk, Logger: zap.NewNop(), Recorder: ev, Jitter: func(time.Duration) time.Duration { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		go func() { // answer whatever is still in flight
			for c := range ex.calls {
				c.reply <- 0
			}
		}()
		m.Stop()
		close(ex.calls)
	})
	// Long after the manager started: no start-up jitter.
	clk.Step(time.Hour)
	return &harness{t: t, clk: clk, ex: ex, m: m, ev: ev}
}

// next waits for the next exec and answers it with code.
func (h *harness) next(code int32) execCall {
	h.t.Helper()
	select {
	case c := <-h.ex.calls:
		c.reply <- code
		return c
	case <-time.After(10 * time.Second):
		h.t.Fatal("no probe ran")
	}
	return execCall{}
}

// update waits for the next verdict.
func (h *harness) update() pod.ProbeUpdate {
	h.t.Helper()
	select {
	case u := <-h.m.Updates():
		return u
	case <-time.After(10 * time.Second):
		h.t.Fatal("no probe verdict")
	}
	return pod.ProbeUpdate{}
}

func (h *harness) noUpdate() {
	h.t.Helper()
	select {
	case u := <-h.m.Updates():
		h.t.Fatalf("unexpected verdict %+v", u)
	default:
	}
}

func execProbe(cmd string, period, success, failure int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds: period, SuccessThreshold: success, FailureThreshold: failure, TimeoutSeconds: 1}
}

func probedPod(c v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{Containers: []v1.Container{c}}}
}

func running(p *v1.Pod, id string, startedAt time.Time) *pod.RuntimeStatus {
	return &pod.RuntimeStatus{UID: p.UID, Sandboxes: []*pod.Sandbox{{ID: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY, IP: "127.0.0.1"}},
		Containers: []*pod.Container{{ID: id, SandboxID: "sb", Name: p.Spec.Containers[0].Name, State: pod.ContainerRunning, StartedAt: startedAt}}}
}

// A runtime that does not answer an exec probe (a hung CRI socket) gives
// no verdict: the probe errored, the container is not failed for it, and
// the next answer counts again.
func TestHungRuntimeIsNoFailure(t *testing.T) {
	defer func(g time.Duration) { execGrace = g }(execGrace)
	execGrace = 20 * time.Millisecond // the call's deadline: 1s + this
	h := newHarness(t)
	h.ex.hung = true
	c := v1.Container{Name: "app", LivenessProbe: execProbe("check", 10, 1, 1)}
	p := probedPod(c)
	h.m.Sync(p, running(p, "c1", h.clk.Now()))
	select {
	case <-h.ex.calls: // never answered
	case <-time.After(10 * time.Second):
		t.Fatal("no probe ran")
	}
	select {
	case e := <-h.ev.reasons:
		if !strings.Contains(e, "probe errored: the runtime did not answer") {
			t.Fatalf("event %q; want the probe errored for the runtime", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event for the unanswered probe")
	}
	h.noUpdate()
	h.clk.Step(10 * time.Second)
	h.next(1)
	if u := h.update(); u.Result != pod.ProbeFailure {
		t.Fatalf("verdict %+v after a real failure; want Failure", u)
	}
}

// An exec the runtime does not answer while the runtime itself answers
// (it waits for a process the command left) is the command's timeout: a
// failure.
func TestUnansweredExecOfAnAnsweringRuntimeFails(t *testing.T) {
	defer func(g time.Duration) { execGrace = g }(execGrace)
	execGrace = 20 * time.Millisecond
	h := newHarness(t)
	c := v1.Container{Name: "app", LivenessProbe: execProbe("check", 10, 1, 1)}
	p := probedPod(c)
	h.m.Sync(p, running(p, "c1", h.clk.Now()))
	select {
	case <-h.ex.calls: // never answered
	case <-time.After(10 * time.Second):
		t.Fatal("no probe ran")
	}
	if u := h.update(); u.Result != pod.ProbeFailure {
		t.Fatalf("verdict %+v; want Failure (the command timed out)", u)
	}
}

// A liveness probe fails the container after failureThreshold
// consecutive failures (a success in between starts the count again),
// then holds until the container's next instance, which starts without
// a verdict.
func TestLivenessThresholdAndHold(t *testing.T) {
	h := newHarness(t)
	p := probedPod(v1.Container{Name: "app", LivenessProbe: execProbe("live", 5, 1, 3)})
	h.m.Sync(p, running(p, "c1", h.clk.Now()))
	tick := func() { h.clk.Step(5 * time.Second) }

	if c := h.next(1); c.id != "c1" {
		t.Fatalf("probed %q, want c1", c.id)
	}
	tick()
	h.next(1)
	tick()
	h.next(0) // success: the count starts again
	if u := h.update(); u.Result != pod.ProbeSuccess || u.Kind != pod.Liveness {
		t.Fatalf("verdict %+v, want liveness success", u)
	}
	for i := 0; i < 2; i++ {
		tick()
		h.next(1)
	}
	tick()
	h.next(1) // the third: verdict failure
	if u := h.update(); u.Result != pod.ProbeFailure || u.ContainerID != "c1" {
		t.Fatalf("verdict %+v, want failure of c1", u)
	}
	if got := h.m.ProbeResult("uid-1", "c1", pod.Liveness); got != pod.ProbeFailure {
		t.Fatalf("c1 liveness = %v, want failure", got)
	}
	// Held: c1 is not probed again; its next instance is.
	tick()
	h.m.Sync(p, running(p, "c2", h.clk.Now()))
	tick()
	if c := h.next(0); c.id != "c2" {
		t.Fatalf("probed %q after the hold, want the new instance c2", c.id)
	}
	if got := h.m.ProbeResult("uid-1", "c1", pod.Liveness); got != pod.ProbeUnknown {
		t.Fatalf("c1's verdict kept after its replacement: %v", got)
	}
	unhealthy := 0
	for len(h.ev.reasons) > 0 {
		if strings.HasPrefix(<-h.ev.reasons, "Unhealthy: Liveness probe failed: exit 1") {
			unhealthy++
		}
	}
	if unhealthy != 5 {
		t.Fatalf("%d Unhealthy events, want one per failed probe (5)", unhealthy)
	}
}

// Readiness needs successThreshold consecutive successes, turns failed
// after failureThreshold failures and keeps probing (no hold).
func TestReadinessBothWays(t *testing.T) {
	h := newHarness(t)
	p := probedPod(v1.Container{Name: "app", ReadinessProbe: execProbe("ready", 1, 2, 1)})
	h.m.Sync(p, running(p, "c1", h.clk.Now()))
	tick := func() { h.clk.Step(time.Second) }

	h.next(0)
	tick()
	h.next(1) // one success was not enough; this failure is the verdict
	tick()
	h.next(0)
	if u := h.update(); u.Result != pod.ProbeFailure || u.Kind != pod.Readiness {
		t.Fatalf("verdict %+v, want readiness failure", u)
	}
	h.noUpdate()
	tick()
	h.next(0) // second success in a row
	tick()
	h.next(0)
	if u := h.update(); u.Result != pod.ProbeSuccess {
		t.Fatalf("verdict %+v, want readiness success", u)
	}
	h.noUpdate() // a further success changes nothing
	if got := h.m.ProbeResult("uid-1", "c1", pod.Readiness); got != pod.ProbeSuccess {
		t.Fatalf("readiness = %v", got)
	}
}

// Until the startup probe succeeds liveness does not run; the initial
// delay counts from the container's start; after its success the
// startup probe stops.
func TestStartupHoldsLivenessAndInitialDelay(t *testing.T) {
	h := newHarness(t)
	live := execProbe("live", 2, 1, 3)
	live.InitialDelaySeconds = 3
	p := probedPod(v1.Container{Name: "app", StartupProbe: execProbe("startup", 2, 1, 30), LivenessProbe: live})
	started := h.clk.Now()
	h.m.Sync(p, running(p, "c1", started))
	tick := func() { h.clk.Step(2 * time.Second) }

	for i := 0; i < 2; i++ {
		if c := h.next(1); c.cmd != "startup" {
			t.Fatalf("%q ran before the startup probe passed", c.cmd)
		}
		tick()
	}
	if c := h.next(0); c.cmd != "startup" {
		t.Fatalf("%q ran before the startup probe passed", c.cmd)
	}
	if u := h.update(); u.Kind != pod.Startup || u.Result != pod.ProbeSuccess {
		t.Fatalf("verdict %+v, want startup success", u)
	}
	tick()
	c := h.next(0)
	if c.cmd != "live" {
		t.Fatalf("%q ran after the startup probe passed, want only liveness", c.cmd)
	}
	if c.at.Sub(started) < 3*time.Second {
		t.Fatalf("liveness ran %v after the start, before its initial delay", c.at.Sub(started))
	}
	tick()
	if c := h.next(0); c.cmd != "live" {
		t.Fatalf("the startup probe ran again after passing")
	}
	h.m.RemovePod("uid-1")
	if n := h.m.Workers(); n != 0 {
		t.Fatalf("%d workers after RemovePod", n)
	}
	if got := h.m.ProbeResult("uid-1", "c1", pod.Startup); got != pod.ProbeUnknown {
		t.Fatalf("verdict kept after RemovePod: %v", got)
	}
}

// A stopped container is not probed; its workers wait for the next
// instance.
func TestNotRunningNotProbed(t *testing.T) {
	h := newHarness(t)
	p := probedPod(v1.Container{Name: "app", LivenessProbe: execProbe("live", 1, 1, 1)})
	h.m.Sync(p, &pod.RuntimeStatus{UID: p.UID})
	h.clk.Step(time.Second)
	h.clk.Step(time.Second)
	h.m.Sync(p, running(p, "c1", h.clk.Now()))
	h.clk.Step(time.Second)
	if c := h.next(0); c.id != "c1" {
		t.Fatalf("probed %q", c.id)
	}
}

func TestNetworkProbes(t *testing.T) {
	m, err := New(Config{Runtime: &fakeExec{}, Clock: clocktesting.NewFakeClock(time.Now()), Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	var gotUA, gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		gotUA, gotHeader = r.UserAgent(), r.Header.Get("X-Probe")
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	host, portS, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portS)
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	p := probedPod(*c)
	tgt := target{id: "c1", podIP: host}

	gs := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()
	gport := lis.Addr().(*net.TCPAddr).Port
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()

	svc := "db"
	tests := []struct {
		name   string
		probe  v1.ProbeHandler
		want   pod.ProbeResult
		output string
	}{
		{"http by port name", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http"),
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "yes"}}}}, pod.ProbeSuccess, "ok"},
		{"http 503", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/bad", Port: intstr.FromInt32(int32(port))}}, pod.ProbeFailure, "HTTP probe failed with statuscode: 503"},
		{"tcp open", v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}, pod.ProbeSuccess, ""},
		{"tcp closed", v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(int32(closedPort))}}, pod.ProbeFailure, "connection refused"},
		{"grpc serving", v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(gport)}}, pod.ProbeSuccess, ""},
		{"grpc not serving", v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(gport), Service: &svc}}, pod.ProbeFailure, "NOT_SERVING"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, out, err := m.runProbe(context.Background(), p, c, &v1.Probe{ProbeHandler: tt.probe, TimeoutSeconds: 2}, tgt)
			if err != nil {
				t.Fatal(err)
			}
			if res != tt.want || !strings.Contains(out, tt.output) {
				t.Fatalf("got %v %q, want %v containing %q", res, out, tt.want, tt.output)
			}
		})
	}
	if !strings.HasPrefix(gotUA, "kube-probe/") || gotHeader != "yes" {
		t.Fatalf("User-Agent %q, X-Probe %q", gotUA, gotHeader)
	}
}
