package logs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

var testRef = ContainerRef{Namespace: "default", Pod: "web", UID: "uid-1", Container: "app"}

// containerDir makes <root>/default_web_uid-1/app and returns root and it.
func containerDir(t *testing.T) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	dir = filepath.Join(root, "default_web_uid-1", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, dir
}

func write(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o640); err != nil {
		t.Fatal(err)
	}
}

func appendTo(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

func writeGz(t *testing.T, path string, lines ...string) {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write([]byte(strings.Join(lines, "")))
	w.Close()
	if err := os.WriteFile(path, buf.Bytes(), 0o640); err != nil {
		t.Fatal(err)
	}
}

func openDir(t *testing.T, root string) *ContainerDir {
	t.Helper()
	d, err := OpenContainerDir(root, testRef)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// rotatedFixture is a container's logs: instance 0 (the previous one)
// and instance 1 over a gzipped rotated file, a plain one and the live
// one, with a line split across the last two, both streams, and lines
// that are not CRI log lines.
func rotatedFixture(t *testing.T) string {
	root, dir := containerDir(t)
	write(t, filepath.Join(dir, "0.log"), cri(0, "stdout", "F", "prev 1"), cri(1, "stderr", "F", "prev 2"))
	writeGz(t, filepath.Join(dir, "1.log.20240102-030405.gz"),
		cri(10, "stdout", "F", "line 1"), cri(11, "stderr", "F", "line 2"), "not a log line\n", cri(12, "stdout", "F", "line 3"))
	write(t, filepath.Join(dir, "1.log.20240102-030406"),
		cri(13, "stdout", "F", "line 4"), cri(14, "stdout", "F", "line 5"), cri(15, "stdout", "P", "line 6 begun "))
	write(t, filepath.Join(dir, "1.log"),
		cri(16, "stdout", "F", "and ended"), cri(17, "stderr", "F", "line 7"),
		cri(18, "stdout", "P", "line 9 "), cri(19, "stderr", "F", "line 8"), cri(20, "stdout", "F", "interleaved"),
		cri(21, "stdout", "F", "line 10"))
	// Leftovers the reader must not take for logs.
	write(t, filepath.Join(dir, "1.log.20240102-030406.tmp"), cri(99, "stdout", "F", "temporary"))
	return root
}

var fixtureLines = []string{"line 1", "line 2", "line 3", "line 4", "line 5", "line 6 begun and ended",
	"line 7", "line 8", "line 9 interleaved", "line 10"}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

func TestRead(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		want    string
		wantErr error
	}{
		{name: "everything, across rotated and gzipped files", opts: Options{TailLines: -1}, want: lines(fixtureLines...)},
		{name: "tail within the live file", opts: Options{TailLines: 2}, want: lines("line 9 interleaved", "line 10")},
		{name: "tail: the live file's lines but the one begun before it", opts: Options{TailLines: 4},
			want: lines("line 7", "line 8", "line 9 interleaved", "line 10")},
		{name: "tail: a line begun in the file before is whole", opts: Options{TailLines: 5},
			want: lines(fixtureLines[5:]...)},
		{name: "tail into the gzipped file", opts: Options{TailLines: 8}, want: lines(fixtureLines[2:]...)},
		{name: "tail beyond the start", opts: Options{TailLines: 100}, want: lines(fixtureLines...)},
		{name: "tail 0", opts: Options{TailLines: 0}, want: ""},
		{name: "since", opts: Options{TailLines: -1, SinceTime: at(14)}, want: lines(fixtureLines[4:]...)},
		{name: "since and tail", opts: Options{TailLines: 3, SinceTime: at(19)}, want: lines("line 8", "line 10")},
		{name: "timestamps", opts: Options{TailLines: 2, Timestamps: true},
			want: lines("2024-01-02T03:04:05.018000000Z line 9 interleaved", "2024-01-02T03:04:05.021000000Z line 10")},
		{name: "limit bytes", opts: Options{TailLines: -1, LimitBytes: 10}, want: "line 1\nlin"},
		{name: "limit bytes after tail", opts: Options{TailLines: 1, LimitBytes: 100}, want: "line 10\n"},
		{name: "previous", opts: Options{TailLines: -1, Previous: true}, want: lines("prev 1", "prev 2")},
		{name: "previous, follow ends at its end", opts: Options{TailLines: -1, Previous: true, Follow: true},
			want: lines("prev 1", "prev 2")},
		{name: "previous when the latest exited and waits for its restart: the latest", opts: Options{TailLines: -1, Previous: true, LatestIsPrevious: true},
			want: lines(fixtureLines...)},
		{name: "previous of an exited latest is not followed", opts: Options{TailLines: 1, Previous: true, LatestIsPrevious: true, Follow: true},
			want: lines("line 10")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := openDir(t, rotatedFixture(t))
			var buf bytes.Buffer
			err := Read(context.Background(), d, tt.opts, &buf)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestReadNotFound(t *testing.T) {
	root, dir := containerDir(t)
	d := openDir(t, root)
	if err := Read(context.Background(), d, Options{TailLines: -1}, &bytes.Buffer{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("no log: err = %v, want ErrNotFound", err)
	}
	write(t, filepath.Join(dir, "0.log"), cri(1, "stdout", "F", "x"))
	if err := Read(context.Background(), d, Options{TailLines: -1, Previous: true}, &bytes.Buffer{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("no previous instance: err = %v, want ErrNotFound", err)
	}
	if _, err := OpenContainerDir(root, ContainerRef{Namespace: "default", Pod: "web", UID: "uid-1", Container: "other"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("no container directory: err = %v, want ErrNotFound", err)
	}
}

func TestReadRefusesEscapes(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "0.log")
	write(t, secret, cri(1, "stdout", "F", "secret"))
	if err := os.MkdirAll(filepath.Join(outside, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(outside, "app", "0.log"), cri(1, "stdout", "F", "secret"))

	tests := []struct {
		name  string
		plant func(t *testing.T, root, dir string)
	}{
		{name: "live log is a symlink", plant: func(t *testing.T, root, dir string) {
			os.Symlink(secret, filepath.Join(dir, "0.log"))
		}},
		{name: "rotated log is a symlink", plant: func(t *testing.T, root, dir string) {
			os.Symlink(secret, filepath.Join(dir, "0.log.20240102-030405"))
			write(t, filepath.Join(dir, "0.log"), cri(2, "stdout", "F", "mine"))
		}},
		{name: "container directory is a symlink", plant: func(t *testing.T, root, dir string) {
			os.RemoveAll(dir)
			os.Symlink(filepath.Join(outside, "app"), dir)
		}},
		{name: "pod directory is a symlink", plant: func(t *testing.T, root, dir string) {
			os.RemoveAll(filepath.Dir(dir))
			os.Symlink(outside, filepath.Dir(dir))
		}},
		{name: "container directory is a relative symlink to another pod's", plant: func(t *testing.T, root, dir string) {
			other := filepath.Join(root, "default_other_uid-2", "app")
			os.MkdirAll(other, 0o755)
			write(t, filepath.Join(other, "0.log"), cri(1, "stdout", "F", "secret"))
			os.RemoveAll(dir)
			os.Symlink("../default_other_uid-2/app", dir)
		}},
		{name: "live log is a FIFO", plant: func(t *testing.T, root, dir string) {
			if err := mkfifo(filepath.Join(dir, "0.log")); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := containerDir(t)
			tt.plant(t, root, dir)
			var buf bytes.Buffer
			d, err := OpenContainerDir(root, testRef)
			if err == nil {
				defer d.Close()
				err = Read(context.Background(), d, Options{TailLines: -1}, &buf)
			}
			if !errors.Is(err, ErrUnsafePath) {
				t.Errorf("err = %v, want ErrUnsafePath", err)
			}
			if strings.Contains(buf.String(), "secret") {
				t.Errorf("read through the planted file: %q", buf.String())
			}
		})
	}
}

func TestContainerRefValidation(t *testing.T) {
	root := rotatedFixture(t)
	// Another pod whose directory a crafted name could reach.
	os.MkdirAll(filepath.Join(root, "kube-system_secret_uid-9", "app"), 0o755)
	tests := []struct {
		name string
		ref  ContainerRef
	}{
		{name: "namespace with a slash", ref: ContainerRef{Namespace: "a/b", Pod: "web", UID: "u", Container: "app"}},
		{name: "namespace with an underscore", ref: ContainerRef{Namespace: "kube-system_secret", Pod: "x", UID: "uid-9", Container: "app"}},
		{name: "pod name with an underscore", ref: ContainerRef{Namespace: "kube-system", Pod: "secret_uid-9", UID: "x", Container: "app"}},
		{name: "pod name ..", ref: ContainerRef{Namespace: "default", Pod: "..", UID: "u", Container: "app"}},
		{name: "pod name with a slash", ref: ContainerRef{Namespace: "default", Pod: "web/../x", UID: "u", Container: "app"}},
		{name: "container ..", ref: ContainerRef{Namespace: "default", Pod: "web", UID: "uid-1", Container: ".."}},
		{name: "container with a slash", ref: ContainerRef{Namespace: "default", Pod: "web", UID: "uid-1", Container: "app/../app"}},
		{name: "uid with a slash", ref: ContainerRef{Namespace: "default", Pod: "web", UID: "uid-1/../../kube-system_secret_uid-9", Container: "app"}},
		{name: "empty uid", ref: ContainerRef{Namespace: "default", Pod: "web", Container: "app"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := OpenContainerDir(root, tt.ref)
			if err == nil {
				d.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), "invalid container log reference") {
				t.Errorf("err = %v, want a validation error", err)
			}
		})
	}
}

// signalWriter collects output and signals each write.
type signalWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
	done  <-chan error // Read's result, when following
}

func newSignalWriter() *signalWriter { return &signalWriter{wrote: make(chan struct{}, 1)} }

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitFor waits until the output ends with want (bounded: a reader that
// stops reading fails the test rather than hanging it).
func (w *signalWriter) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for !strings.HasSuffix(w.String(), want) {
		select {
		case <-w.wrote:
		case err := <-w.done:
			t.Fatalf("Read returned (%v); output does not end with %q:\n%s", err, want, w.String())
		case <-deadline.C:
			t.Fatalf("output does not end with %q:\n%s", want, w.String())
		}
	}
}

// follow starts Read with Follow and returns its error channel.
func follow(t *testing.T, root string, opts Options, w *signalWriter) <-chan error {
	t.Helper()
	d := openDir(t, root)
	ctx, cancel := context.WithCancel(context.Background())
	done, finished := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(finished)
		done <- Read(ctx, d, opts, w)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	w.done = done
	return done
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Read did not return")
		return nil
	}
}

// runtimeLog writes a container's live log as a runtime does: through
// an open file, which it closes only once it has reopened the log, so
// the writer's close comes after the rotation's rename.
type runtimeLog struct {
	t    *testing.T
	path string
	f    *os.File
}

func newRuntimeLog(t *testing.T, path string) *runtimeLog {
	l := &runtimeLog{t: t, path: path}
	l.f = l.open()
	t.Cleanup(func() { l.f.Close() })
	return l
}

func (l *runtimeLog) open() *os.File {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		l.t.Fatal(err)
	}
	return f
}

func (l *runtimeLog) write(lines ...string) { writeTo(l.t, l.f, lines...) }

func writeTo(t *testing.T, f *os.File, lines ...string) {
	t.Helper()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

// reopen opens a new live file and returns the old one, still open.
func (l *runtimeLog) reopen() *os.File {
	old := l.f
	l.f = l.open()
	return old
}

// rotate renames the live file to name, reopens and closes the old one.
func (l *runtimeLog) rotate(name string) {
	if err := os.Rename(l.path, name); err != nil {
		l.t.Fatal(err)
	}
	l.reopen().Close()
}

// A rotation step by step, each intermediate state seen by the reader:
// the live file renamed, written to after the rename (the runtime has
// not reopened yet), a new empty live file (the runtime may still write
// to the old one), the new file written to while the old writer still
// writes (the old file comes first), a line begun in the old file and
// ended in the new; then rotations and compressions faster than the
// reader may look. The fake clock never moves: the reader moves on at the
// runtime's close of the old file, not after a timeout.
func TestFollowAcrossRotations(t *testing.T) {
	root, dir := containerDir(t)
	live := filepath.Join(dir, "0.log")
	rot := func(s string) string { return filepath.Join(dir, "0.log.20240102-0304"+s) }
	rl := newRuntimeLog(t, live)
	rl.write(cri(1, "stdout", "F", "line 1"), cri(2, "stderr", "F", "line 2"))
	exited := make(chan struct{})
	w := newSignalWriter()
	clk := clocktesting.NewFakeClock(t0)
	done := follow(t, root, Options{TailLines: -1, Follow: true, Exited: exited, Clock: clk}, w)
	w.waitFor(t, lines("line 1", "line 2"))

	rl.write(cri(3, "stdout", "F", "line 3"))
	w.waitFor(t, "line 3\n")

	if err := os.Rename(live, rot("05")); err != nil {
		t.Fatal(err)
	}
	rl.write(cri(4, "stdout", "F", "line 4 (renamed, not reopened)"))
	w.waitFor(t, "line 4 (renamed, not reopened)\n")

	old := rl.reopen()
	writeTo(t, old, cri(5, "stderr", "F", "line 5 (reopened, old writer)"))
	w.waitFor(t, "line 5 (reopened, old writer)\n")

	rl.write(cri(7, "stdout", "F", "line 7 (new writer)"))
	writeTo(t, old, cri(6, "stdout", "F", "line 6 (old writer, late)"))
	old.Close()
	w.waitFor(t, lines("line 6 (old writer, late)", "line 7 (new writer)"))

	// Two rotations, the older file compressed, before the reader may
	// have looked at all; a line begun before the first, ended after.
	rl.write(cri(8, "stdout", "F", "line 8"), cri(9, "stdout", "P", "line 9 begun in the old file, "))
	rl.rotate(rot("06"))
	rl.write(cri(10, "stdout", "F", "ended in the new"), cri(11, "stdout", "F", "line 10"))
	if err := compress(rot("05")); err != nil {
		t.Fatal(err)
	}
	rl.rotate(rot("06_001"))
	rl.write(cri(12, "stderr", "F", "line 11"))
	if err := compress(rot("06")); err != nil {
		t.Fatal(err)
	}
	rl.write(cri(13, "stdout", "F", "line 12"))
	w.waitFor(t, "line 12\n")

	rl.write(cri(14, "stdout", "P", "unfinished"))
	close(exited)
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	want := lines("line 1", "line 2", "line 3", "line 4 (renamed, not reopened)", "line 5 (reopened, old writer)",
		"line 6 (old writer, late)", "line 7 (new writer)", "line 8", "line 9 begun in the old file, ended in the new",
		"line 10", "line 11", "line 12") + "unfinished"
	if got := w.String(); got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}
}

// One pass at a time (step), the runtime's close faked: the reader
// stays on the rotated file until its writer closed it; without a close,
// it moves on after writerCloseWait and still reads the old file for
// drainGrace, then lets it go.
func TestFollowStepWaitsForTheWriter(t *testing.T) {
	root, dir := containerDir(t)
	live := filepath.Join(dir, "0.log")
	rot1, rot2 := filepath.Join(dir, "0.log.20240102-030405"), filepath.Join(dir, "0.log.20240102-030406")
	write(t, live, cri(1, "stdout", "F", "line 1"))
	clk := clocktesting.NewFakeClock(t0)
	var out bytes.Buffer
	closed := map[string]bool{}
	r := newReader(openDir(t, root), 0, Options{TailLines: -1, Follow: true, Clock: clk}, &out)
	defer r.close()
	r.writerClosed = func(name string) bool { return closed[name] }
	r.closeWait = writerCloseWait
	if err := r.start(false); err != nil {
		t.Fatal(err)
	}
	step := func(want string) {
		t.Helper()
		over, err := r.step(false)
		if err != nil || over {
			t.Fatalf("step: over %v, %v", over, err)
		}
		if out.String() != want {
			t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
		}
	}
	step(lines("line 1"))

	os.Rename(live, rot1)
	write(t, live, cri(3, "stdout", "F", "line 3"))
	step(lines("line 1")) // the new file has data, the old one is not closed
	appendTo(t, rot1, cri(2, "stdout", "F", "line 2"))
	step(lines("line 1", "line 2"))
	closed[filepath.Base(rot1)] = true
	step(lines("line 1", "line 2", "line 3"))

	// No close: the next file after writerCloseWait, and the old one
	// still read for drainGrace.
	os.Rename(live, rot2)
	write(t, live, cri(5, "stdout", "F", "line 5"))
	step(lines("line 1", "line 2", "line 3"))
	clk.Step(writerCloseWait)
	step(lines("line 1", "line 2", "line 3", "line 5"))
	appendTo(t, rot2, cri(4, "stdout", "F", "line 4, late"))
	step(lines("line 1", "line 2", "line 3", "line 5", "line 4, late"))
	if !openHere(t, rot2) {
		t.Errorf("%s not open within the grace", rot2)
	}
	clk.Step(drainGrace)
	step(lines("line 1", "line 2", "line 3", "line 5", "line 4, late"))
	if openHere(t, rot2) {
		t.Errorf("%s still open past the grace", rot2)
	}
	over, err := r.step(true)
	if err != nil || !over {
		t.Errorf("step(exited): over %v, %v", over, err)
	}
}

func TestFollowEnds(t *testing.T) {
	t.Run("a newer instance's log appears", func(t *testing.T) {
		root, dir := containerDir(t)
		write(t, filepath.Join(dir, "0.log"), cri(1, "stdout", "F", "first"))
		w := newSignalWriter()
		done := follow(t, root, Options{TailLines: -1, Follow: true, Clock: clocktesting.NewFakeClock(t0)}, w)
		w.waitFor(t, "first\n")
		appendTo(t, filepath.Join(dir, "0.log"), cri(2, "stdout", "F", "last"))
		write(t, filepath.Join(dir, "1.log"), cri(3, "stdout", "F", "next instance"))
		if err := wait(t, done); err != nil {
			t.Fatal(err)
		}
		if got, want := w.String(), lines("first", "last"); got != want {
			t.Errorf("output %q, want %q", got, want)
		}
	})
	t.Run("context ends", func(t *testing.T) {
		root, dir := containerDir(t)
		write(t, filepath.Join(dir, "0.log"), cri(1, "stdout", "F", "first"))
		d := openDir(t, root)
		ctx, cancel := context.WithCancel(context.Background())
		w := newSignalWriter()
		done := make(chan error, 1)
		go func() {
			done <- Read(ctx, d, Options{TailLines: -1, Follow: true, Clock: clocktesting.NewFakeClock(t0)}, w)
		}()
		w.waitFor(t, "first\n")
		cancel()
		if err := wait(t, done); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
	t.Run("tail then follow", func(t *testing.T) {
		root, dir := containerDir(t)
		write(t, filepath.Join(dir, "0.log"), cri(1, "stdout", "F", "a"), cri(2, "stdout", "F", "b"), cri(3, "stdout", "F", "c"))
		exited := make(chan struct{})
		w := newSignalWriter()
		done := follow(t, root, Options{TailLines: 1, Follow: true, Exited: exited, Clock: clocktesting.NewFakeClock(t0)}, w)
		w.waitFor(t, "c\n")
		appendTo(t, filepath.Join(dir, "0.log"), cri(4, "stdout", "F", "d"))
		w.waitFor(t, "d\n")
		close(exited)
		if err := wait(t, done); err != nil {
			t.Fatal(err)
		}
		if got, want := w.String(), lines("c", "d"); got != want {
			t.Errorf("output %q, want %q", got, want)
		}
	})
}

// runtimeWriter writes numbered CRI log lines to a container's live log
// as a runtime does: through an open file, switched to a new one when
// the log is reopened (fakeRuntime.onReopen).
type runtimeWriter struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

func (rw *runtimeWriter) reopen() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	f, err := os.OpenFile(rw.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		panic(err)
	}
	rw.f.Close()
	rw.f = f
}

func (rw *runtimeWriter) line(i int) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	stream := "stdout"
	if i%3 == 0 {
		stream = "stderr"
	}
	// Every fifth line in two fragments.
	if i%5 == 0 {
		rw.f.WriteString(cri(i, stream, "P", fmt.Sprintf("line %04d ", i)))
		rw.f.WriteString(cri(i, stream, "F", "in two"))
		return
	}
	rw.f.WriteString(cri(i, stream, "F", fmt.Sprintf("line %04d", i)))
}

func wantLine(i int) string {
	if i%5 == 0 {
		return fmt.Sprintf("line %04d in two", i)
	}
	return fmt.Sprintf("line %04d", i)
}

// A writer as fast as it goes, rotated by the real Manager (rename,
// reopen, compression) over and over while the reader follows: every
// line comes out exactly once, in order.
func TestFollowRotatedByTheManager(t *testing.T) {
	const n = 3000
	root, dir := containerDir(t)
	live := filepath.Join(dir, "0.log")
	rw := &runtimeWriter{path: live}
	rw.reopen()
	defer func() { rw.f.Close() }()
	rt := &fakeRuntime{
		containers: []*runtimeapi.Container{runningContainer("c1", ownLabels)},
		logPaths:   map[string]string{"c1": live},
		onReopen:   rw.reopen,
	}
	clk := clocktesting.NewFakeClock(now)
	// Enough files that the reader never falls a whole log behind.
	m := newTestManager(t, rt, clk, 4096, 1000)

	exited := make(chan struct{})
	w := newSignalWriter()
	done := follow(t, root, Options{TailLines: -1, Follow: true, Exited: exited, Clock: clocktesting.NewFakeClock(t0)}, w)

	// The writer writes a batch of lines (~5 KB) while each RotateAll
	// runs.
	const batch = 100
	batches, wrote := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(wrote)
		i := 1
		for range batches {
			for end := i + batch; i < end; i++ {
				rw.line(i)
			}
		}
	}()
	rotations := 0
	for b := 0; b <= n/batch; b++ {
		if b < n/batch {
			batches <- struct{}{}
		} else {
			close(batches)
			<-wrote
		}
		before := rt.count("reopen")
		if err := m.RotateAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if rt.count("reopen") > before {
			rotations++
			if rotations%2 == 0 {
				clk.Step(time.Second) // else a _<seq> name in the same second
			}
		}
	}
	w.waitFor(t, wantLine(n)+"\n")
	close(exited)
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, wantLine(i))
	}
	got := strings.Split(strings.TrimSuffix(w.String(), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		seen := map[string]int{}
		for _, l := range got {
			seen[l]++
		}
		var missing, repeated []string
		for _, l := range want {
			switch seen[l] {
			case 0:
				missing = append(missing, l)
			case 1:
			default:
				repeated = append(repeated, l)
			}
		}
		t.Errorf("%d lines out of %d over %d rotations; missing %d %v; repeated %d %v",
			len(got), n, rotations, len(missing), head(missing), len(repeated), head(repeated))
	}
	if rotations < 5 {
		t.Errorf("%d rotations, want several", rotations)
	}
	t.Logf("%d lines followed across %d rotations", n, rotations)
}

func head(s []string) []string { return s[:min(len(s), 5)] }

func mkfifo(path string) error { return unix.Mkfifo(path, 0o644) }

// openHere reports whether this process has path open.
func openHere(t *testing.T, path string) bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}
