package volume

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func statOf(t *testing.T, path string) (os.FileMode, uint32) {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode(), info.Sys().(*syscall.Stat_t).Gid
}

// Every file, directory and symlink gets the fsGroup; files the group's
// read/write (read only for a read-only volume), directories also
// search and setgid; a symlink is not followed. OnRootMismatch walks
// nothing when the root is right already.
func TestSetOwnership(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, nil, 0o600)
	os.MkdirAll(filepath.Join(dir, "sub"), 0o700)
	os.WriteFile(filepath.Join(dir, "sub", "f"), nil, 0o600)
	os.Symlink(outside, filepath.Join(dir, "link"))
	if err := SetOwnership(dir, 1234, false, false); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		dir:                            os.ModeDir | os.ModeSetgid | 0o770 | 0o700,
		filepath.Join(dir, "sub"):      os.ModeDir | os.ModeSetgid | 0o770,
		filepath.Join(dir, "sub", "f"): 0o660,
	} {
		mode, gid := statOf(t, path)
		if gid != 1234 || mode&want != want {
			t.Errorf("%s: mode %v gid %d, want %v and 1234", path, mode, gid, want)
		}
	}
	if _, gid := statOf(t, filepath.Join(dir, "link")); gid != 1234 {
		t.Errorf("symlink gid %d", gid)
	}
	if mode, gid := statOf(t, outside); gid == 1234 || mode.Perm() != 0o600 {
		t.Errorf("the symlink's target was changed: %v %d", mode, gid)
	}

	// Read-only: group read, no write.
	ro := t.TempDir()
	os.WriteFile(filepath.Join(ro, "f"), nil, 0o600)
	if err := SetOwnership(ro, 1234, true, false); err != nil {
		t.Fatal(err)
	}
	if mode, _ := statOf(t, filepath.Join(ro, "f")); mode.Perm() != 0o640 {
		t.Errorf("read-only volume file mode %v, want 0640", mode.Perm())
	}

	// OnRootMismatch: the root is right, a file below is not: left.
	os.WriteFile(filepath.Join(dir, "new"), nil, 0o600)
	os.Lchown(filepath.Join(dir, "new"), -1, 0) // it inherited the setgid directory's group
	if err := SetOwnership(dir, 1234, false, true); err != nil {
		t.Fatal(err)
	}
	if _, gid := statOf(t, filepath.Join(dir, "new")); gid == 1234 {
		t.Error("OnRootMismatch walked a volume whose root was right")
	}
	if err := SetOwnership(dir, 99, false, true); err != nil {
		t.Fatal(err)
	}
	if _, gid := statOf(t, filepath.Join(dir, "new")); gid != 99 {
		t.Error("OnRootMismatch did not walk a volume whose root had another group")
	}
}
