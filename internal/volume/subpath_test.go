package volume

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheckSubPath(t *testing.T) {
	tests := []struct {
		name, sub string
		ok        bool
	}{
		{"empty is the volume root", "", true},
		{"plain", "a/b", true},
		{"dot elements", "./a/./b", true},
		{"dots inside a name", "a..b/..c", true},
		{"absolute", "/etc", false},
		{"parent", "..", false},
		{"parent inside", "a/../../b", false},
		{"trailing parent", "a/..", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckSubPath(tt.sub); (err == nil) != tt.ok {
				t.Fatalf("CheckSubPath(%q) = %v, want ok=%v", tt.sub, err, tt.ok)
			}
		})
	}
}

// volumeTree makes a volume directory with a secret outside it and the
// symlinks a hostile container could plant.
func volumeTree(t *testing.T) (vol, outside string) {
	t.Helper()
	root := t.TempDir()
	vol = filepath.Join(root, "vol")
	outside = filepath.Join(root, "outside")
	for _, d := range []string{vol, outside, filepath.Join(vol, "dir", "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(vol, "dir", "file"), []byte("in"), 0o644))
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("out"), 0o644))
	must(os.Symlink("/", filepath.Join(vol, "root")))
	must(os.Symlink(outside, filepath.Join(vol, "abs")))
	must(os.Symlink("../outside", filepath.Join(vol, "rel")))
	must(os.Symlink("../../outside", filepath.Join(vol, "dir", "up")))
	must(os.Symlink("dir/sub", filepath.Join(vol, "inside")))
	must(os.Symlink("/proc/self/root", filepath.Join(vol, "magic")))
	return vol, outside
}

func TestOpenSubPath(t *testing.T) {
	tests := []struct {
		name, sub string
		// want: "" for success, "escape" for ErrEscape, "error" for any
		// other error.
		want         string
		wantNoOpenat string // the O_NOFOLLOW walk refuses every symlink
		wantDir      bool
	}{
		{name: "directory", sub: "dir/sub", wantDir: true},
		{name: "file", sub: "dir/file"},
		{name: "missing is created", sub: "new/deeper", wantDir: true},
		{name: "symlink to /", sub: "root", want: "escape", wantNoOpenat: "escape"},
		{name: "through symlink to /", sub: "root/etc", want: "escape", wantNoOpenat: "escape"},
		{name: "absolute symlink out", sub: "abs/secret", want: "escape", wantNoOpenat: "escape"},
		{name: "relative symlink out", sub: "rel", want: "escape", wantNoOpenat: "escape"},
		{name: "nested relative symlink out", sub: "dir/up/secret", want: "escape", wantNoOpenat: "escape"},
		{name: "magic link", sub: "magic", want: "escape", wantNoOpenat: "escape"},
		{name: "creating beneath an escaping symlink", sub: "rel/newdir", want: "escape", wantNoOpenat: "escape"},
		{name: "symlink staying inside", sub: "inside", wantDir: true, wantNoOpenat: "escape"},
		{name: "dot-dot refused before any open", sub: "dir/../../outside", want: "error", wantNoOpenat: "error"},
		{name: "absolute refused", sub: "/etc", want: "error", wantNoOpenat: "error"},
		{name: "file as a directory", sub: "dir/file/x", want: "error", wantNoOpenat: "error"},
	}
	for _, openat2 := range []bool{true, false} {
		for _, tt := range tests {
			name := tt.name
			want := tt.want
			if !openat2 {
				name += " (no openat2)"
				want = tt.wantNoOpenat
			}
			t.Run(name, func(t *testing.T) {
				if openat2 && !haveOpenat2 {
					t.Fatal("this kernel has no openat2; the production path cannot be tested here")
				}
				saved := haveOpenat2
				haveOpenat2 = openat2
				defer func() { haveOpenat2 = saved }()
				vol, outside := volumeTree(t)
				f, err := OpenSubPath(vol, tt.sub)
				switch want {
				case "":
					if err != nil {
						t.Fatalf("OpenSubPath(%q) = %v, want success", tt.sub, err)
					}
					defer f.Close()
					info, err := os.Stat(f.Name())
					if err != nil {
						t.Fatal(err)
					}
					if info.IsDir() != tt.wantDir {
						t.Fatalf("opened %q: dir=%v, want %v", tt.sub, info.IsDir(), tt.wantDir)
					}
				case "escape":
					if !errors.Is(err, ErrEscape) {
						t.Fatalf("OpenSubPath(%q) = %v, want ErrEscape", tt.sub, err)
					}
				default:
					if err == nil || errors.Is(err, ErrEscape) {
						t.Fatalf("OpenSubPath(%q) = %v, want a plain error", tt.sub, err)
					}
				}
				// Nothing was created outside the volume.
				entries, _ := os.ReadDir(outside)
				if len(entries) != 1 {
					t.Fatalf("outside the volume now holds %d entries, want only the secret", len(entries))
				}
			})
		}
	}
}
