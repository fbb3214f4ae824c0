package volume

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// EnsureTmpfs makes dir (created with perm if missing) a tmpfs mount of
// at most size bytes (0: the kernel's default, half the memory), mode
// perm, unless it is one already (an agent restart finds its volumes
// mounted). What is mounted under a pod directory is unmounted by
// RemoveAll with the pod.
func EnsureTmpfs(dir string, size int64, perm os.FileMode) error {
	if err := os.MkdirAll(dir, perm); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	mps, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	if slices.Contains(mps, Canonical(dir)) {
		return nil
	}
	opts := "mode=" + strconv.FormatUint(uint64(perm.Perm()), 8)
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// EmptyDirMemory is an emptyDir volume with medium Memory: its directory
// (EmptyDir's) on a tmpfs of at most size bytes, mode 0777.
func EmptyDirMemory(podDir, name string, size int64) (string, error) {
	dir, err := EmptyDir(podDir, name)
	if err != nil {
		return "", err
	}
	if err := EnsureTmpfs(dir, size, 0o777); err != nil {
		return "", fmt.Errorf("emptyDir %q: %w", name, err)
	}
	return dir, nil
}
