package volume

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// EmptyDir creates (if needed) and returns an emptyDir volume's directory
// under podDir, the kubelet's layout.
func EmptyDir(podDir, name string) (string, error) {
	dir := EmptyDirPath(podDir, name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("create emptyDir: %w", err)
	}
	// 0777 whatever the umask, as the kubelet: containers running as
	// other users must be able to write their emptyDir.
	if err := os.Chmod(dir, 0o777); err != nil {
		return "", fmt.Errorf("create emptyDir: %w", err)
	}
	return dir, nil
}

// CheckHostPath applies a hostPath volume's type: DirectoryOrCreate and
// FileOrCreate create what is missing, the other types check what the
// path resolves to (symlinks followed: the operator wrote the path).
func CheckHostPath(h *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	info, err := os.Stat(h.Path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("hostPath %s: %w", h.Path, err)
	}
	missing := os.IsNotExist(err)
	is := func(want os.FileMode) bool { return !missing && info.Mode().Type() == want }
	fail := func(what string) error {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", h.Path, what)
	}
	switch t {
	case v1.HostPathUnset:
	case v1.HostPathDirectoryOrCreate:
		if missing {
			return os.MkdirAll(h.Path, 0o755)
		}
		if !info.IsDir() {
			return fail("directory")
		}
	case v1.HostPathFileOrCreate:
		if missing {
			if err := os.MkdirAll(filepath.Dir(h.Path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(h.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if !info.Mode().IsRegular() {
			return fail("file")
		}
	case v1.HostPathDirectory:
		if missing || !info.IsDir() {
			return fail("directory")
		}
	case v1.HostPathFile:
		if missing || !info.Mode().IsRegular() {
			return fail("file")
		}
	case v1.HostPathSocket:
		if !is(os.ModeSocket) {
			return fail("socket")
		}
	case v1.HostPathCharDev:
		if !is(os.ModeDevice | os.ModeCharDevice) {
			return fail("character device")
		}
	case v1.HostPathBlockDev:
		if !is(os.ModeDevice) {
			return fail("block device")
		}
	default:
		return fmt.Errorf("hostPath %s: unknown type %q", h.Path, t)
	}
	return nil
}

// EmptyDirPath is an emptyDir volume's directory under podDir (made or not).
func EmptyDirPath(podDir, name string) string {
	return ChildDir(filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir"), name)
}
