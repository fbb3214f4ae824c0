package volume

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

// haveOpenat2 is false on kernels older than 5.6; the walk then refuses
// every symlink (tests switch it to cover both paths).
var haveOpenat2 = probeOpenat2()

func probeOpenat2() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC})
	if err != nil {
		return !errors.Is(err, unix.ENOSYS)
	}
	unix.Close(fd)
	return true
}

// OpenSubPath opens sub beneath base with O_PATH, creating the missing
// directories on the way (mode 0755, as the kubelet's SafeMakeDir; the last
// component too: a subPath that does not exist is a directory). It never
// follows a symlink out of base: with openat2 every prefix is resolved with
// RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS relative to base, so symlinks that
// stay inside the volume work and any other fails with ErrEscape. base
// itself is trusted (the volume's own directory, or an operator's
// hostPath). The caller closes the file.
func OpenSubPath(base, sub string) (*os.File, error) {
	if err := CheckSubPath(sub); err != nil {
		return nil, err
	}
	baseFD, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open volume %s: %w", base, err)
	}
	parts := components(sub)
	if len(parts) == 0 {
		return os.NewFile(uintptr(baseFD), base), nil
	}
	defer unix.Close(baseFD)
	open := openBeneath
	if !haveOpenat2 {
		open = openNoFollow
	}
	parent := baseFD
	for i, name := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		fd, err := open(baseFD, parent, prefix, name)
		if errors.Is(err, unix.ENOENT) {
			// Created in the directory already opened beneath base: a
			// plain name cannot leave it.
			if merr := unix.Mkdirat(parent, name, 0o755); merr != nil && !errors.Is(merr, unix.EEXIST) {
				err = merr
			} else {
				fd, err = open(baseFD, parent, prefix, name)
			}
		}
		if parent != baseFD {
			unix.Close(parent)
		}
		if err != nil {
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ELOOP) {
				return nil, fmt.Errorf("%w: %q in %s", ErrEscape, sub, base)
			}
			return nil, fmt.Errorf("open subPath %q in %s: %w", sub, base, err)
		}
		parent = fd
	}
	return os.NewFile(uintptr(parent), filepath.Join(base, sub)), nil
}

// openBeneath resolves prefix relative to base, refusing to leave it.
func openBeneath(baseFD, _ int, prefix, _ string) (int, error) {
	for {
		fd, err := unix.Openat2(baseFD, prefix, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		})
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue // a rename raced the lookup: the kernel asks to retry
		}
		return fd, err
	}
}

// openNoFollow opens one component relative to its parent and refuses a
// symlink (kernels without openat2).
func openNoFollow(_, parent int, _, name string) (int, error) {
	fd, err := unix.Openat(parent, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		unix.Close(fd)
		return -1, unix.ELOOP
	}
	return fd, nil
}

// BindSubPath opens sub beneath base (OpenSubPath) and bind-mounts the
// opened object onto target through /proc/self/fd, replacing whatever was
// mounted there. target (a directory or an empty file, like the source) is
// created. The returned path is target.
func BindSubPath(base, sub, target string) error {
	f, err := OpenSubPath(base, sub)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat subPath %q: %w", sub, err)
	}
	if err := unmountAll(target); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return fmt.Errorf("create subPath mount point: %w", err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := os.Mkdir(target, 0o750); err != nil && !os.IsExist(err) {
			return fmt.Errorf("create subPath mount point: %w", err)
		}
	} else {
		t, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o640)
		if err != nil {
			return fmt.Errorf("create subPath mount point: %w", err)
		}
		t.Close()
	}
	src := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount subPath %q at %s: %w", sub, target, err)
	}
	return nil
}

// unmountAll detaches every mount stacked on path.
func unmountAll(path string) error {
	for {
		err := unix.Unmount(path, unix.MNT_DETACH)
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		default:
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
}

// MountsUnder lists the mount points at or beneath dir, deepest first
// (moby/sys/mountinfo's parser of /proc/self/mountinfo).
func MountsUnder(dir string) ([]string, error) {
	// mountinfo holds resolved paths: a root reached through a symlink
	// must be compared as what it resolves to, or its mounts go unseen.
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(Canonical(dir)))
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	out := make([]string, 0, len(infos))
	for _, m := range infos {
		out = append(out, m.Mountpoint)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// Canonical is path made absolute with every symlink resolved, as far as
// it exists; the rest is appended as given.
func Canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	rest := ""
	for cur := abs; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// UnmountUnder detaches every mount at or beneath dir (subPath bind
// mounts of a pod's containers).
func UnmountUnder(dir string) error {
	mps, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, mp := range mps {
		if err := unmountAll(mp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveAll removes a pod directory once nothing is mounted beneath it:
// it unmounts first and refuses to remove when a mount remains, so a bind
// mount of a hostPath can never be emptied through the pod directory.
func RemoveAll(dir string) error {
	dir = Canonical(dir)
	if err := UnmountUnder(dir); err != nil {
		return err
	}
	if mps, err := MountsUnder(dir); err != nil {
		return err
	} else if len(mps) > 0 {
		return fmt.Errorf("not removing %s: %s still mounted", dir, mps[0])
	}
	return os.RemoveAll(dir)
}
