package images_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/cri/critest"
	"github.com/nodeagent/nodeagent/internal/images"
)

// gated is critest.Fake whose PullImage announces itself on started and
// then waits for a token on release (or the caller's ctx), counting the
// pulls at once.
type gated struct {
	*critest.Fake
	started chan string
	release chan struct{}

	mu             sync.Mutex
	active, maxAct int
}

func newGated(clk *testclock.FakeClock) *gated {
	return &gated{Fake: critest.New(clk), started: make(chan string, 16), release: make(chan struct{})}
}

func (g *gated) PullImage(ctx context.Context, in *runtimeapi.PullImageRequest, opts ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	g.mu.Lock()
	g.active++
	g.maxAct = max(g.maxAct, g.active)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.active--
		g.mu.Unlock()
	}()
	g.started <- in.GetImage().GetImage()
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Fake.PullImage(ctx, in, opts...)
}

func (g *gated) maxActive() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maxAct
}

type pullResult struct {
	res images.Result
	err error
}

// harness is a Puller over a gated fake, with its trace on a channel.
type harness struct {
	t      *testing.T
	clk    *testclock.FakeClock
	client *gated
	p      *images.Puller
	trace  chan string // "step image"
}

func newPullHarness(t *testing.T, cfg images.PullerConfig) *harness {
	t.Helper()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &harness{t: t, clk: clk, client: newGated(clk), trace: make(chan string, 64)}
	cfg.Client, cfg.Clock = h.client, clk
	if cfg.Logger == nil {
		cfg.Logger = zaptest.NewLogger(t)
	}
	p, err := images.NewPuller(cfg)
	if err != nil {
		t.Fatalf("NewPuller() error = %v", err)
	}
	images.SetTrace(p, func(step, image string) { h.trace <- step + " " + image })
	h.p = p
	return h
}

// pull starts a Pull in a goroutine; its result arrives on the channel.
func (h *harness) pull(ctx context.Context, image string, auths ...*runtimeapi.AuthConfig) <-chan pullResult {
	ch := make(chan pullResult, 1)
	go func() {
		res, err := h.p.Pull(ctx, images.Request{Image: &runtimeapi.ImageSpec{Image: image}, Auths: auths})
		ch <- pullResult{res, err}
	}()
	return ch
}

// await receives the next trace steps and fails unless they are want (in
// any order).
func (h *harness) await(want ...string) {
	h.t.Helper()
	left := map[string]int{}
	for _, w := range want {
		left[w]++
	}
	for range want {
		got := <-h.trace
		if left[got] == 0 {
			h.t.Fatalf("trace step %q, want one of %v", got, left)
		}
		left[got]--
	}
}

func (h *harness) pulls() int {
	n := 0
	for _, m := range h.client.Methods() {
		if m == "PullImage" {
			n++
		}
	}
	return n
}

func TestPullSharedByConcurrentCallers(t *testing.T) {
	h := newPullHarness(t, images.PullerConfig{Serialize: true})
	ctx := context.Background()
	first := h.pull(ctx, "reg/app:1")
	if got := <-h.client.started; got != "reg/app:1" {
		t.Fatalf("pull started for %q", got)
	}
	second := h.pull(ctx, "reg/app:1")
	h.await("queue reg/app:1", "wait reg/app:1", "wait reg/app:1")
	h.clk.Step(1500 * time.Millisecond)
	h.client.release <- struct{}{}
	a, b := <-first, <-second
	if a.err != nil || b.err != nil {
		t.Fatalf("Pull() errors = %v, %v", a.err, b.err)
	}
	if a.res.ImageRef != critest.ImageRef("reg/app:1") || b.res.ImageRef != a.res.ImageRef {
		t.Errorf("image refs = %q, %q, want %q", a.res.ImageRef, b.res.ImageRef, critest.ImageRef("reg/app:1"))
	}
	if a.res.Shared == b.res.Shared {
		t.Errorf("Shared = %v, %v; want exactly one caller to have joined", a.res.Shared, b.res.Shared)
	}
	if a.res.Pull != 1500*time.Millisecond || b.res.Pull != a.res.Pull {
		t.Errorf("Pull durations = %v, %v, want 1.5s", a.res.Pull, b.res.Pull)
	}
	if n := h.pulls(); n != 1 {
		t.Errorf("PullImage calls = %d, want 1", n)
	}
}

// Callers with other credentials do not share a pull: one may be let in
// where the other is not.
func TestPullNotSharedAcrossCredentials(t *testing.T) {
	h := newPullHarness(t, images.PullerConfig{})
	ctx := context.Background()
	anon := h.pull(ctx, "reg/app:1")
	alice := h.pull(ctx, "reg/app:1", &runtimeapi.AuthConfig{Username: "alice", Password: "pw"})
	<-h.client.started
	<-h.client.started
	h.client.release <- struct{}{}
	h.client.release <- struct{}{}
	if r := <-anon; r.err != nil || r.res.Shared {
		t.Errorf("anonymous Pull() = %+v", r)
	}
	if r := <-alice; r.err != nil || r.res.Shared {
		t.Errorf("alice's Pull() = %+v", r)
	}
	if n := h.pulls(); n != 2 {
		t.Errorf("PullImage calls = %d, want 2", n)
	}
}

func TestPullLimit(t *testing.T) {
	tests := []struct {
		name  string
		cfg   images.PullerConfig
		limit int
	}{
		{name: "serialized", cfg: images.PullerConfig{Serialize: true}, limit: 1},
		{name: "serialized wins over max", cfg: images.PullerConfig{Serialize: true, MaxParallel: 3}, limit: 1},
		{name: "at most 2", cfg: images.PullerConfig{MaxParallel: 2}, limit: 2},
		{name: "unlimited", cfg: images.PullerConfig{}, limit: 4},
	}
	imgs := []string{"reg/a:1", "reg/b:1", "reg/c:1", "reg/d:1"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newPullHarness(t, tt.cfg)
			var results []<-chan pullResult
			for _, img := range imgs {
				results = append(results, h.pull(context.Background(), img))
			}
			var steps []string
			for _, img := range imgs {
				steps = append(steps, "wait "+img)
				if tt.limit < len(imgs) {
					steps = append(steps, "queue "+img)
				}
			}
			h.await(steps...)
			running := 0
			for done := 0; done < len(imgs); done++ {
				// Every flight is queued or pulling: as many pull as the
				// limit allows, and no more until one ends.
				for running < min(tt.limit, len(imgs)-done) {
					<-h.client.started
					running++
				}
				select {
				case img := <-h.client.started:
					t.Fatalf("pull of %s started beyond the limit of %d", img, tt.limit)
				default:
				}
				h.client.release <- struct{}{}
				running--
			}
			for i, ch := range results {
				if r := <-ch; r.err != nil || r.res.ImageRef != critest.ImageRef(imgs[i]) {
					t.Errorf("Pull(%s) = %+v", imgs[i], r)
				}
			}
			if got := h.client.maxActive(); got != tt.limit {
				t.Errorf("most pulls at once = %d, want %d", got, tt.limit)
			}
		})
	}
}

// A serialized pull's Total includes the wait for the one before it.
func TestPullDurationIncludesWaiting(t *testing.T) {
	h := newPullHarness(t, images.PullerConfig{Serialize: true})
	first := h.pull(context.Background(), "reg/a:1")
	<-h.client.started
	second := h.pull(context.Background(), "reg/b:1")
	h.await("wait reg/a:1", "queue reg/a:1", "wait reg/b:1", "queue reg/b:1")
	h.clk.Step(2 * time.Second)
	h.client.release <- struct{}{}
	if r := <-first; r.err != nil || r.res.Pull != 2*time.Second || r.res.Total != 2*time.Second {
		t.Fatalf("first Pull() = %+v, want 2s pull, 2s total", r)
	}
	<-h.client.started
	h.clk.Step(time.Second)
	h.client.release <- struct{}{}
	if r := <-second; r.err != nil || r.res.Pull != time.Second || r.res.Total != 3*time.Second {
		t.Errorf("second Pull() = %+v, want 1s pull, 3s total", r)
	}
}

// OnPull hears of every Pull when it returns: from the caller's asking
// (waiting included) to its return, with its error.
func TestPullObserved(t *testing.T) {
	type seen struct {
		image      string
		start, end time.Time
		err        bool
	}
	got := make(chan seen, 4)
	h := newPullHarness(t, images.PullerConfig{Serialize: true, OnPull: func(req images.Request, start, end time.Time, err error) {
		got <- seen{req.Image.GetImage(), start, end, err != nil}
	}})
	t0 := h.clk.Now()
	first := h.pull(context.Background(), "reg/a:1")
	<-h.client.started
	h.clk.Step(2 * time.Second)
	h.client.release <- struct{}{}
	<-first
	if diff := cmp.Diff(seen{"reg/a:1", t0, t0.Add(2 * time.Second), false}, <-got, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("OnPull of a pull (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithCancel(context.Background())
	second := h.pull(ctx, "reg/b:1")
	<-h.client.started
	h.clk.Step(time.Second)
	cancel()
	<-second
	if diff := cmp.Diff(seen{"reg/b:1", t0.Add(2 * time.Second), t0.Add(3 * time.Second), true}, <-got, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("OnPull of a cancelled pull (-want +got):\n%s", diff)
	}
}

// A shared pull goes on while one caller waits for it; it is cancelled
// when the last leaves, and a later caller starts afresh.
func TestPullCancelledWhenEveryCallerLeft(t *testing.T) {
	h := newPullHarness(t, images.PullerConfig{})
	ctxA, cancelA := context.WithCancel(context.Background())
	a := h.pull(ctxA, "reg/app:1")
	<-h.client.started
	ctxB, cancelB := context.WithCancel(context.Background())
	b := h.pull(ctxB, "reg/app:1")
	h.await("wait reg/app:1", "wait reg/app:1")
	cancelA()
	if r := <-a; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled caller's Pull() = %+v, want context.Canceled", r)
	}
	cancelB()
	if r := <-b; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("last caller's Pull() = %+v, want context.Canceled", r)
	}
	c := h.pull(context.Background(), "reg/app:1")
	<-h.client.started
	h.client.release <- struct{}{}
	if r := <-c; r.err != nil || r.res.Shared {
		t.Errorf("later Pull() = %+v, want a fresh successful pull", r)
	}
	if n := h.pulls(); n != 1 {
		// The cancelled PullImage returned before reaching the fake.
		t.Errorf("PullImage calls reaching the runtime = %d, want 1", n)
	}
}

func TestPullTriesEachCredential(t *testing.T) {
	h := newPullHarness(t, images.PullerConfig{})
	h.client.SetError("PullImage", errors.New("unauthorized"))
	ch := h.pull(context.Background(), "reg/app:1", &runtimeapi.AuthConfig{Username: "a"}, &runtimeapi.AuthConfig{Username: "b"})
	for range 2 {
		<-h.client.started
		h.client.release <- struct{}{}
	}
	r := <-ch
	var agg utilerrors.Aggregate
	if !errors.As(r.err, &agg) || len(agg.Errors()) != 2 {
		t.Errorf("Pull() error = %v, want both credentials' errors", r.err)
	}
	var users []string
	for _, c := range h.client.Calls() {
		if req, ok := c.Request.(*runtimeapi.PullImageRequest); ok {
			users = append(users, req.Auth.GetUsername())
		}
	}
	if diff := cmp.Diff([]string{"a", "b"}, users); diff != "" {
		t.Errorf("PullImage attempts by user (-want +got):\n%s", diff)
	}
}

// A long pull logs its progress every ProgressInterval.
func TestPullLogsProgress(t *testing.T) {
	logged := make(chan string, 8)
	log := zaptest.NewLogger(t).WithOptions(zap.Hooks(func(e zapcore.Entry) error {
		logged <- e.Message
		return nil
	}))
	h := newPullHarness(t, images.PullerConfig{Logger: log, ProgressInterval: 10 * time.Second})
	ch := h.pull(context.Background(), "reg/big:1")
	<-h.client.started // the progress ticker exists before the pull starts
	for range 2 {
		h.clk.Step(10 * time.Second)
		if msg := <-logged; msg != "pulling image: still in progress" {
			t.Fatalf("logged %q, want the progress line", msg)
		}
	}
	h.client.release <- struct{}{}
	if r := <-ch; r.err != nil || r.res.Pull != 20*time.Second {
		t.Errorf("Pull() = %+v, want a 20s pull", r)
	}
}

func TestNewPullerValidates(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	if _, err := images.NewPuller(images.PullerConfig{Client: critest.New(clk), Clock: clk, Logger: zaptest.NewLogger(t), MaxParallel: -1}); err == nil {
		t.Error("NewPuller(MaxParallel: -1) succeeded")
	}
	if _, err := images.NewPuller(images.PullerConfig{Clock: clk, Logger: zaptest.NewLogger(t)}); err == nil {
		t.Error("NewPuller() without a client succeeded")
	}
}
