package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DiskUsage counts as du does, and gives up past its bounds: entries
// counted, and depth.
func TestDiskUsageBounds(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 10; i++ {
		if err := os.WriteFile(filepath.Join(dir, "f"+strings.Repeat("x", i)), make([]byte, 8192), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	used, inodes, err := DiskUsageInodes(context.Background(), dir, 100)
	if err != nil || used < 10*8192 || inodes != 11 {
		t.Fatalf("usage %d bytes, %d inodes, %v; want at least 80 KiB and 11 inodes", used, inodes, err)
	}
	if _, err := DiskUsage(context.Background(), dir, 5); !errors.Is(err, ErrTooManyFiles) {
		t.Fatalf("5 entries allowed: %v; want ErrTooManyFiles", err)
	}
	deep := filepath.Join(dir, "d")
	p := deep
	for i := 0; i < maxDepth+1; i++ {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := DiskUsage(context.Background(), deep, 1_000_000); !errors.Is(err, ErrTooManyFiles) {
		t.Fatalf("nested %d deep: %v; want ErrTooManyFiles", maxDepth+1, err)
	}
}
