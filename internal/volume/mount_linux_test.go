package volume

import (
	"golang.org/x/sys/unix"
	"os"
	"path/filepath"
	"testing"
)

// The bind-mount paths need root (mount(2)). nodeagent runs as root and
// `make test` (CI) runs as root, so there these always run: under CI a
// missing root is a failure, not a skip. A developer's plain `go test`
// without root skips them with this reason (README, Tests).
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("the subPath bind-mount tests need root (mount(2)); CI must run them")
	}
	t.Skip("needs root for mount(2); `make test` runs as root")
}

// A subPath bind mount shows the checked object; rebinding replaces it;
// RemoveAll of the pod directory unmounts first and never deletes the
// volume's content through the mount — also when the root is reached
// through a symlink.
func TestBindSubPathAndRemoveAll(t *testing.T) {
	requireRoot(t)
	for _, viaSymlink := range []bool{false, true} {
		name := "plain root"
		if viaSymlink {
			name = "root through a symlink"
		}
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			host := filepath.Join(base, "hostdata")
			realRoot := filepath.Join(base, "real-root")
			for _, d := range []string{filepath.Join(host, "sub"), realRoot} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			precious := filepath.Join(host, "sub", "precious")
			if err := os.WriteFile(precious, []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(host, "file"), []byte("f"), 0o644); err != nil {
				t.Fatal(err)
			}
			root := realRoot
			if viaSymlink {
				root = filepath.Join(base, "link-root")
				if err := os.Symlink(realRoot, root); err != nil {
					t.Fatal(err)
				}
			}
			podDir := filepath.Join(root, "pods", "uid1")
			dirTarget := filepath.Join(podDir, "volume-subpaths", "v", "c", "0")
			fileTarget := filepath.Join(podDir, "volume-subpaths", "v", "c", "1")
			t.Cleanup(func() { UnmountUnder(base) })
			if err := BindSubPath(host, "sub", dirTarget); err != nil {
				t.Fatal(err)
			}
			if err := BindSubPath(host, "file", fileTarget); err != nil {
				t.Fatal(err)
			}
			// Bound again (a restarted container): still one mount each.
			if err := BindSubPath(host, "sub", dirTarget); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dirTarget, "precious")); err != nil || string(b) != "keep" {
				t.Fatalf("through the mount: %q, %v", b, err)
			}
			if b, err := os.ReadFile(fileTarget); err != nil || string(b) != "f" {
				t.Fatalf("file mount: %q, %v", b, err)
			}
			mps, err := MountsUnder(podDir)
			if err != nil || len(mps) != 2 {
				t.Fatalf("MountsUnder = %v, %v; want the 2 bind mounts", mps, err)
			}
			if err := RemoveAll(podDir); err != nil {
				t.Fatalf("RemoveAll: %v", err)
			}
			if _, err := os.Stat(podDir); !os.IsNotExist(err) {
				t.Fatalf("pod directory still there: %v", err)
			}
			if b, err := os.ReadFile(precious); err != nil || string(b) != "keep" {
				t.Fatalf("the volume's content was deleted through the mount: %q, %v", b, err)
			}
		})
	}
}

// A symlink planted after the check cannot redirect the mount: what is
// mounted is the opened directory.
func TestBindSubPathRefusesEscape(t *testing.T) {
	requireRoot(t)
	vol, outside := volumeTree(t)
	target := filepath.Join(t.TempDir(), "m")
	t.Cleanup(func() { UnmountUnder(filepath.Dir(target)) })
	if err := BindSubPath(vol, "rel", target); err == nil {
		t.Fatal("bound a symlink that leads out of the volume")
	}
	if mps, _ := MountsUnder(filepath.Dir(target)); len(mps) != 0 {
		t.Fatalf("mounts left: %v", mps)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("outside now holds %d entries", len(entries))
	}
}

// A memory-backed volume is a tmpfs of the given size; ensuring it again
// (an agent restart) mounts nothing more; RemoveAll of the pod directory
// unmounts it.
func TestTmpfsVolumes(t *testing.T) {
	requireRoot(t)
	pod := t.TempDir()
	t.Cleanup(func() { UnmountUnder(pod) }) // also when a check below fails
	dir, err := EmptyDirMemory(pod, "cache", 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC || int64(st.Blocks)*st.Bsize != 8<<20 {
		t.Fatalf("emptyDir: fs type %x, %d bytes; want a tmpfs of 8 MiB", st.Type, int64(st.Blocks)*st.Bsize)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o777 {
		t.Fatalf("emptyDir mode %v, want 0777", fi.Mode().Perm())
	}
	if _, err := EmptyDirMemory(pod, "cache", 8<<20); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(pod, "volumes", "kubernetes.io~secret", "creds")
	if err := EnsureTmpfs(secret, 0, 0o755); err != nil {
		t.Fatal(err)
	}
	// A volume an earlier agent version wrote to disk stays on disk: a
	// tmpfs over it would hide it from the containers holding it.
	old := filepath.Join(pod, "volumes", "kubernetes.io~projected", "token")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := EnsureTmpfs(old, 0, 0o755); err != nil {
		t.Fatal(err)
	}
	mps, err := MountsUnder(pod)
	if err != nil || len(mps) != 2 {
		t.Fatalf("mounts under the pod: %v, %v; want the emptyDir's and the secret's, once each", mps, err)
	}
	if err := RemoveAll(pod); err != nil {
		t.Fatal(err)
	}
	if mps, _ := MountsUnder(pod); len(mps) != 0 {
		t.Fatalf("still mounted after RemoveAll: %v", mps)
	}
	if _, err := os.Stat(pod); !os.IsNotExist(err) {
		t.Fatalf("pod directory left: %v", err)
	}
}
