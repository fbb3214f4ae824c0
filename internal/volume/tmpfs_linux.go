package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// EnsureTmpfs makes dir, when it does not exist yet, a new directory
// (mode perm) with a tmpfs of at most size bytes (0: the kernel's
// default, half the memory) mounted on it. A directory that exists is
// left as it is: a tmpfs already (an agent restart finds its volumes
// mounted), or a volume an earlier agent version kept on disk — mounting
// over that would hide it from the pod's running containers, which hold
// the disk directory, while later writes went to the tmpfs. What is
// mounted under a pod directory is unmounted by RemoveAll with the pod.
func EnsureTmpfs(dir string, size int64, perm os.FileMode) error {
	if _, err := os.Lstat(dir); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, perm); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	opts := "mode=" + strconv.FormatUint(uint64(perm.Perm()), 8)
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		os.Remove(dir) // so that the next attempt mounts again
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// EmptyDirMemory is an emptyDir volume with medium Memory: EmptyDir's
// directory on a tmpfs of at most size bytes, mode 0777 (one an earlier
// agent version made on disk stays there).
func EmptyDirMemory(podDir, name string, size int64) (string, error) {
	dir := EmptyDirPath(podDir, name)
	if err := EnsureTmpfs(dir, size, 0o777); err != nil {
		return "", fmt.Errorf("emptyDir %q: %w", name, err)
	}
	// 0777 whatever the umask (mode= sets the tmpfs root's).
	if err := os.Chmod(dir, 0o777); err != nil {
		return "", fmt.Errorf("emptyDir %q: %w", name, err)
	}
	return dir, nil
}
