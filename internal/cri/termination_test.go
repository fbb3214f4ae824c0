package cri

import (
	"os"
	"path/filepath"
	"strings"
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
