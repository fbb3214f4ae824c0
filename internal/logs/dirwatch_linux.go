package logs

import (
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// dirWatch watches a container's log directory with inotify for a
// follower: every change wakes it, and it learns which files their
// writer closed (IN_CLOSE_WRITE) — how it knows the runtime's old writer
// is done with a rotated file. (fsnotify does not export close events.)
type dirWatch struct {
	file *os.File
	wake chan struct{} // capacity 1
	done chan struct{} // closed when run returns

	mu     sync.Mutex
	closed map[string]bool // names closed by a writer
	lost   bool            // events were lost: closes are unknown
}

// watchDir watches the directory open as dirFD, through its descriptor:
// no path is resolved again.
func watchDir(dirFD int) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	const mask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE |
		unix.IN_CLOSE_WRITE | unix.IN_ONLYDIR
	if _, err := unix.InotifyAddWatch(fd, "/proc/self/fd/"+strconv.Itoa(dirFD), mask); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("watch the log directory: %w", err)
	}
	w := &dirWatch{
		file:   os.NewFile(uintptr(fd), "inotify"),
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		closed: map[string]bool{},
	}
	go w.run()
	return w, nil
}

// close stops the watch and waits for its goroutine.
func (w *dirWatch) close() {
	w.file.Close() // ends the Read in run
	<-w.done
}

func (w *dirWatch) run() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			return // closed
		}
		w.handle(buf[:n])
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *dirWatch) handle(buf []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	inotifyEvents(buf, func(_ int32, mask uint32, name string) {
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			w.lost = true
		case mask&unix.IN_CLOSE_WRITE != 0 && name != "":
			w.closed[name] = true
		}
	})
}

// writerClosed reports whether a writer closed the file name since the
// watch began (or events were lost, so nothing is known).
func (w *dirWatch) writerClosed(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lost || w.closed[name]
}

// forget drops the names not in keep, so the set stays small.
func (w *dirWatch) forget(keep func(string) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name := range w.closed {
		if !keep(name) {
			delete(w.closed, name)
		}
	}
}
