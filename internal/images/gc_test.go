package images_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/cri/critest"
	"github.com/nodeagent/nodeagent/internal/images"
)

// gcHarness is a GC over critest.Fake with a file system of 1000 bytes
// whose free space the test sets.
type gcHarness struct {
	t      *testing.T
	clk    *testclock.FakeClock
	fake   *critest.Fake
	gc     *images.GC
	mu     sync.Mutex
	avail  uint64
	events []string
}

func newGCHarness(t *testing.T, cfg images.GCConfig) *gcHarness {
	t.Helper()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &gcHarness{t: t, clk: clk, fake: critest.New(clk), avail: 1000}
	h.fake.SetImageFs("/var/lib/containerd/snapshots")
	cfg.Client, cfg.Clock, cfg.Logger = h.fake, clk, zaptest.NewLogger(t)
	cfg.Stat = func(path string) (uint64, uint64, error) {
		if path != "/var/lib/containerd/snapshots" {
			t.Errorf("stat of %q, want the mount point ImageFsInfo reports", path)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return 1000, h.avail, nil
	}
	cfg.Event = func(_, reason, msg string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, reason+": "+msg)
	}
	gc, err := images.NewGC(cfg)
	if err != nil {
		t.Fatalf("NewGC() error = %v", err)
	}
	h.gc = gc
	return h
}

func (h *gcHarness) setAvailable(n uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.avail = n
}

// image adds an image of size bytes whose ID is "id-<name>".
func (h *gcHarness) image(name string, size uint64, pinned bool) {
	h.fake.SetImage(name, "id-"+name, size, pinned)
}

// container creates a container of image (in a fresh sandbox); exited
// makes it exited.
func (h *gcHarness) container(image string, exited bool) string {
	h.t.Helper()
	ctx := context.Background()
	sb, err := h.fake.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-" + image, Uid: "u-" + image}}})
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := h.fake.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: image}}})
	if err != nil {
		h.t.Fatal(err)
	}
	if exited {
		if err := h.fake.ExitContainer(c.ContainerId, 0, "Completed"); err != nil {
			h.t.Fatal(err)
		}
	}
	return c.ContainerId
}

func (h *gcHarness) removeContainer(id string) {
	h.t.Helper()
	if _, err := h.fake.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		h.t.Fatal(err)
	}
}

// collect runs one collection and returns the images removed by it, in
// order.
func (h *gcHarness) collect() ([]string, error) {
	h.fake.ResetCalls()
	err := h.gc.GarbageCollect(context.Background())
	var removed []string
	for _, c := range h.fake.Calls() {
		if c.Method == "RemoveImage" {
			removed = append(removed, c.Request.(*runtimeapi.RemoveImageRequest).Image.Image)
		}
	}
	return removed, err
}

var defaultGC = images.GCConfig{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

// The images of every case: a pinned one, one a running container uses,
// one an exited container uses, and unused ones of several sizes.
func (h *gcHarness) standardImages() {
	h.image("pause", 50, true)
	h.image("running", 100, false)
	h.image("exited", 100, false)
	h.image("a", 100, false)
	h.image("b", 200, false)
	h.image("c", 300, false)
	h.container("running", false)
	h.container("exited", true)
}

func TestGCThresholds(t *testing.T) {
	tests := []struct {
		name        string
		avail       uint64
		low         int
		wantRemoved []string
		wantErr     string
	}{
		// Below the low threshold of 80% means 200 of the 1000 bytes free.
		{name: "under the high threshold: nothing", avail: 160, low: 80},
		{name: "at the high threshold: down to below the low one", avail: 150, low: 80,
			// 50 bytes to free: the least recently used image suffices.
			wantRemoved: []string{"id-a"}},
		{name: "needs two images", avail: 50, low: 80, wantRemoved: []string{"id-a", "id-b"}},
		{name: "cannot free enough: every unused image, and an error", avail: 0, low: 10,
			wantRemoved: []string{"id-a", "id-b", "id-c"}, wantErr: "Attempted to free 900 bytes, but only found 600 bytes eligible"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultGC
			cfg.LowThresholdPercent = tt.low
			h := newGCHarness(t, cfg)
			h.standardImages()
			// First seen now; collected once they are old enough.
			if removed, err := h.collect(); err != nil || len(removed) != 0 {
				t.Fatalf("first collection = %v, %v; want nothing removed", removed, err)
			}
			h.clk.Step(3 * time.Minute)
			h.setAvailable(tt.avail)
			removed, err := h.collect()
			if diff := cmp.Diff(tt.wantRemoved, removed); diff != "" {
				t.Errorf("removed (-want +got):\n%s", diff)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("GarbageCollect() error = %v, want %q", err, tt.wantErr)
			}
			if tt.wantErr != "" && (len(h.events) != 1 || !strings.HasPrefix(h.events[0], images.EventFreeDiskSpaceFailed+": ")) {
				t.Errorf("events = %q, want one FreeDiskSpaceFailed", h.events)
			}
			for _, keep := range []string{"pause", "running", "exited"} {
				if !contains(h.fake.Images(), keep) {
					t.Errorf("image %s was removed", keep)
				}
			}
		})
	}
}

// Least recently used first: never used (oldest detected first), then by
// last use.
func TestGCOrder(t *testing.T) {
	cfg := defaultGC
	cfg.LowThresholdPercent = 0 // free everything
	h := newGCHarness(t, cfg)
	h.image("used-long-ago", 100, false)
	h.image("used-lately", 100, false)
	h.image("never-used-old", 100, false)
	old := h.container("used-long-ago", true)
	late := h.container("used-lately", true)
	h.collect()
	h.clk.Step(time.Minute)
	h.removeContainer(old)
	h.image("never-used-new", 100, false)
	h.collect()
	h.clk.Step(time.Minute)
	h.removeContainer(late)
	h.collect()
	h.clk.Step(3 * time.Minute)
	h.setAvailable(0)
	removed, _ := h.collect()
	want := []string{"id-never-used-old", "id-never-used-new", "id-used-long-ago", "id-used-lately"}
	if diff := cmp.Diff(want, removed); diff != "" {
		t.Errorf("removal order (-want +got):\n%s", diff)
	}
}

func TestGCMinimumAge(t *testing.T) {
	h := newGCHarness(t, defaultGC)
	h.image("old", 100, false)
	h.collect()
	h.clk.Step(2 * time.Minute)
	h.image("young", 100, false)
	h.setAvailable(0)
	removed, err := h.collect()
	if diff := cmp.Diff([]string{"id-old"}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	if err == nil {
		t.Error("GarbageCollect() error = nil, want not enough freed")
	}
	h.clk.Step(2 * time.Minute)
	if removed, _ := h.collect(); !cmp.Equal([]string{"id-young"}, removed) {
		t.Errorf("removed after the minimum age = %v, want the young image", removed)
	}
}

func TestGCMaximumAge(t *testing.T) {
	cfg := defaultGC
	cfg.MaxAge = 10 * time.Minute
	h := newGCHarness(t, cfg)
	h.standardImages()
	h.image("was-used", 100, false)
	used := h.container("was-used", true)
	h.collect()
	h.clk.Step(5 * time.Minute)
	h.collect() // was-used last seen in use 5 minutes in
	h.removeContainer(used)
	h.clk.Step(5*time.Minute + time.Second)
	// Usage is low: only age counts. a, b, c were never used and first
	// seen over 10 minutes ago.
	removed, err := h.collect()
	if err != nil {
		t.Fatalf("GarbageCollect() error = %v", err)
	}
	if diff := cmp.Diff([]string{"id-a", "id-b", "id-c"}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	h.clk.Step(5 * time.Minute)
	if removed, _ := h.collect(); !cmp.Equal([]string{"id-was-used"}, removed) {
		t.Errorf("removed 10 minutes after its last use = %v, want was-used", removed)
	}
	if diff := cmp.Diff([]string{"exited", "pause", "running"}, h.fake.Images()); diff != "" {
		t.Errorf("images left (-want +got):\n%s", diff)
	}
}

// The sandbox image is kept even when the runtime does not pin it.
func TestGCSandboxImage(t *testing.T) {
	cfg := defaultGC
	cfg.SandboxImage = "registry/pause:3.10"
	h := newGCHarness(t, cfg)
	h.image("registry/pause:3.10", 50, false)
	h.image("other", 50, false)
	h.collect()
	h.clk.Step(3 * time.Minute)
	h.setAvailable(0)
	removed, _ := h.collect()
	if diff := cmp.Diff([]string{"id-other"}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}

// listSignal is critest.Fake that tells of each ListImages call.
type listSignal struct {
	*critest.Fake
	listed chan struct{}
}

func (l *listSignal) ListImages(ctx context.Context, in *runtimeapi.ListImagesRequest, opts ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	defer func() { l.listed <- struct{}{} }()
	return l.Fake.ListImages(ctx, in, opts...)
}

// Run collects at once and then every Period; one failure is a warning,
// two in a row make an ImageGCFailed node event.
func TestGCRun(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	client := &listSignal{Fake: critest.New(clk), listed: make(chan struct{})}
	client.SetError("ListImages", context.DeadlineExceeded)
	events := make(chan string, 4)
	cfg := defaultGC
	cfg.Client, cfg.Clock, cfg.Logger, cfg.Period = client, clk, zaptest.NewLogger(t), time.Minute
	cfg.Event = func(_, reason, _ string) { events <- reason }
	gc, err := images.NewGC(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); gc.Run(ctx) }()
	<-client.listed // the collection at start; the ticker exists before it
	select {
	case ev := <-events:
		t.Fatalf("event %s after one failure", ev)
	default:
	}
	clk.Step(time.Minute)
	<-client.listed
	if ev := <-events; ev != images.EventImageGCFailed {
		t.Errorf("event = %s, want %s", ev, images.EventImageGCFailed)
	}
	cancel()
	<-done
}

func TestNewGCValidates(t *testing.T) {
	clk := testclock.NewFakeClock(time.Unix(0, 0))
	base := images.GCConfig{Client: critest.New(clk), Clock: clk, Logger: zaptest.NewLogger(t)}
	tests := []struct {
		name string
		mod  func(*images.GCConfig)
	}{
		{"high over 100", func(c *images.GCConfig) { c.HighThresholdPercent = 101 }},
		{"low over high", func(c *images.GCConfig) { c.HighThresholdPercent, c.LowThresholdPercent = 50, 60 }},
		{"negative low", func(c *images.GCConfig) { c.HighThresholdPercent, c.LowThresholdPercent = 50, -1 }},
		{"max age not over min age", func(c *images.GCConfig) { c.MinAge, c.MaxAge = time.Minute, time.Minute }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.mod(&cfg)
			if _, err := images.NewGC(cfg); err == nil {
				t.Error("NewGC() succeeded")
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// An image a container mounts as an image volume (named in its
// AnnotationImageVolumes) is in use as long as the container exists.
func TestGCImageVolumeInUse(t *testing.T) {
	cfg := defaultGC
	cfg.MaxAge = 3 * time.Minute
	h := newGCHarness(t, cfg)
	h.image("app", 100, false)
	h.image("tools", 100, false)
	h.image("unused", 100, false)
	ctx := context.Background()
	sb, err := h.fake.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.fake.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "app"},
		Annotations: map[string]string{images.AnnotationImageVolumes: "id-tools"}}}); err != nil {
		t.Fatal(err)
	}
	h.collect()
	h.clk.Step(4 * time.Minute) // every image older than MaxAge
	removed, err := h.collect()
	if err != nil {
		t.Fatalf("GarbageCollect() error = %v", err)
	}
	if diff := cmp.Diff([]string{"id-unused"}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
}
