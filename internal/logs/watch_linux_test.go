package logs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func mkdir(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// New live log files are reported wherever they appear under the root
// (new pod, new container, restarted container); rotated, temporary and
// compressed files, writes, and the files already there are not.
func TestWatcherReportsNewLogFiles(t *testing.T) {
	root := t.TempDir()
	oldC := mkdir(t, filepath.Join(root, "ns_old_1", "c"))
	writeFile(t, filepath.Join(oldC, "0.log"), 10)
	found := make(chan string, 100)
	w, err := newWatcher(root, func(p string) { found <- p }, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.run(ctx) }()

	writeFile(t, filepath.Join(oldC, "0.log"), 20) // a write
	for _, n := range []string{"0.log.20250101-000000", "0.log.20250101-000000.tmp", "0.log.20250101-000000.gz", "x.log", "1.logx"} {
		writeFile(t, filepath.Join(oldC, n), 1)
	}
	writeFile(t, filepath.Join(oldC, "1.log"), 1)                                           // restarted container
	writeFile(t, filepath.Join(mkdir(t, filepath.Join(root, "ns_old_1", "d")), "0.log"), 1) // new container
	writeFile(t, filepath.Join(mkdir(t, filepath.Join(root, "ns_new_2", "c")), "0.log"), 1) // new pod
	sentinel := filepath.Join(oldC, "9.log")
	writeFile(t, sentinel, 1)

	got := map[string]bool{}
	for p := range found {
		if p == sentinel {
			break
		}
		got[p] = true // a file seen both by the scan of its new directory and an event comes twice
	}
	want := map[string]bool{
		filepath.Join(oldC, "1.log"):                  true,
		filepath.Join(root, "ns_old_1", "d", "0.log"): true,
		filepath.Join(root, "ns_new_2", "c", "0.log"): true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reported (-want +got):\n%s", diff)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watcher did not stop")
	}
}

// A new container's log file gets it found by discovery passes at 50ms,
// 100ms, 200ms… after the file appears (the runtime creates it before
// the container runs), not at the next full pass. The test plays the
// watcher (TestWatcherReportsNewLogFiles proves its reports) and reports
// the file once: a second report racing a step of the fake clock would
// arm the timer from a time the clock has already left.
func TestRunFindsNewContainersEarly(t *testing.T) {
	root := t.TempDir()
	live := filepath.Join(root, "ns_p_1", "c", "0.log")
	rt := &fakeRuntime{logPaths: map[string]string{"c1": live}}
	clk := clocktesting.NewFakeClock(now)
	m, err := New(Config{
		Runtime: rt, Labels: ownLabels, MaxSize: 1000, MaxFiles: 5, MaxWorkers: 1,
		MonitorInterval: 10 * time.Second, Clock: clk, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, func() bool { return rt.count("list") == 1 && clk.Waiters() == 1 }) // first pass done; the ticker waits

	// The file appears; the container is listed as running only from the
	// third discovery pass (after 50+100+200ms).
	mkdir(t, filepath.Dir(live))
	writeFile(t, live, 10)
	m.newLog(live)
	waitFor(t, func() bool { return clk.Waiters() == 2 }) // a discovery pass is scheduled
	for i := 0; rt.count("status c1") == 0; i++ {
		if i == 2 {
			rt.mu.Lock()
			rt.containers = []*runtimeapi.Container{runningContainer("c1", ownLabels)}
			rt.mu.Unlock()
		}
		lists := rt.count("list")
		clk.Step(time.Duration(50<<i) * time.Millisecond)
		waitFor(t, func() bool { return rt.count("list") == lists+1 && clk.Waiters() >= 2 })
	}
	if elapsed := clk.Since(now); elapsed != 350*time.Millisecond {
		t.Errorf("found after %v, want 350ms", elapsed)
	}
}
