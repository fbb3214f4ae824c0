package volume

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ErrTooManyFiles is DiskUsage's answer for a tree with more entries
// than it counts, or nested deeper than maxDepth (each level holds a
// descriptor while it is read).
var ErrTooManyFiles = errors.New("too many files to count")

// maxDepth bounds the directories DiskUsage descends into.
const maxDepth = 256

// DiskUsage is the space a directory tree takes on disk, as du counts it
// (allocated blocks, each inode once, symlinks not followed, not past a
// mount point beneath it), reading at most maxEntries entries and giving
// up when ctx ends: a pod's volume is the pod's to fill with a million
// files. Directories are read in batches, so a huge one costs no more
// memory than a batch. What was counted before an error is returned
// with it.
func DiskUsage(ctx context.Context, dir string, maxEntries int) (int64, error) {
	used, _, err := DiskUsageInodes(ctx, dir, maxEntries)
	return used, err
}

// DiskUsageInodes is DiskUsage with the number of inodes counted.
func DiskUsageInodes(ctx context.Context, dir string, maxEntries int) (used, inodes int64, err error) {
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		return 0, 0, err
	}
	w := &walker{ctx: ctx, dev: root.Dev, max: maxEntries, seen: map[uint64]bool{}}
	w.add(&root)
	err = w.dir(dir, 0)
	return w.used, w.inodes, err
}

type walker struct {
	ctx          context.Context
	dev          uint64
	max, entries int
	seen         map[uint64]bool // hard-linked inodes counted
	used, inodes int64
}

func (w *walker) add(st *syscall.Stat_t) {
	if st.Nlink > 1 && st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		if w.seen[st.Ino] {
			return
		}
		w.seen[st.Ino] = true
	}
	w.used += st.Blocks * 512
	w.inodes++
}

// dir counts what is beneath path, a directory already counted, depth
// levels below the root.
func (w *walker) dir(path string, depth int) error {
	if depth >= maxDepth {
		return ErrTooManyFiles
	}
	f, err := os.Open(path)
	if err != nil {
		return nil // gone or unreadable: not counted
	}
	defer f.Close()
	for {
		batch, err := f.ReadDir(1024)
		for _, e := range batch {
			if w.entries++; w.entries > w.max {
				return ErrTooManyFiles
			}
			if w.entries%1024 == 0 && w.ctx.Err() != nil {
				return w.ctx.Err()
			}
			p := filepath.Join(path, e.Name())
			var st syscall.Stat_t
			if syscall.Lstat(p, &st) != nil || st.Dev != w.dev {
				continue // gone, or another file system mounted beneath
			}
			w.add(&st)
			if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				if err := w.dir(p, depth+1); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) || len(batch) == 0 {
			return nil
		}
		if err != nil {
			return nil
		}
	}
}
