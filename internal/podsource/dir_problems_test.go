package podsource

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

// observedDir is a Dir whose log lines are recorded.
func observedDir(t *testing.T, refuseInsecure bool) (*dirHarness, *observer.ObservedLogs) {
	t.Helper()
	h := newDirHarness(t)
	core, logs := observer.New(zapcore.InfoLevel)
	d, err := NewDir(DirConfig{
		Path: h.path, NodeName: dirNode, Clock: testclock.NewFakeClock(h.clock.Now()), Logger: zap.New(core),
		Sink:           func(pods []*v1.Pod) { h.got = append(h.got, pods) },
		RefuseInsecure: refuseInsecure,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.dir = d
	return h, logs
}

// Every file that yields no pod is listed with its reason; the good pods
// still come through.
func TestDirSkippedFilesAreProblems(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestWeb)
	h.write("configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	h.write("web2.yaml", strings.Replace(manifestWebEdited, "nginx:1.26", "nginx:1.27", 1))
	h.write("long.yaml", strings.Replace(manifestWeb, "name: web", "name: "+strings.Repeat("a", 240), 1))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(syscall.Mkfifo(filepath.Join(h.path, "fifo.yaml"), 0o644))
	must(os.Symlink("/dev/zero", filepath.Join(h.path, "zero.yaml")))
	must(os.Symlink("loop.yaml", filepath.Join(h.path, "loop.yaml")))
	must(os.Symlink(filepath.Join(h.path, "nowhere"), filepath.Join(h.path, "dangling.yaml")))
	must(os.Mkdir(filepath.Join(h.path, "subdir"), 0o755))

	pods := h.relist()
	if got := names(pods); len(got) != 1 || got[0] != "web-node1" {
		t.Fatalf("pods = %v, want only web-node1", got)
	}
	probs := h.dir.Problems()
	want := map[string]string{
		"configmap.yaml": "no Pod in the manifest: document 0 is a v1 ConfigMap",
		"web2.yaml":      "pod default/web-node1 is already defined by",
		"long.yaml":      "metadata.name: too long",
		"fifo.yaml":      "not a regular file (named pipe)",
		"zero.yaml":      "not a regular file (character device)",
		"loop.yaml":      "too many levels of symbolic links",
		"dangling.yaml":  "symlink to a file that does not exist",
	}
	for file, frag := range want {
		if !strings.Contains(probs[file], frag) {
			t.Errorf("problem of %s = %q, want it to mention %q", file, probs[file], frag)
		}
	}
	if len(probs) != len(want) {
		t.Errorf("problems = %v, want exactly %d (the subdirectory is not one)", probs, len(want))
	}
}

// A bad file is logged once per change, not at every relist, and its
// problem clears when it is fixed.
func TestDirBadFileLoggedOncePerChange(t *testing.T) {
	h, logs := observedDir(t, false)
	h.write("bad.yaml", manifestInvalid)
	for range 3 {
		h.relist()
	}
	invalid := func() int {
		return logs.FilterMessageSnippet("manifest is invalid").Len()
	}
	if n := invalid(); n != 1 {
		t.Fatalf("invalid manifest logged %d times over 3 relists, want 1", n)
	}
	for _, e := range logs.All() {
		if e.Level >= zapcore.ErrorLevel {
			t.Errorf("logged at %s: %s", e.Level, e.Message)
		}
	}
	h.write("bad.yaml", manifestBroken)
	h.relist()
	h.relist()
	if n := invalid(); n != 2 {
		t.Fatalf("after a second bad edit: logged %d times, want 2", n)
	}
	h.write("bad.yaml", manifestWeb)
	if got := names(h.relist()); len(got) != 1 {
		t.Fatalf("fixed file gave %v", got)
	}
	if probs := h.dir.Problems(); len(probs) != 0 {
		t.Fatalf("problems after the fix: %v", probs)
	}
}

// An unchanged file is not parsed again: the relist hands over the very
// same pod objects.
func TestDirUnchangedFileNotParsedAgain(t *testing.T) {
	h := newDirHarness(t)
	h.write("web.yaml", manifestWeb)
	first := h.relist()
	second := h.relist()
	if first[0] != second[0] {
		t.Fatal("an unchanged file was parsed again")
	}
}

// A manifest others than root can write is warned about, or refused.
func TestDirInsecurePermissions(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		h, logs := observedDir(t, refuse)
		h.write("web.yaml", manifestWeb)
		if err := os.Chmod(filepath.Join(h.path, "web.yaml"), 0o666); err != nil {
			t.Fatal(err)
		}
		pods := h.relist()
		h.relist()
		if n := logs.FilterMessageSnippet("writable by others than root").Len(); !refuse && n != 1 {
			t.Errorf("refuse=%v: warned %d times over 2 relists, want 1", refuse, n)
		}
		prob := h.dir.Problems()["web.yaml"]
		if refuse {
			if len(pods) != 0 || !strings.Contains(prob, "world-writable") {
				t.Errorf("refuse: pods %v, problem %q; want no pod and the reason", names(pods), prob)
			}
		} else if len(pods) != 1 || prob != "" {
			t.Errorf("warn: pods %v, problem %q; want the pod and no problem", names(pods), prob)
		}
	}
}

// A burst of events is collected until a quiet gap, so it costs one
// re-read.
func TestDirCollectBurst(t *testing.T) {
	h := newDirHarness(t)
	ch := make(chan fsnotify.Event, 10)
	ch <- fsnotify.Event{Name: filepath.Join(h.path, "b.yaml")}
	ch <- fsnotify.Event{Name: filepath.Join(h.path, "c.yaml")}
	names := map[string]bool{"a.yaml": true}
	done := make(chan bool)
	go func() { done <- h.dir.collect(ch, names) }()
	// Blocked on the quiet-gap timer, and not before.
	for !h.clock.HasWaiters() {
		runtime.Gosched()
	}
	select {
	case <-done:
		t.Fatal("collect returned before the quiet gap")
	default:
	}
	h.clock.Step(burstQuiet)
	if dirEvent := <-done; dirEvent {
		t.Error("no event was about the directory itself")
	}
	if len(names) != 3 || !names["b.yaml"] || !names["c.yaml"] {
		t.Fatalf("collected %v, want a, b and c", names)
	}
}
