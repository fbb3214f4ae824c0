package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrUnsafePath is returned when a component of a log path is a symlink
// or not of the expected type: reading through it could leave the pod
// logs directory.
var ErrUnsafePath = errors.New("unsafe log path")

// ErrNotFound is returned when a container has no log (yet, or any more).
var ErrNotFound = errors.New("container log not found")

// ContainerRef names one container's logs:
// <pod-logs-dir>/<Namespace>_<Pod>_<UID>/<Container>/, the kubelet's
// layout (and internal/cri's).
type ContainerRef struct {
	Namespace string
	Pod       string
	UID       string
	Container string
}

// validate checks that the names are the API's, so that no two refs
// share a directory: neither a namespace nor a pod name holds '_' (the
// separator), and none of the elements is a path ('/', "..").
func (r ContainerRef) validate() error {
	var errs []string
	if msgs := validation.IsDNS1123Label(r.Namespace); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("namespace %q: %s", r.Namespace, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(r.Pod); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("pod name %q: %s", r.Pod, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Label(r.Container); len(msgs) > 0 {
		errs = append(errs, fmt.Sprintf("container name %q: %s", r.Container, strings.Join(msgs, "; ")))
	}
	if r.UID == "" || r.UID == "." || r.UID == ".." || strings.ContainsAny(r.UID, "/\x00") {
		errs = append(errs, fmt.Sprintf("pod UID %q: not a plain name", r.UID))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid container log reference: %s", strings.Join(errs, ", "))
	}
	return nil
}

// ContainerDir is a container's log directory, opened beneath the pod
// logs root one component at a time, never through a symlink. Files are
// opened relative to it, likewise. Safe for one reader at a time.
type ContainerDir struct {
	fd   int
	path string // for messages
}

// OpenContainerDir validates ref and opens its log directory beneath
// root. root itself is trusted (the operator's --pod-logs-dir); the pod
// and container directories must be real directories within it. The
// caller closes the directory.
func OpenContainerDir(root string, ref ContainerRef) (*ContainerDir, error) {
	if err := ref.validate(); err != nil {
		return nil, err
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open pod logs directory %s: %w", root, err)
	}
	defer unix.Close(rootFD)
	podDir := ref.Namespace + "_" + ref.Pod + "_" + ref.UID
	podFD, err := openDirAt(rootFD, podDir, filepath.Join(root, podDir))
	if err != nil {
		return nil, err
	}
	defer unix.Close(podFD)
	path := filepath.Join(root, podDir, ref.Container)
	fd, err := openDirAt(podFD, ref.Container, path)
	if err != nil {
		return nil, err
	}
	return &ContainerDir{fd: fd, path: path}, nil
}

// openDirAt opens the directory name (one path element) in parent,
// refusing a symlink.
func openDirAt(parent int, name, path string) (int, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ENOENT):
		return -1, fmt.Errorf("%w: no directory %s", ErrNotFound, path)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return -1, fmt.Errorf("%w: %s is a symlink or not a directory", ErrUnsafePath, path)
	default:
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
}

func retryEINTR(f func() (int, error)) (int, error) {
	for {
		fd, err := f()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// Close closes the directory.
func (d *ContainerDir) Close() error { return unix.Close(d.fd) }

// Path is the directory's path, for messages.
func (d *ContainerDir) Path() string { return d.path }

// open opens the regular file name (one path element, from a listing or
// a live log name) in the directory, refusing a symlink, a FIFO or a
// device.
func (d *ContainerDir) open(name string) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO planted here must not block; it has no
	// effect on the regular files read afterwards.
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	})
	path := filepath.Join(d.path, name)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symlink", ErrUnsafePath, path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnsafePath, path)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// stat is lstat of name in the directory.
func (d *ContainerDir) stat(name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// names lists the directory.
func (d *ContainerDir) names() ([]string, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", d.path, err)
	}
	return names, nil
}

// Restarts lists the container's instances that have log files, by
// restart number (the <n> of <n>.log and its rotated <n>.log.*),
// ascending. The last is the current (or last) instance, the one
// before it the previous.
func (d *ContainerDir) Restarts() ([]int, error) {
	names, err := d.names()
	if err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	var out []int
	for _, n := range names {
		if n, ok := restartOf(n); ok && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// restartOf parses <n>.log and <n>.log.<anything>.
func restartOf(name string) (int, bool) {
	num, rest, ok := strings.Cut(name, ".log")
	if !ok || num == "" || (rest != "" && rest[0] != '.') {
		return 0, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// Usage is the space and inodes the directory's regular files take (the
// live log and its rotations), for the summary's logs figures. Entries
// are lstat'ed: a symlink or anything else planted here is not counted.
func (d *ContainerDir) Usage() (bytes, inodes uint64, err error) {
	names, err := d.names()
	if err != nil {
		return 0, 0, err
	}
	inodes = 1 // the directory
	for _, n := range names {
		st, err := d.stat(n)
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue // gone since the listing, or not a log file
		}
		inodes++
		bytes += uint64(st.Blocks) * 512
	}
	return bytes, inodes, nil
}

// Statfs is statfs of the directory's file system, through the open
// directory.
func (d *ContainerDir) Statfs() (unix.Statfs_t, error) {
	var st unix.Statfs_t
	err := unix.Fstatfs(d.fd, &st)
	return st, err
}
