package volume

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var writeTime = time.Date(2024, 5, 1, 10, 0, 0, 123, time.UTC)

// listing describes a volume as a container sees it: every regular file
// reached through the top-level names, with its mode and content.
func listing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir(%s) error = %v", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		root := filepath.Join(dir, e.Name())
		// Walk through the symlink, as a reader in a container would.
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			t.Fatalf("EvalSymlinks(%s) error = %v", root, err)
		}
		err = filepath.Walk(real, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(real, p)
			name := filepath.ToSlash(filepath.Join(e.Name(), rel))
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[name] = info.Mode().Perm().String() + " " + string(data)
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	return out
}

// hidden lists the writer's reserved entries of dir, sorted.
func hidden(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir(%s) error = %v", dir, err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func mustWrite(t *testing.T, dir string, files map[string]File, now time.Time, wantChanged bool) {
	t.Helper()
	changed, err := WriteAtomic(dir, files, now)
	if err != nil {
		t.Fatalf("WriteAtomic() error = %v", err)
	}
	if changed != wantChanged {
		t.Fatalf("WriteAtomic() changed = %v, want %v", changed, wantChanged)
	}
}

func TestWriteAtomicLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pod", "volumes", "kubernetes.io~configmap", "cfg")
	mustWrite(t, dir, map[string]File{
		"app.conf":      {Data: []byte("a=1"), Mode: 0o644},
		"sub/inner.txt": {Data: []byte("inner"), Mode: 0o600},
		"sub/deep/x":    {Data: []byte("x"), Mode: 0o400},
	}, writeTime, true)

	want := map[string]string{
		"app.conf":      "-rw-r--r-- a=1",
		"sub/inner.txt": "-rw------- inner",
		"sub/deep/x":    "-r-------- x",
	}
	if diff := cmp.Diff(want, listing(t, dir)); diff != "" {
		t.Errorf("volume content (-want +got):\n%s", diff)
	}
	ts := "..2024_05_01_10_00_00.000000123"
	if diff := cmp.Diff([]string{ts, "..data"}, hidden(t, dir)); diff != "" {
		t.Errorf("reserved entries (-want +got):\n%s", diff)
	}
	for link, target := range map[string]string{"..data": ts, "app.conf": "..data/app.conf", "sub": "..data/sub"} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != target {
			t.Errorf("Readlink(%s) = %q, %v; want %q", link, got, err, target)
		}
	}
	for _, d := range []string{dir, filepath.Join(dir, ts), filepath.Join(dir, ts, "sub")} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("mode of %s = %v, %v; want 0755", d, fi.Mode().Perm(), err)
		}
	}
	if fi, err := os.Stat(filepath.Dir(dir)); err != nil || fi.Mode().Perm()&0o007 != 0 {
		t.Errorf("parent of the volume is open to others: %v, %v", fi.Mode().Perm(), err)
	}
}

func TestWriteAtomicUpdates(t *testing.T) {
	base := map[string]File{
		"a":     {Data: []byte("1"), Mode: 0o644},
		"b":     {Data: []byte("2"), Mode: 0o644},
		"dir/c": {Data: []byte("3"), Mode: 0o644},
	}
	with := func(edit func(m map[string]File)) map[string]File {
		m := map[string]File{}
		for k, v := range base {
			m[k] = v
		}
		edit(m)
		return m
	}
	tests := []struct {
		name        string
		next        map[string]File
		wantChanged bool
		want        map[string]string
	}{
		{
			name:        "same content and modes is a no-op",
			next:        with(func(map[string]File) {}),
			wantChanged: false,
			want:        map[string]string{"a": "-rw-r--r-- 1", "b": "-rw-r--r-- 2", "dir/c": "-rw-r--r-- 3"},
		},
		{
			name:        "changed content",
			next:        with(func(m map[string]File) { m["a"] = File{Data: []byte("one"), Mode: 0o644} }),
			wantChanged: true,
			want:        map[string]string{"a": "-rw-r--r-- one", "b": "-rw-r--r-- 2", "dir/c": "-rw-r--r-- 3"},
		},
		{
			name:        "removed key",
			next:        with(func(m map[string]File) { delete(m, "b") }),
			wantChanged: true,
			want:        map[string]string{"a": "-rw-r--r-- 1", "dir/c": "-rw-r--r-- 3"},
		},
		{
			name:        "removed nested key takes its directory",
			next:        with(func(m map[string]File) { delete(m, "dir/c") }),
			wantChanged: true,
			want:        map[string]string{"a": "-rw-r--r-- 1", "b": "-rw-r--r-- 2"},
		},
		{
			name:        "only a mode changes",
			next:        with(func(m map[string]File) { m["b"] = File{Data: []byte("2"), Mode: 0o400} }),
			wantChanged: true,
			want:        map[string]string{"a": "-rw-r--r-- 1", "b": "-r-------- 2", "dir/c": "-rw-r--r-- 3"},
		},
		{
			name:        "added key",
			next:        with(func(m map[string]File) { m["new"] = File{Data: []byte("n"), Mode: 0o644} }),
			wantChanged: true,
			want:        map[string]string{"a": "-rw-r--r-- 1", "b": "-rw-r--r-- 2", "dir/c": "-rw-r--r-- 3", "new": "-rw-r--r-- n"},
		},
		{
			name:        "everything removed",
			next:        map[string]File{},
			wantChanged: true,
			want:        map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			mustWrite(t, dir, base, writeTime, true)
			first, _ := os.Readlink(filepath.Join(dir, "..data"))
			mustWrite(t, dir, tt.next, writeTime.Add(time.Second), tt.wantChanged)
			if diff := cmp.Diff(tt.want, listing(t, dir)); diff != "" {
				t.Errorf("volume content (-want +got):\n%s", diff)
			}
			now, _ := os.Readlink(filepath.Join(dir, "..data"))
			if (now != first) != tt.wantChanged {
				t.Errorf("..data %q -> %q, want a new version = %v", first, now, tt.wantChanged)
			}
			// One version only: the previous one is gone.
			if diff := cmp.Diff([]string{now, "..data"}, hidden(t, dir)); diff != "" {
				t.Errorf("reserved entries (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteAtomicSameInstant(t *testing.T) {
	// A fake clock that does not move still gets distinct versions.
	dir := filepath.Join(t.TempDir(), "vol")
	mustWrite(t, dir, map[string]File{"k": {Data: []byte("1"), Mode: 0o644}}, writeTime, true)
	mustWrite(t, dir, map[string]File{"k": {Data: []byte("2"), Mode: 0o644}}, writeTime, true)
	if diff := cmp.Diff(map[string]string{"k": "-rw-r--r-- 2"}, listing(t, dir)); diff != "" {
		t.Errorf("volume content (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"..2024_05_01_10_00_00.000000124", "..data"}, hidden(t, dir)); diff != "" {
		t.Errorf("reserved entries (-want +got):\n%s", diff)
	}
}

func TestWriteAtomicRepairs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	files := map[string]File{"k": {Data: []byte("v"), Mode: 0o644}}
	mustWrite(t, dir, files, writeTime, true)
	// A lost user-visible link, a stale one, a version directory and a
	// ..data_tmp a crash left behind.
	if err := os.Remove(filepath.Join(dir, "k")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/gone", filepath.Join(dir, "gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "..2020_01_01_00_00_00.000000000"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2020_01_01_00_00_00.000000000", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir, files, writeTime, false)
	if diff := cmp.Diff(map[string]string{"k": "-rw-r--r-- v"}, listing(t, dir)); diff != "" {
		t.Errorf("volume content (-want +got):\n%s", diff)
	}
	if _, err := os.Lstat(filepath.Join(dir, "gone")); !os.IsNotExist(err) {
		t.Errorf("stale link kept: %v", err)
	}
	if diff := cmp.Diff([]string{"..2024_05_01_10_00_00.000000123", "..data"}, hidden(t, dir)); diff != "" {
		t.Errorf("reserved entries (-want +got):\n%s", diff)
	}
	// Tampered content is rewritten.
	ts, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.WriteFile(filepath.Join(dir, ts, "k"), []byte("tampered"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, dir, files, writeTime, true)
	if diff := cmp.Diff(map[string]string{"k": "-rw-r--r-- v"}, listing(t, dir)); diff != "" {
		t.Errorf("volume content (-want +got):\n%s", diff)
	}
}

func TestWriteAtomicInvalidPaths(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		want  string
	}{
		{name: "empty", paths: []string{""}, want: "must not be empty"},
		{name: "absolute", paths: []string{"/etc/passwd"}, want: "must be relative"},
		{name: "parent element", paths: []string{"a/../../b"}, want: "must not contain '..'"},
		{name: "only parent", paths: []string{".."}, want: "must not contain '..'"},
		{name: "reserved data dir", paths: []string{"..data"}, want: "must not start with '..'"},
		{name: "reserved prefix", paths: []string{"..x/y"}, want: "must not start with '..'"},
		{name: "volume itself", paths: []string{"./"}, want: "names the volume itself"},
		{name: "file and directory", paths: []string{"a", "a/b"}, want: `"a" is also a file`},
		{name: "same path twice", paths: []string{"a/b", "a//b"}, want: "given twice"},
		{name: "long name", paths: []string{strings.Repeat("x", 256)}, want: "at most 255"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			files := map[string]File{}
			for _, p := range tt.paths {
				files[p] = File{Data: []byte("x"), Mode: 0o644}
			}
			_, err := WriteAtomic(dir, files, writeTime)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("WriteAtomic(%q) error = %v, want one containing %q", tt.paths, err, tt.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("volume directory created for an invalid payload: %v", err)
			}
		})
	}
}

func TestWriteAtomicRefusesForeignEntries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.MkdirAll(filepath.Join(dir, "k"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteAtomic(dir, map[string]File{"k": {Data: []byte("v"), Mode: 0o644}}, writeTime); err == nil {
		t.Fatal("WriteAtomic() over a foreign directory succeeded, want an error")
	}
	if _, err := os.Stat(filepath.Join(dir, "k")); err != nil {
		t.Errorf("foreign directory removed: %v", err)
	}
}
