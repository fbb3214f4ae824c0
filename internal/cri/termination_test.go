package cri

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCRILogLine(t *testing.T) {
	tests := []struct {
		name, line, want string
		ok               bool
	}{
		{name: "full stdout", line: "2026-01-02T03:04:05.1Z stdout F hello\n", want: "hello\n", ok: true},
		{name: "full stderr, spaces kept", line: "2026-01-02T03:04:05.1Z stderr F  two  words \n", want: " two  words \n", ok: true},
		{name: "partial loses its newline", line: "2026-01-02T03:04:05.1Z stdout P part\n", want: "part", ok: true},
		{name: "tag with extras", line: "2026-01-02T03:04:05.1Z stdout F:x end\n", want: "end\n", ok: true},
		{name: "empty content", line: "2026-01-02T03:04:05.1Z stdout F \n", want: "\n", ok: true},
		{name: "last line without newline", line: "2026-01-02T03:04:05.1Z stdout F tail", want: "tail", ok: true},
		{name: "unknown stream", line: "2026-01-02T03:04:05.1Z stdin F x\n"},
		{name: "unknown tag", line: "2026-01-02T03:04:05.1Z stdout X x\n"},
		{name: "too few fields", line: "2026-01-02T03:04:05.1Z stdout\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseCRILogLine([]byte(tt.line))
			if ok != tt.ok || string(got) != tt.want {
				t.Errorf("parseCRILogLine(%q) = %q, %v; want %q, %v", tt.line, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestTailLinesStart(t *testing.T) {
	long := strings.Repeat("y", 5000) // lines across the 4 KiB read blocks
	tests := []struct {
		name    string
		content string
		n       int
		want    string // what follows the returned offset
	}{
		{name: "empty", content: "", n: 3, want: ""},
		{name: "fewer lines than asked", content: "a\nb\n", n: 3, want: "a\nb\n"},
		{name: "exactly n", content: "a\nb\nc\n", n: 3, want: "a\nb\nc\n"},
		{name: "more lines", content: "a\nb\nc\nd\n", n: 2, want: "c\nd\n"},
		{name: "no final newline", content: "a\nb\nc", n: 2, want: "b\nc"},
		{name: "long lines across blocks", content: long + "\n" + long + "\nz\n", n: 2, want: long + "\nz\n"},
		{name: "empty lines count", content: "a\n\n\n", n: 2, want: "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "log")
			if err := os.WriteFile(file, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			off, err := tailLinesStart(f, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.content[off:]; got != tt.want {
				t.Errorf("tail from %d = %q, want %q", off, got, tt.want)
			}
		})
	}
}

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
