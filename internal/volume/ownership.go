package volume

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// The kubelet's masks for a volume's files under an fsGroup
// (pkg/volume/volume_linux.go).
const (
	rwMask   = os.FileMode(0o660)
	roMask   = os.FileMode(0o440)
	execMask = os.FileMode(0o110)
)

// SetOwnership gives a volume to the pod's fsGroup as the kubelet's
// SetVolumeOwnership does: every file and directory beneath dir gets
// group gid, read (and, unless readOnly, write) for the group,
// directories also search and setgid (new files inherit the group);
// symlinks are re-grouped, never followed. onRootMismatch is the pod's
// fsGroupChangePolicy OnRootMismatch: nothing is walked when dir itself
// already has the group, the permissions and setgid.
func SetOwnership(dir string, gid int64, readOnly, onRootMismatch bool) error {
	if onRootMismatch && !needsOwnership(dir, gid, readOnly) {
		return nil
	}
	mask := rwMask
	if readOnly {
		mask = roMask
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, int(gid)); err != nil {
			return err
		}
		if info.Mode()&os.ModeSymlink != 0 {
			return nil
		}
		m := mask
		if info.IsDir() {
			m |= os.ModeSetgid | execMask
		}
		return os.Chmod(path, info.Mode()|m)
	})
}

// needsOwnership is the kubelet's requiresPermissionChange: dir lacks the
// group, the permissions or setgid.
func needsOwnership(dir string, gid int64, readOnly bool) bool {
	info, err := os.Stat(dir)
	if err != nil {
		return true
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || int64(st.Gid) != gid || !info.IsDir() {
		return true
	}
	perms := rwMask
	if readOnly {
		perms = roMask
	}
	perms |= execMask
	return info.Mode().Perm()&perms != perms || info.Mode()&os.ModeSetgid == 0
}
