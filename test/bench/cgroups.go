package main

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// benchCgroupRoot is a bench agent's --cgroup-root.
func benchCgroupRoot(node string) string { return "/nodeagent-bench-" + node }

// removeCgroups removes the empty cgroups of root from every hierarchy,
// deepest first; one with processes (a pod the bench left) stays.
func removeCgroups(root string) {
	hier, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range hier {
		if h.IsDir() {
			rmTree(filepath.Join("/sys/fs/cgroup", h.Name(), root))
		}
	}
}

func rmTree(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			rmTree(filepath.Join(dir, e.Name()))
		}
	}
	unix.Rmdir(dir) //nolint:errcheck // best effort
}
