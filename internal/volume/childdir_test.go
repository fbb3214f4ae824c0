package volume

import (
	"path/filepath"
	"testing"
)

// TestEmptyDirStaysInItsPlugin: an emptyDir's name is one element beneath
// the plugin directory, whatever it holds ("..", a separator).
func TestEmptyDirStaysInItsPlugin(t *testing.T) {
	pod := t.TempDir()
	base := filepath.Join(pod, "volumes", "kubernetes.io~empty-dir")
	for _, name := range []string{"cache", "..", "../../etc", "a/b"} {
		dir, err := EmptyDir(pod, name)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(dir) != base {
			t.Errorf("EmptyDir(%q) = %s; want a child of %s", name, dir, base)
		}
	}
	if dir, _ := EmptyDir(pod, "cache"); dir != filepath.Join(base, "cache") {
		t.Errorf("a plain name is kept: %s", dir)
	}
}
