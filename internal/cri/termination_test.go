package cri

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadTerminationMessage(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("a", 100)+strings.Repeat("b", 4096)), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		file      string
		fallback  bool
		want      string
		wantCheck bool
	}{
		{name: "last 4 KiB", file: big, want: strings.Repeat("b", 4096)},
		{name: "empty, fallback", file: empty, fallback: true, wantCheck: true},
		{name: "empty, no fallback", file: empty},
		{name: "missing, fallback", file: filepath.Join(dir, "missing"), fallback: true, wantCheck: true},
		{name: "content, fallback", file: big, fallback: true, want: strings.Repeat("b", 4096)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, check := readTerminationMessage(tt.file, tt.fallback)
			if got != tt.want || check != tt.wantCheck {
				t.Errorf("readTerminationMessage() = %d bytes, %v; want %d bytes, %v", len(got), check, len(tt.want), tt.wantCheck)
			}
		})
	}
}

func TestLastBytes(t *testing.T) {
	l := &lastBytes{max: 5}
	for _, w := range []string{"ab", "cd", "efg", "", "h", "0123456789", "x"} {
		if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", w, n, err)
		}
	}
	if string(l.b) != "6789x" || cap(l.b) > 16 {
		t.Errorf("kept %q (cap %d); want the last 5 bytes, bounded", l.b, cap(l.b))
	}
}

// withUmask runs the rest of the test under a restrictive umask (process
// wide: tests using it must not run in parallel).
func withUmask(t *testing.T, mask int) {
	t.Helper()
	old := syscall.Umask(mask)
	t.Cleanup(func() { syscall.Umask(old) })
}

// TestCreateTerminationMessageFile: the file is 0666 whatever the umask,
// so that a container running as any user can write it, and a file left
// by an earlier attempt is emptied.
func TestCreateTerminationMessageFile(t *testing.T) {
	withUmask(t, 0o077)
	file := filepath.Join(t.TempDir(), "containers", "app", "0")
	for _, attempt := range []string{"new", "left by an earlier attempt"} {
		if err := createTerminationMessageFile(file); err != nil {
			t.Fatalf("%s: createTerminationMessageFile() error = %v", attempt, err)
		}
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
			t.Errorf("%s: file mode %v, size %d; want -rw-rw-rw- and empty", attempt, fi.Mode(), fi.Size())
		}
		if err := os.WriteFile(file, []byte("stale"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
