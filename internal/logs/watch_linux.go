package logs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Depths below the pod logs root: <root>/<pod>/<container>/<n>.log.
const (
	depthRoot = iota
	depthPod
	depthContainer
)

// watcher reports new container log files under a pod logs root with
// inotify. It watches only creations and moves into directories
// (IN_CREATE, IN_MOVED_TO), never writes, so a busy log costs it nothing.
type watcher struct {
	fd    int
	file  *os.File // fd, for reads the Go poller can interrupt
	dirs  map[int32]watchedDir
	found func(path string)
	log   *zap.Logger
}

type watchedDir struct {
	path  string
	depth int
}

// newWatcher watches the directories under root, creating root if
// needed. The files there already are not reported.
func newWatcher(root string, found func(path string), log *zap.Logger) (*watcher, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &watcher{fd: fd, file: os.NewFile(uintptr(fd), "inotify"), dirs: map[int32]watchedDir{}, found: found, log: log}
	if err := w.add(root, depthRoot, false); err != nil {
		w.file.Close()
		return nil, err
	}
	return w, nil
}

// run calls found with each container log file created under the root
// (and with "" when events were lost), until ctx ends; then it closes
// the watcher.
func (w *watcher) run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { w.file.Close() }) // ends the Read below
	defer func() {
		if stop() {
			w.file.Close()
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("read inotify events: %w", err)
		}
		w.handle(buf[:n])
	}
}

// add watches dir and then looks at what it already holds, so nothing
// created between the directory's creation and the watch is missed.
func (w *watcher) add(dir string, depth int, report bool) error {
	wd, err := unix.InotifyAddWatch(w.fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return nil // gone already, or not a directory
		}
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	w.dirs[int32(wd)] = watchedDir{path: dir, depth: depth}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // removed meanwhile; its IN_IGNORED drops the watch
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, w.child(dir, depth, e.Name(), e.IsDir(), report))
	}
	return errors.Join(errs...)
}

// child handles an entry of a watched directory.
func (w *watcher) child(dir string, depth int, name string, isDir, report bool) error {
	path := filepath.Join(dir, name)
	switch {
	case isDir && depth < depthContainer:
		return w.add(path, depth+1, report)
	case !isDir && depth == depthContainer && report && isLogName(name):
		w.found(path)
	}
	return nil
}

// inotifyEvents calls f with each event of a buffer read from an inotify
// descriptor: its watch, mask and name ("" for the watched directory
// itself). A truncated last event is dropped.
func inotifyEvents(buf []byte, f func(wd int32, mask uint32, name string)) {
	for len(buf) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(buf[0:]))
		mask := binary.NativeEndian.Uint32(buf[4:])
		n := int(binary.NativeEndian.Uint32(buf[12:]))
		if len(buf) < unix.SizeofInotifyEvent+n {
			return
		}
		name := strings.TrimRight(string(buf[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+n]), "\x00")
		buf = buf[unix.SizeofInotifyEvent+n:]
		f(wd, mask, name)
	}
}

// handle parses a buffer of inotify events.
func (w *watcher) handle(buf []byte) {
	inotifyEvents(buf, func(wd int32, mask uint32, name string) {
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			w.found("")
		case mask&unix.IN_IGNORED != 0:
			delete(w.dirs, wd)
		default:
			if d, ok := w.dirs[wd]; ok && name != "" {
				if err := w.child(d.path, d.depth, name, mask&unix.IN_ISDIR != 0, true); err != nil {
					w.log.Warn("watch a new pod log directory; its containers are found at the full passes", zap.Error(err))
				}
			}
		}
	})
}

// isLogName reports whether name is a live container log: <restarts>.log.
func isLogName(name string) bool {
	n, ok := strings.CutSuffix(name, ".log")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
