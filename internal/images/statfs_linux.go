package images

import "golang.org/x/sys/unix"

// statfs is FsStats by statfs(2): blocks times fragment size, and the
// blocks available to unprivileged users (what df shows as Avail).
func statfs(path string) (capacity, available uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Blocks * uint64(st.Frsize), st.Bavail * uint64(st.Frsize), nil
}
