package volume

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
)

// ErrTooManyFiles is DiskUsage's answer for a tree with more entries
// than it counts.
var ErrTooManyFiles = errors.New("too many files to count")

// DiskUsage is the space a directory tree takes on disk, as du counts it
// (allocated blocks, each inode once, symlinks not followed, not past a
// mount point beneath it), reading at most maxEntries entries and giving
// up when ctx ends: a pod's volume is the pod's to fill with a million
// files. What was counted before an error is returned with it.
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
	seen := map[uint64]bool{}
	entries := 0
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone or unreadable: not counted
		}
		if entries++; entries > maxEntries {
			return ErrTooManyFiles
		}
		if entries%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		var st syscall.Stat_t
		if syscall.Lstat(path, &st) != nil {
			return nil
		}
		if st.Dev != root.Dev {
			if d.IsDir() {
				return filepath.SkipDir // another file system mounted beneath
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		used += st.Blocks * 512
		inodes++
		return nil
	})
	return used, inodes, err
}
