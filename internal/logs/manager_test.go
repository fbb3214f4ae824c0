package logs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeRuntime serves a fixed container list, ignoring the request's
// filter (so tests see the manager's own check), records calls, returns
// injected errors, and on a successful reopen creates a new live file as
// a runtime does.
type fakeRuntime struct {
	mu         sync.Mutex
	containers []*runtimeapi.Container
	logPaths   map[string]string // by container ID
	reopenErr  error
	listReq    *runtimeapi.ListContainersRequest
	calls      []string
	reopened   chan string // receives the ID of each reopen, when set
	onReopen   func()      // called in each reopen, when set
}

func (f *fakeRuntime) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeRuntime) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeRuntime) ListContainers(_ context.Context, in *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	f.record("list")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listReq = in
	return &runtimeapi.ListContainersResponse{Containers: f.containers}, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, in *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	f.record("status " + in.ContainerId)
	p, ok := f.logPaths[in.ContainerId]
	if !ok {
		return nil, errors.New("no such container")
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: in.ContainerId, LogPath: p}}, nil
}

func (f *fakeRuntime) ReopenContainerLog(_ context.Context, in *runtimeapi.ReopenContainerLogRequest, _ ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error) {
	f.record("reopen " + in.ContainerId)
	if f.onReopen != nil {
		f.onReopen()
	}
	if f.reopened != nil {
		defer func() { f.reopened <- in.ContainerId }()
	}
	if f.reopenErr != nil {
		return nil, f.reopenErr
	}
	lf, err := os.OpenFile(f.logPaths[in.ContainerId], os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ReopenContainerLogResponse{}, lf.Close()
}

var (
	ownLabels = map[string]string{"io.nodeagent.managed": "true", "io.nodeagent.node": "n1"}
	// now is the fake clock's start; its rotated files are named:
	now   = time.Date(2025, 1, 2, 3, 4, 5, 0, time.Local)
	nowTS = "20250102-030405"
)

func runningContainer(id string, labels map[string]string) *runtimeapi.Container {
	return &runtimeapi.Container{Id: id, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Labels: labels}
}

// content is n bytes of log, distinct per size.
func content(n int) []byte {
	b := bytes.Repeat([]byte("y\n"), n/2+1)[:n]
	if n > 0 {
		b[0] = byte('a' + n%26)
	}
	return b
}

func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	if err := os.WriteFile(path, content(n), 0o640); err != nil {
		t.Fatal(err)
	}
}

// listDir returns "name size" for each file of dir; .gz files as
// "name ~N" with N their uncompressed size.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if strings.HasSuffix(e.Name(), ".gz") {
			out = append(out, e.Name()+" ~"+strconv.Itoa(len(gunzip(t, p))))
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Name()+" "+strconv.Itoa(int(info.Size())))
	}
	return out
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

func newTestManager(t *testing.T, rt Runtime, clk *clocktesting.FakeClock, maxSize int64, maxFiles int) *Manager {
	t.Helper()
	m, err := New(Config{
		Runtime: rt, Labels: ownLabels, MaxSize: maxSize, MaxFiles: maxFiles, MaxWorkers: 2,
		MonitorInterval: 10 * time.Second, Clock: clk, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRotateAll(t *testing.T) {
	tests := []struct {
		name      string
		container *runtimeapi.Container
		maxFiles  int
		live      int            // size of 0.log
		existing  map[string]int // other files of the directory and their sizes
		reopenErr error
		want      []string // listDir after one RotateAll
		wantCalls []string
	}{
		{
			name:      "under max size: left alone",
			container: runningContainer("c1", ownLabels), maxFiles: 5, live: 99,
			want:      []string{"0.log 99"},
			wantCalls: []string{"list", "status c1"},
		},
		{
			name:      "at max size: rotated and reopened",
			container: runningContainer("c1", ownLabels), maxFiles: 5, live: 100,
			want:      []string{"0.log 0", "0.log." + nowTS + " 100"},
			wantCalls: []string{"list", "status c1", "reopen c1"},
		},
		{
			name:      "over max size: older rotated files compressed, most recent kept plain",
			container: runningContainer("c1", ownLabels), maxFiles: 5, live: 150,
			existing: map[string]int{"0.log.20240101-000001.gz": 10, "0.log.20240101-000002": 20},
			want: []string{"0.log 0", "0.log.20240101-000001.gz ~10", "0.log.20240101-000002.gz ~20",
				"0.log." + nowTS + " 150"},
			wantCalls: []string{"list", "status c1", "reopen c1"},
		},
		{
			name:      "max files counts the live file: oldest rotated removed",
			container: runningContainer("c1", ownLabels), maxFiles: 3, live: 100,
			existing:  map[string]int{"0.log.20240101-000001.gz": 10, "0.log.20240101-000002.gz": 20, "0.log.20240101-000003": 30},
			want:      []string{"0.log 0", "0.log.20240101-000003.gz ~30", "0.log." + nowTS + " 100"},
			wantCalls: []string{"list", "status c1", "reopen c1"},
		},
		{
			name:      "max files 2: no compressed file is kept",
			container: runningContainer("c1", ownLabels), maxFiles: 2, live: 100,
			existing:  map[string]int{"0.log.20240101-000003": 30},
			want:      []string{"0.log 0", "0.log." + nowTS + " 100"},
			wantCalls: []string{"list", "status c1", "reopen c1"},
		},
		{
			name:      "second rotation within a second gets a sequence suffix",
			container: runningContainer("c1", ownLabels), maxFiles: 5, live: 100,
			existing: map[string]int{"0.log." + nowTS + ".gz": 10, "0.log." + nowTS + "_001": 20},
			want: []string{"0.log 0", "0.log." + nowTS + ".gz ~10", "0.log." + nowTS + "_001.gz ~20",
				"0.log." + nowTS + "_002 100"},
			wantCalls: []string{"list", "status c1", "reopen c1"},
		},
		{
			name:      "reopen failure: renamed back, nothing lost",
			container: runningContainer("c1", ownLabels), maxFiles: 5, live: 100, reopenErr: errors.New("boom"),
			existing:  map[string]int{"0.log.20240101-000002": 20},
			want:      []string{"0.log 100", "0.log.20240101-000002 20"},
			wantCalls: []string{"list", "status c1", "reopen c1"},
		},
		{
			name:      "another node's container: untouched",
			container: runningContainer("c1", map[string]string{"io.nodeagent.managed": "true", "io.nodeagent.node": "n2"}), maxFiles: 5, live: 500,
			want:      []string{"0.log 500"},
			wantCalls: []string{"list"},
		},
		{
			name:      "unmanaged container: untouched",
			container: runningContainer("c1", map[string]string{"io.nodeagent.node": "n1"}), maxFiles: 5, live: 500,
			want:      []string{"0.log 500"},
			wantCalls: []string{"list"},
		},
		{
			name:      "exited container: untouched",
			container: &runtimeapi.Container{Id: "c1", State: runtimeapi.ContainerState_CONTAINER_EXITED, Labels: ownLabels},
			maxFiles:  5, live: 500,
			want:      []string{"0.log 500"},
			wantCalls: []string{"list"},
		},
		{
			name:      "leftovers of an interrupted rotation removed on first sight",
			container: runningContainer("c1", ownLabels), maxFiles: 5, live: 10,
			existing: map[string]int{
				"0.log.20240101-000001": 10, "0.log.20240101-000001.gz": 10, // compressed, original not yet removed
				"0.log.20240101-000002.tmp": 5, // compression cut short
				"1.log":                     7, // another instance's log: not ours to touch
			},
			want:      []string{"0.log 10", "0.log.20240101-000001.gz ~10", "1.log 7"},
			wantCalls: []string{"list", "status c1"},
		},
		{
			name:      "files beyond max files removed on first sight",
			container: runningContainer("c1", ownLabels), maxFiles: 3, live: 10,
			existing:  map[string]int{"0.log.20240101-000001.gz": 1, "0.log.20240101-000002.gz": 2, "0.log.20240101-000003": 3},
			want:      []string{"0.log 10", "0.log.20240101-000002.gz ~2", "0.log.20240101-000003 3"},
			wantCalls: []string{"list", "status c1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			live := filepath.Join(dir, "0.log")
			writeFile(t, live, tt.live)
			for name, n := range tt.existing {
				p := filepath.Join(dir, name)
				if strings.HasSuffix(name, ".gz") {
					var b bytes.Buffer
					w := gzip.NewWriter(&b)
					w.Write(content(n))
					w.Close()
					os.WriteFile(p, b.Bytes(), 0o640)
					continue
				}
				writeFile(t, p, n)
			}
			rt := &fakeRuntime{
				containers: []*runtimeapi.Container{tt.container},
				logPaths:   map[string]string{"c1": live},
				reopenErr:  tt.reopenErr,
			}
			m := newTestManager(t, rt, clocktesting.NewFakeClock(now), 100, tt.maxFiles)
			if err := m.RotateAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, listDir(t, dir)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantCalls, rt.calls); diff != "" {
				t.Errorf("runtime calls (-want +got):\n%s", diff)
			}
			// A rotation moved the old live file, byte for byte.
			if strings.Contains(strings.Join(tt.wantCalls, ","), "reopen") && tt.reopenErr == nil {
				matches, _ := filepath.Glob(filepath.Join(dir, "0.log."+nowTS+"*"))
				newest := slices.Max(matches)
				if got, _ := os.ReadFile(newest); !bytes.Equal(got, content(tt.live)) {
					t.Errorf("%s does not hold the old live file", newest)
				}
			}
		})
	}
}

func TestListAsksForRunningOwnContainers(t *testing.T) {
	rt := &fakeRuntime{}
	m := newTestManager(t, rt, clocktesting.NewFakeClock(now), 100, 5)
	if err := m.RotateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: ownLabels,
	}
	if got := rt.listReq.GetFilter(); got.String() != want.String() {
		t.Errorf("list filter %v, want %v", got, want)
	}
}

// A file rotated repeatedly keeps MaxFiles files: the live one, one plain
// most recent rotation, the rest compressed.
func TestRepeatedRotationKeepsMaxFiles(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "0.log")
	writeFile(t, live, 0)
	rt := &fakeRuntime{containers: []*runtimeapi.Container{runningContainer("c1", ownLabels)}, logPaths: map[string]string{"c1": live}}
	clk := clocktesting.NewFakeClock(now)
	m := newTestManager(t, rt, clk, 100, 4)
	for i := 1; i <= 6; i++ {
		writeFile(t, live, 100+i)
		clk.Step(time.Second)
		if err := m.RotateAll(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ts := func(s int) string { return now.Add(time.Duration(s) * time.Second).Format(timestampFormat) }
	want := []string{"0.log 0", "0.log." + ts(4) + ".gz ~104", "0.log." + ts(5) + ".gz ~105", "0.log." + ts(6) + " 106"}
	if diff := cmp.Diff(want, listDir(t, dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// A growing file is stat'ed again as it nears MaxSize, without listing
// the runtime, and rotated early enough that, at its rate, it does not
// pass MaxSize while the runtime reopens it.
func TestGrowingFileCheckedAheadOfTheInterval(t *testing.T) {
	type step struct {
		advance   time.Duration
		size      int
		pass      bool          // a full pass (RotateAll) rather than CheckDue
		wantNext  time.Duration // from now after the check; 0: none before the next full pass
		rotations int           // so far
	}
	// The file grows at 2000 B/s; MaxSize is 1000.
	tests := []struct {
		name    string
		initial int           // size at the first full pass
		reopen  time.Duration // how long ReopenContainerLog takes
		steps   []step
	}{
		{
			name: "instant reopen", initial: 100,
			steps: []step{
				{0, 100, true, 50 * time.Millisecond, 0},                       // a new file: rate unknown, look again soon
				{50 * time.Millisecond, 200, false, 200 * time.Millisecond, 0}, // halfway to 1000: (1000-200)/2000/2
				{200 * time.Millisecond, 600, false, 100 * time.Millisecond, 0},
				{100 * time.Millisecond, 800, false, 50 * time.Millisecond, 0},
				{50 * time.Millisecond, 900, false, 250 * time.Millisecond, 1}, // 900 + 2000 B/s × 50ms ≥ 1000: rotated
				{250 * time.Millisecond, 500, false, 125 * time.Millisecond, 1},
			},
		},
		{
			name: "checks run late", initial: 100,
			steps: []step{
				{0, 100, true, 50 * time.Millisecond, 0},
				{150 * time.Millisecond, 400, false, 100 * time.Millisecond, 0},   // 100ms late: ((1000-400)/2000 - 0.1)/2
				{100 * time.Millisecond, 600, false, 62500 * time.Microsecond, 0}, // lateness decays to 75ms
			},
		},
		{
			name: "reopen takes 100ms", initial: 1000, reopen: 100 * time.Millisecond,
			steps: []step{
				{0, 1000, true, 50 * time.Millisecond, 1},                      // at MaxSize: rotated at once; rate unknown
				{0, 0, true, 50 * time.Millisecond, 1},                         // a full pass right after keeps the early look
				{50 * time.Millisecond, 100, false, 175 * time.Millisecond, 1}, // ((1000-100)/2000 - 0.1)/2
				{175 * time.Millisecond, 450, false, 87500 * time.Microsecond, 1},
				{87500 * time.Microsecond, 625, false, 50 * time.Millisecond, 1},
				{50 * time.Millisecond, 725, false, 200 * time.Millisecond, 2}, // 725 + 2000 × (50ms + 100ms) ≥ 1000: rotated, ends at 925
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			live := filepath.Join(dir, "0.log")
			clk := clocktesting.NewFakeClock(now)
			rt := &fakeRuntime{containers: []*runtimeapi.Container{runningContainer("c1", ownLabels)}, logPaths: map[string]string{"c1": live},
				onReopen: func() { clk.Step(tt.reopen) }}
			m := newTestManager(t, rt, clk, 1000, 5)
			ctx := context.Background()
			for i, s := range tt.steps {
				clk.Step(s.advance)
				writeFile(t, live, s.size)
				if s.pass || i == 0 {
					if err := m.RotateAll(ctx); err != nil {
						t.Fatal(err)
					}
				} else {
					m.CheckDue(ctx)
				}
				var got time.Duration
				if next := m.nextCheck(); !next.IsZero() {
					got = next.Sub(clk.Now()).Round(time.Microsecond)
				}
				if got != s.wantNext {
					t.Errorf("step %d (size %d): next check in %v, want %v", i, s.size, got, s.wantNext)
				}
				if n := rt.count("reopen"); n != s.rotations {
					t.Errorf("step %d (size %d): %d rotations, want %v", i, s.size, n, s.rotations)
				}
			}
		})
	}
}

// A file that stopped growing costs nothing between full passes.
func TestIdleFileNotCheckedBetweenPasses(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "0.log")
	writeFile(t, live, 100)
	rt := &fakeRuntime{containers: []*runtimeapi.Container{runningContainer("c1", ownLabels)}, logPaths: map[string]string{"c1": live}}
	clk := clocktesting.NewFakeClock(now)
	m := newTestManager(t, rt, clk, 1000, 5)
	m.RotateAll(context.Background())
	clk.Step(50 * time.Millisecond)
	m.CheckDue(context.Background())
	if next := m.nextCheck(); !next.IsZero() {
		t.Errorf("idle file checked again in %v, want only at the next pass", next.Sub(clk.Now()))
	}
}

// A running container whose live file is gone gets it reopened.
func TestMissingLiveFileReopened(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "0.log")
	rt := &fakeRuntime{containers: []*runtimeapi.Container{runningContainer("c1", ownLabels)}, logPaths: map[string]string{"c1": live}}
	m := newTestManager(t, rt, clocktesting.NewFakeClock(now), 100, 5)
	if err := m.RotateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live); err != nil || rt.count("reopen c1") != 1 {
		t.Errorf("live file %v after %v", err, rt.calls)
	}
}

// Run does a pass at once and then every interval.
func TestRunPassesEveryInterval(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "0.log")
	writeFile(t, live, 10)
	rt := &fakeRuntime{
		containers: []*runtimeapi.Container{runningContainer("c1", ownLabels)},
		logPaths:   map[string]string{"c1": live},
		reopened:   make(chan string, 1),
	}
	clk := clocktesting.NewFakeClock(now)
	m := newTestManager(t, rt, clk, 100, 5)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor(t, func() bool { return rt.count("list") == 1 && clk.Waiters() == 2 }) // ticker + first re-check timer
	writeFile(t, live, 500)
	clk.Step(10 * time.Second)
	select {
	case <-rt.reopened:
	case <-time.After(10 * time.Second):
		t.Fatalf("no rotation after an interval; calls %v", rt.calls)
	}
}

// waitFor yields until cond holds: the manager's goroutine reaching a
// state (a list call made, its timers armed on the fake clock), not time
// passing, decides it. The deadline only turns a hang into a failure.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		runtime.Gosched()
	}
}

func TestRotatedName(t *testing.T) {
	ts := "20250102-030405"
	tests := []struct {
		name     string
		existing []string
		want     string
	}{
		{"none", nil, "0.log." + ts},
		{"older", []string{"0.log.20240101-000000.gz"}, "0.log." + ts},
		{"same second", []string{"0.log." + ts + ".gz"}, "0.log." + ts + "_001"},
		{"same second again", []string{"0.log." + ts + ".gz", "0.log." + ts + "_009"}, "0.log." + ts + "_010"},
		{"clock went back", []string{"0.log.20260101-000000"}, "0.log.20260101-000000_001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var existing []rotated
			for _, n := range tt.existing {
				existing = append(existing, parseRotated(n, strings.TrimPrefix(n, "0.log.")))
			}
			if got := rotatedName("0.log", now, existing); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			// Name order is age order.
			all := append(slices.Clone(tt.existing), tt.want)
			if !slices.IsSorted(all) {
				t.Errorf("names out of order: %v", all)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	ok := Config{Runtime: &fakeRuntime{}, Labels: ownLabels, MaxSize: 1, MaxFiles: 2, MaxWorkers: 1,
		MonitorInterval: time.Second, Clock: clocktesting.NewFakeClock(now), Logger: zaptest.NewLogger(t)}
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"valid", func(*Config) {}, ""},
		{"max files 1", func(c *Config) { c.MaxFiles = 1 }, "max files 1: must be >= 2"},
		{"zero size", func(c *Config) { c.MaxSize = 0 }, "max size 0"},
		{"no workers", func(c *Config) { c.MaxWorkers = 0 }, "max workers 0"},
		{"no interval", func(c *Config) { c.MonitorInterval = 0 }, "monitor interval 0s"},
		{"no labels", func(c *Config) { c.Labels = nil }, "Labels or Owns are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.change(&c)
			_, err := New(c)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

// Up to MaxWorkers containers are rotated at once, and no more.
func TestWorkersRotateInParallel(t *testing.T) {
	dir := t.TempDir()
	rt := &fakeRuntime{logPaths: map[string]string{}}
	for _, id := range []string{"c1", "c2", "c3"} {
		p := filepath.Join(dir, id+".log")
		writeFile(t, p, 200)
		rt.containers = append(rt.containers, runningContainer(id, ownLabels))
		rt.logPaths[id] = p
	}
	var (
		mu                sync.Mutex
		arrived, inFlight int
		most              int
		both              = make(chan struct{})
	)
	rt.onReopen = func() {
		mu.Lock()
		arrived++
		inFlight++
		most = max(most, inFlight)
		if arrived == 2 {
			close(both)
		}
		first := arrived <= 2
		mu.Unlock()
		if first {
			// The first two wait for each other: they only both get here
			// if two workers run at once.
			select {
			case <-both:
			case <-time.After(10 * time.Second):
				t.Error("the second rotation did not start while the first was in flight")
			}
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	m := newTestManager(t, rt, clocktesting.NewFakeClock(now), 100, 5) // MaxWorkers 2
	if err := m.RotateAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := rt.count("reopen"); n != 3 || most != 2 {
		t.Errorf("%d rotations, at most %d at once; want 3, 2", n, most)
	}
}

// An agent that took over the kubelet's pods lists every running
// container (no label filter) and rotates those its Owns keeps: the
// kubelet's containers it adopted, not another tool's.
func TestOwnsSelectsAdoptedContainers(t *testing.T) {
	owns := func(l map[string]string) bool {
		return l["io.nodeagent.managed"] == "" && l["io.kubernetes.pod.uid"] != ""
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{name: "the kubelet's container: rotated", labels: map[string]string{"io.kubernetes.pod.uid": "u1"},
			want: []string{"list", "status c1", "reopen c1"}},
		{name: "another tool's container: untouched", labels: map[string]string{"app": "x"}, want: []string{"list"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			live := filepath.Join(dir, "0.log")
			writeFile(t, live, 100)
			rt := &fakeRuntime{containers: []*runtimeapi.Container{runningContainer("c1", tt.labels)}, logPaths: map[string]string{"c1": live}}
			m, err := New(Config{Runtime: rt, Owns: owns, MaxSize: 100, MaxFiles: 5, MaxWorkers: 2,
				MonitorInterval: 10 * time.Second, Clock: clocktesting.NewFakeClock(now), Logger: zaptest.NewLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.RotateAll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, rt.calls); diff != "" {
				t.Errorf("runtime calls (-want +got):\n%s", diff)
			}
			if rt.listReq.GetFilter().GetLabelSelector() != nil {
				t.Errorf("list filter %v; want no label selector", rt.listReq.GetFilter())
			}
		})
	}
}
