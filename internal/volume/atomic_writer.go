package volume

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one file of a projected volume (configMap, secret, downwardAPI,
// projected): its content and permission bits.
type File struct {
	Data []byte
	Mode os.FileMode
}

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	// tsLayout names the hidden directory holding one version of the
	// content: ..YYYY_MM_DD_HH_MM_SS.NNNNNNNNN (UTC).
	tsLayout = "2006_01_02_15_04_05"

	maxFileNameLength = 255
	maxPathLength     = 4096
)

// WriteAtomic makes dir show exactly files, the way the kubelet's
// AtomicWriter does (pkg/volume/util/atomic_writer.go), so that a reader
// in a container never sees half an update:
//
//	dir/..2024_05_01_10_00_00.000000000/   one version, written in full first
//	dir/..data -> ..2024_05_01_10_00_00.000000000
//	dir/key    -> ..data/key                (one symlink per top-level name)
//	dir/sub    -> ..data/sub                (a directory of nested paths)
//
// A new version is written to a fresh timestamped directory (named after
// now), then ..data_tmp pointing at it is renamed over ..data — the one
// atomic step — then top-level symlinks are added for new names and
// removed for names that are gone, and the previous version is deleted.
// Nothing is written when every file already has the same content and
// mode and no other file is present: the call is then cheap (a read per
// file), so callers may call it on every sync. Missing top-level symlinks
// are recreated either way. It reports whether a new version was written.
//
// Paths are relative, cleaned, and may not be absolute, contain "..",
// start with ".." (reserved for the writer) or name both a file and a
// directory. dir's parents are created 0750, dir and the version
// directories 0755 (a container running as any user must reach the
// files), each file with its own mode whatever the umask.
//
// Not safe for concurrent calls on one dir; the caller serialises.
func WriteAtomic(dir string, files map[string]File, now time.Time) (bool, error) {
	clean, err := cleanPayload(files)
	if err != nil {
		return false, err
	}
	if err := ensureDir(dir); err != nil {
		return false, err
	}
	oldTs, err := currentVersion(dir)
	if err != nil {
		return false, err
	}
	changed := true
	if oldTs != "" {
		same, err := sameContent(filepath.Join(dir, oldTs), clean)
		if err != nil {
			return false, err
		}
		changed = !same
	}
	current := oldTs
	if changed {
		tsName, err := writeVersion(dir, clean, now)
		if err != nil {
			return false, err
		}
		if err := publish(dir, tsName); err != nil {
			_ = os.RemoveAll(filepath.Join(dir, tsName))
			return false, err
		}
		current = tsName
	}
	if err := linkTopLevel(dir, clean); err != nil {
		return changed, err
	}
	return changed, removeStale(dir, clean, current)
}

// cleanPayload validates every path and returns the payload keyed by
// cleaned path.
func cleanPayload(files map[string]File) (map[string]File, error) {
	clean := make(map[string]File, len(files))
	for p, f := range files {
		if err := checkPath(p); err != nil {
			return nil, err
		}
		c := path.Clean(p)
		if _, dup := clean[c]; dup {
			return nil, fmt.Errorf("invalid path %q: given twice", p)
		}
		clean[c] = f
	}
	for p := range clean {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := clean[d]; ok {
				return nil, fmt.Errorf("invalid path %q: %q is also a file", p, d)
			}
		}
	}
	return clean, nil
}

// checkPath refuses what the kubelet's validatePath refuses.
func checkPath(p string) error {
	if p == "" {
		return errors.New("invalid path: must not be empty")
	}
	if path.IsAbs(p) {
		return fmt.Errorf("invalid path %q: must be relative", p)
	}
	if len(p) > maxPathLength {
		return fmt.Errorf("invalid path %q: longer than %d characters", p, maxPathLength)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("invalid path %q: contains a NUL byte", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
		if len(el) > maxFileNameLength {
			return fmt.Errorf("invalid path %q: file names must be at most %d characters", p, maxFileNameLength)
		}
	}
	c := path.Clean(p)
	if c == "." {
		return fmt.Errorf("invalid path %q: names the volume itself", p)
	}
	if strings.HasPrefix(c, "..") {
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	return nil
}

// ensureDir creates dir (0755) and its missing parents (0750).
func ensureDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return fmt.Errorf("create volume directory: %w", err)
	}
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create volume directory: %w", err)
	}
	// Whatever the umask: containers of any user list the volume.
	return os.Chmod(dir, 0o755)
}

// currentVersion reads ..data: the name of the current version directory,
// "" when there is none yet.
func currentVersion(dir string) (string, error) {
	ts, err := os.Readlink(filepath.Join(dir, dataDirName))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", dataDirName, err)
	}
	if !isVersionDir(ts) {
		return "", fmt.Errorf("%s in %s points to %q, not a version directory", dataDirName, dir, ts)
	}
	return ts, nil
}

// isVersionDir tells a version directory's name from the writer's other
// reserved names.
func isVersionDir(name string) bool {
	return strings.HasPrefix(name, "..") && len(name) > 2 && !strings.Contains(name, "/") &&
		name != dataDirName && name != newDataDirName
}

// sameContent reports whether version directory ts holds exactly files:
// the same paths (and the directories leading to them), contents and
// modes.
func sameContent(ts string, files map[string]File) (bool, error) {
	want := map[string]bool{}
	for p := range files {
		want[p] = true
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			want[d] = true
		}
	}
	seen := 0
	errDiffers := errors.New("differs")
	err := filepath.WalkDir(ts, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ts, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if !want[rel] {
			return errDiffers
		}
		seen++
		f, isFile := files[rel]
		if !isFile {
			if !d.IsDir() {
				return errDiffers
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() || info.Mode().Perm() != f.Mode.Perm() || info.Size() != int64(len(f.Data)) {
			return errDiffers
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !bytes.Equal(data, f.Data) {
			return errDiffers
		}
		return nil
	})
	if errors.Is(err, errDiffers) || errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("compare volume content: %w", err)
	}
	return seen == len(want), nil
}

// writeVersion writes files into a new version directory named after now
// and returns its name.
func writeVersion(dir string, files map[string]File, now time.Time) (string, error) {
	now = now.UTC()
	var name string
	for ns := now.Nanosecond(); ; ns++ {
		// Two writes within the same nanosecond (a fake clock) get
		// consecutive names.
		name = fmt.Sprintf("..%s.%09d", now.Format(tsLayout), ns)
		err := os.Mkdir(filepath.Join(dir, name), 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("create version directory: %w", err)
		}
	}
	ts := filepath.Join(dir, name)
	fail := func(err error) (string, error) {
		_ = os.RemoveAll(ts)
		return "", err
	}
	if err := os.Chmod(ts, 0o755); err != nil {
		return fail(fmt.Errorf("create version directory: %w", err))
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := files[p]
		full := filepath.Join(ts, filepath.FromSlash(p))
		if err := mkdirAll0755(ts, filepath.Dir(full)); err != nil {
			return fail(err)
		}
		out, err := os.OpenFile(full, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_TRUNC, f.Mode.Perm())
		if err != nil {
			return fail(fmt.Errorf("write %s: %w", p, err))
		}
		_, werr := out.Write(f.Data)
		cerr := out.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return fail(fmt.Errorf("write %s: %w", p, err))
		}
		// The mode the spec asks for, whatever the umask.
		if err := os.Chmod(full, f.Mode.Perm()); err != nil {
			return fail(fmt.Errorf("write %s: %w", p, err))
		}
	}
	return name, nil
}

// mkdirAll0755 creates the directories from root (which exists) down to
// dir, each 0755 whatever the umask.
func mkdirAll0755(root, dir string) error {
	if dir == root {
		return nil
	}
	if err := mkdirAll0755(root, filepath.Dir(dir)); err != nil {
		return err
	}
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create directory in volume: %w", err)
	}
	return os.Chmod(dir, 0o755)
}

// publish points ..data at version directory ts with one rename.
func publish(dir, ts string) error {
	tmp := filepath.Join(dir, newDataDirName)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", newDataDirName, err)
	}
	if err := os.Symlink(ts, tmp); err != nil {
		return fmt.Errorf("link new version: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataDirName)); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("switch to new version: %w", err)
	}
	return nil
}

// topLevel lists the first element of every path, sorted.
func topLevel(files map[string]File) []string {
	set := map[string]bool{}
	for p := range files {
		first, _, _ := strings.Cut(p, "/")
		set[first] = true
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// linkTopLevel makes dir/name -> ..data/name for every top-level name. A
// symlink pointing elsewhere is replaced; anything else in the way is an
// error (the writer owns dir: nothing else is ever there).
func linkTopLevel(dir string, files map[string]File) error {
	for _, name := range topLevel(files) {
		link := filepath.Join(dir, name)
		target := dataDirName + "/" + name
		got, err := os.Readlink(link)
		switch {
		case err == nil && got == target:
			continue
		case err == nil:
			if err := os.Remove(link); err != nil {
				return fmt.Errorf("replace link %s: %w", name, err)
			}
		case errors.Is(err, fs.ErrNotExist):
		default:
			return fmt.Errorf("volume entry %s is not the writer's symlink: %w", name, err)
		}
		if err := os.Symlink(target, link); err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
	}
	return nil
}

// removeStale removes top-level symlinks no longer in files, version
// directories other than current (the previous one, or one a crash left)
// and a ..data_tmp a crash left.
func removeStale(dir string, files map[string]File, current string) error {
	keep := map[string]bool{}
	for _, n := range topLevel(files) {
		keep[n] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list volume: %w", err)
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == dataDirName || name == current:
		case name == newDataDirName:
			errs = append(errs, os.Remove(filepath.Join(dir, name)))
		case isVersionDir(name):
			if e.IsDir() {
				errs = append(errs, os.RemoveAll(filepath.Join(dir, name)))
			}
		case strings.HasPrefix(name, ".."):
		case !keep[name] && e.Type()&fs.ModeSymlink != 0:
			errs = append(errs, os.Remove(filepath.Join(dir, name)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove old volume content: %w", err)
	}
	return nil
}

// HasContent reports whether dir holds a complete version written by
// WriteAtomic (its ..data link points to one).
func HasContent(dir string) bool {
	ts, err := currentVersion(dir)
	return err == nil && ts != ""
}
