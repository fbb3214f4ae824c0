// Package atomicfile writes a file so that readers see the old content or
// the new, never a part: a temporary file in the same directory, renamed
// over the target.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with body, mode perm. With durable, the content is
// synced to disk before the rename (a checkpoint that must survive a
// crash); without, a crash may leave the old content (status files,
// rebuilt at start).
func Write(path string, body []byte, perm os.FileMode, durable bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*") // short: the final name may be long
	if err != nil {
		return err
	}
	name := tmp.Name()
	err = write(tmp, body, perm, durable)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
	}
	return err
}

func write(f *os.File, body []byte, perm os.FileMode, durable bool) error {
	if _, err := f.Write(body); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if durable {
		return f.Sync()
	}
	return nil
}
