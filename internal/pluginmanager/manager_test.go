package pluginmanager

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	regapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	testclock "k8s.io/utils/clock/testing"
)

type plugin struct {
	regapi.UnimplementedRegistrationServer
	info   *regapi.PluginInfo
	status chan *regapi.RegistrationStatus
}

func (p *plugin) GetInfo(context.Context, *regapi.InfoRequest) (*regapi.PluginInfo, error) {
	return p.info, nil
}

func (p *plugin) NotifyRegistrationStatus(_ context.Context, s *regapi.RegistrationStatus) (*regapi.RegistrationStatusResponse, error) {
	p.status <- s
	return &regapi.RegistrationStatusResponse{}, nil
}

type handler struct {
	mu     sync.Mutex
	events []string
	gone   chan string
	refuse int // refuse the first registrations
}

func (h *handler) ValidatePlugin(name string, versions []string) error { return nil }
func (h *handler) RegisterPlugin(_ context.Context, name, endpoint string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.refuse > 0 {
		h.refuse--
		return errors.New("not yet")
	}
	h.events = append(h.events, "register "+name+" "+endpoint)
	return nil
}
func (h *handler) DeregisterPlugin(_ context.Context, name string) { h.gone <- name }

func serve(t *testing.T, path string, p *plugin) *grpc.Server {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	regapi.RegisterRegistrationServer(s, p)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return s
}

func wait[T any](t *testing.T, ch chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing came")
	}
	var zero T
	return zero
}

// A socket already there and one that appears are registered with the
// handler of their type and told so; one of an unknown type is told
// why not; a socket that goes deregisters its plugin.
func TestRegistration(t *testing.T) {
	dir := t.TempDir()
	h := &handler{gone: make(chan string, 4)}
	early := &plugin{info: &regapi.PluginInfo{Type: regapi.CSIPlugin, Name: "early", Endpoint: "/run/early.sock", SupportedVersions: []string{"1.0.0"}},
		status: make(chan *regapi.RegistrationStatus, 1)}
	serve(t, filepath.Join(dir, "early-reg.sock"), early)
	m, err := New(Config{Dir: dir, Handlers: map[string]Handler{regapi.CSIPlugin: h}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	if s := wait(t, early.status); !s.PluginRegistered {
		t.Fatalf("early plugin: %+v", s)
	}

	late := &plugin{info: &regapi.PluginInfo{Type: regapi.CSIPlugin, Name: "late", SupportedVersions: []string{"1.0.0"}},
		status: make(chan *regapi.RegistrationStatus, 1)}
	lateSock := filepath.Join(dir, "late-reg.sock")
	srv := serve(t, lateSock, late)
	if s := wait(t, late.status); !s.PluginRegistered {
		t.Fatalf("late plugin: %+v", s)
	}
	odd := &plugin{info: &regapi.PluginInfo{Type: "Gadget", Name: "odd"}, status: make(chan *regapi.RegistrationStatus, 1)}
	serve(t, filepath.Join(dir, "odd.sock"), odd)
	if s := wait(t, odd.status); s.PluginRegistered || s.Error == "" {
		t.Fatalf("plugin of an unknown type: %+v", s)
	}
	h.mu.Lock()
	want := []string{"register early /run/early.sock", "register late " + lateSock}
	if len(h.events) != 2 || h.events[0] != want[0] || h.events[1] != want[1] {
		t.Errorf("registrations %q, want %q", h.events, want)
	}
	h.mu.Unlock()

	srv.Stop()
	os.Remove(lateSock)
	if got := wait(t, h.gone); got != "late" {
		t.Errorf("deregistered %q, want late", got)
	}
}

// A registration the handler refuses is told so, and tried again until
// it is taken.
func TestRegistrationRetried(t *testing.T) {
	dir := t.TempDir()
	h := &handler{gone: make(chan string, 4), refuse: 1}
	p := &plugin{info: &regapi.PluginInfo{Type: regapi.CSIPlugin, Name: "slow", SupportedVersions: []string{"1.0.0"}},
		status: make(chan *regapi.RegistrationStatus, 4)}
	serve(t, filepath.Join(dir, "slow-reg.sock"), p)
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	m, err := New(Config{Dir: dir, Handlers: map[string]Handler{regapi.CSIPlugin: h}, Clock: clk, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, m)
	if s := wait(t, p.status); s.PluginRegistered || s.Error != "not yet" {
		t.Fatalf("first registration: %+v", s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() { // the retry is armed
		if time.Now().After(deadline) {
			t.Fatal("no retry armed")
		}
		runtime.Gosched()
	}
	clk.Step(time.Second)
	if s := wait(t, p.status); !s.PluginRegistered {
		t.Fatalf("second registration: %+v", s)
	}
}

// run runs m until the test ends.
func run(t *testing.T, m *Manager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}
