package cm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/pod"
)

var allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m"), v1.ResourceMemory: resource.MustParse("1Gi")}

// hybridV1 is a cgroup v1 mount root as on this rig's hosts: one
// directory per hierarchy (cpu and cpuacct co-mounted, with their
// symlinks), a named one, and a directory that is not a cgroup.
func hybridV1(t *testing.T) string {
	root := t.TempDir()
	for _, h := range []string{"cpu,cpuacct", "memory", "pids", "cpuset", "systemd"} {
		mkfile(t, filepath.Join(root, h, "cgroup.procs"), "")
	}
	mkfile(t, filepath.Join(root, "cpuset", "cpuset.cpus"), "0-3")
	mkfile(t, filepath.Join(root, "cpuset", "cpuset.mems"), "0")
	for _, l := range []string{"cpu", "cpuacct"} {
		if err := os.Symlink("cpu,cpuacct", filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(root, "not-a-cgroup"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// unifiedV2 is a cgroup v2 mount root.
func unifiedV2(t *testing.T) string {
	root := t.TempDir()
	mkfile(t, filepath.Join(root, "cgroup.procs"), "")
	mkfile(t, filepath.Join(root, "cgroup.controllers"), "cpuset cpu io memory pids misc\n")
	return root
}

func mkfile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return strings.TrimSpace(string(b))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// cgroupfsRmdir gives a plain directory cgroupfs's rmdir: it fails while
// the cgroup has processes or child cgroups; its interface files go with
// it.
func cgroupfsRmdir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			return unix.EBUSY
		}
		if e.Name() == "cgroup.procs" {
			if b, _ := os.ReadFile(filepath.Join(dir, e.Name())); len(strings.TrimSpace(string(b))) > 0 {
				return unix.EBUSY
			}
		}
	}
	return os.RemoveAll(dir)
}

func newManager(t *testing.T, mountRoot, root string) *Manager {
	t.Helper()
	m, err := New(Config{MountRoot: mountRoot, Root: root, Driver: DriverCgroupfs, Node: allocatable, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	m.fs.rmdir = cgroupfsRmdir
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	return m
}

func named(p *v1.Pod, uid string) *v1.Pod {
	p = p.DeepCopy()
	p.UID = types.UID(uid)
	return p
}

func TestManagerV1(t *testing.T) {
	mnt := hybridV1(t)
	m := newManager(t, mnt, "/agent")
	cpu, mem := filepath.Join(mnt, "cpu,cpuacct", "agent", "kubepods"), filepath.Join(mnt, "memory", "agent", "kubepods")

	// kubepods limited to allocatable; the tiers in every hierarchy.
	if got := read(t, filepath.Join(cpu, "cpu.shares")); got != "1536" {
		t.Errorf("kubepods cpu.shares %s, want 1536 (1500m)", got)
	}
	if got := read(t, filepath.Join(mem, "memory.limit_in_bytes")); got != "1073741824" {
		t.Errorf("kubepods memory.limit_in_bytes %s, want 1Gi", got)
	}
	if got := read(t, filepath.Join(cpu, "besteffort", "cpu.shares")); got != "2" {
		t.Errorf("besteffort cpu.shares %s, want 2", got)
	}
	for _, h := range []string{"cpu,cpuacct", "memory", "pids", "cpuset", "systemd"} {
		for _, tier := range []string{"burstable", "besteffort"} {
			if !exists(filepath.Join(mnt, h, "agent", "kubepods", tier)) {
				t.Errorf("%s: no kubepods/%s", h, tier)
			}
		}
	}
	if exists(filepath.Join(mnt, "not-a-cgroup", "agent")) {
		t.Error("a directory that is not a cgroup hierarchy got one")
	}
	if got := read(t, filepath.Join(mnt, "cpuset", "agent", "kubepods", "burstable", "cpuset.cpus")); got != "0-3" {
		t.Errorf("new cpuset cgroup has cpus %q, want the parent's 0-3", got)
	}

	g, b, be := named(guaranteed, "g-1"), named(burstableAll, "b-1"), named(bestEffort, "e-1")
	b2 := named(burstableReqOnly, "b-2")
	for _, tc := range []struct {
		pod    *v1.Pod
		parent string
		files  map[string]string
	}{
		{g, "/agent/kubepods/podg-1", map[string]string{"cpu.shares": "1024", "cpu.cfs_quota_us": "100000", "cpu.cfs_period_us": "100000", "memory.limit_in_bytes": "134217728"}},
		{b, "/agent/kubepods/burstable/podb-1", map[string]string{"cpu.shares": "102", "cpu.cfs_quota_us": "20000", "memory.limit_in_bytes": "67108864"}},
		{b2, "/agent/kubepods/burstable/podb-2", map[string]string{"cpu.shares": "256", "cpu.cfs_quota_us": "-1", "memory.limit_in_bytes": "-1"}},
		{be, "/agent/kubepods/besteffort/pode-1", map[string]string{"cpu.shares": "2", "cpu.cfs_quota_us": "-1", "memory.limit_in_bytes": "-1"}},
	} {
		parent, err := m.EnsurePod(tc.pod)
		if err != nil {
			t.Fatal(err)
		}
		if parent != tc.parent {
			t.Errorf("pod %s: cgroup parent %q, want %q", tc.pod.UID, parent, tc.parent)
		}
		for file, want := range tc.files {
			h := "cpu,cpuacct"
			if strings.HasPrefix(file, "memory.") {
				h = "memory"
			}
			if got := read(t, filepath.Join(mnt, h, parent, file)); got != want {
				t.Errorf("pod %s: %s = %s, want %s", tc.pod.UID, file, got, want)
			}
		}
		if !exists(filepath.Join(mnt, "pids", parent)) {
			t.Errorf("pod %s: no pids cgroup", tc.pod.UID)
		}
	}
	// The burstable tier's shares: 100m + 250m.
	if got := read(t, filepath.Join(cpu, "burstable", "cpu.shares")); got != "358" {
		t.Errorf("burstable cpu.shares %s, want 358", got)
	}

	// The runtime's container cgroups beneath: an exited one (empty) and
	// a running one (a process).
	mkfile(t, filepath.Join(mnt, "memory", "agent/kubepods/burstable/podb-1/c1/cgroup.procs"), "")
	mkfile(t, filepath.Join(mnt, "pids", "agent/kubepods/besteffort/pode-1/c2/cgroup.procs"), "4242\n")
	// An orphan of an earlier run, in one hierarchy only.
	mkfile(t, filepath.Join(mnt, "systemd", "agent/kubepods/besteffort/podold/cgroup.procs"), "")

	// Pods given a cgroup since the last housekeeping are kept once (one
	// admitted while the active pods were gathered is not yet in them).
	m.Cleanup(map[pod.UID]bool{"g-1": true, "b-2": true})
	if !exists(filepath.Join(mnt, "memory", "agent/kubepods/burstable/podb-1")) {
		t.Fatal("a pod cgroup made since the last housekeeping was removed")
	}
	m.Cleanup(map[pod.UID]bool{"g-1": true, "b-2": true})
	gone := func(parent string) bool {
		for _, h := range []string{"cpu,cpuacct", "memory", "pids", "cpuset", "systemd"} {
			if exists(filepath.Join(mnt, h, parent)) {
				return false
			}
		}
		return true
	}
	if !gone("agent/kubepods/burstable/podb-1") || !gone("agent/kubepods/besteffort/podold") {
		t.Error("gone pods' cgroups (an empty container cgroup beneath, an orphan) not removed")
	}
	if gone("agent/kubepods/podg-1") || gone("agent/kubepods/burstable/podb-2") {
		t.Error("an active pod's cgroup was removed")
	}
	if !exists(filepath.Join(mnt, "pids", "agent/kubepods/besteffort/pode-1/c2")) {
		t.Error("a cgroup with a process was removed")
	}
	if got := read(t, filepath.Join(cpu, "burstable", "cpu.shares")); got != "256" {
		t.Errorf("burstable cpu.shares %s after b-1 left, want 256", got)
	}
	// Its process gone, the next housekeeping removes it.
	mkfile(t, filepath.Join(mnt, "pids", "agent/kubepods/besteffort/pode-1/c2/cgroup.procs"), "")
	m.Cleanup(map[pod.UID]bool{"g-1": true, "b-2": true})
	if !gone("agent/kubepods/besteffort/pode-1") {
		t.Error("pod cgroup not removed once its processes were gone")
	}
	if !exists(filepath.Join(cpu, "besteffort")) {
		t.Error("the besteffort tier was removed with its last pod")
	}
}

func TestManagerV2(t *testing.T) {
	mnt := unifiedV2(t)
	m := newManager(t, mnt, "/")
	kp := filepath.Join(mnt, "kubepods")
	for file, want := range map[string]string{
		"cpu.weight": "59", // 1536 shares
		"cpu.max":    "max",
		"memory.max": "1073741824",
	} {
		if got := read(t, filepath.Join(kp, file)); got != want {
			t.Errorf("kubepods %s = %s, want %s", file, got, want)
		}
	}
	parent, err := m.EnsurePod(named(burstableAll, "b-1"))
	if err != nil {
		t.Fatal(err)
	}
	if parent != "/kubepods/burstable/podb-1" {
		t.Fatalf("cgroup parent %q", parent)
	}
	for file, want := range map[string]string{"cpu.weight": "4", "cpu.max": "20000 100000", "memory.max": "67108864"} {
		if got := read(t, filepath.Join(mnt, parent, file)); got != want {
			t.Errorf("pod %s = %s, want %s", file, got, want)
		}
	}
	// Controllers are enabled from the root down to the pod's parent.
	for _, dir := range []string{mnt, kp, filepath.Join(kp, "burstable")} {
		if got := read(t, filepath.Join(dir, "cgroup.subtree_control")); got != "+cpuset +cpu +io +memory +pids" {
			t.Errorf("%s cgroup.subtree_control %q", dir, got)
		}
	}
	m.Cleanup(nil)
	if !exists(filepath.Join(mnt, parent)) {
		t.Error("a pod cgroup made since the last housekeeping was removed")
	}
	m.Cleanup(nil)
	if exists(filepath.Join(mnt, parent)) {
		t.Error("pod cgroup left after cleanup")
	}
}

func TestNew(t *testing.T) {
	log := zaptest.NewLogger(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"systemd under another root", Config{MountRoot: hybridV1(t), Driver: DriverSystemd, Root: "/agent", Logger: log}, "use --cgroup-root=/"},
		{"unknown driver", Config{MountRoot: hybridV1(t), Driver: "lxcfs", Logger: log}, "want cgroupfs or systemd"},
		{"relative root", Config{MountRoot: hybridV1(t), Root: "agent", Logger: log}, "absolute"},
		{"no cgroups", Config{MountRoot: t.TempDir(), Logger: log}, "no cgroup v2 and no cgroup v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// A pod cgroup that cannot be written fails EnsurePod with the file.
func TestEnsurePodError(t *testing.T) {
	mnt := hybridV1(t)
	m := newManager(t, mnt, "/")
	if err := os.MkdirAll(filepath.Join(mnt, "memory", "kubepods", "podg-1", "memory.limit_in_bytes"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := m.EnsurePod(named(guaranteed, "g-1"))
	if err == nil || !strings.Contains(err.Error(), "memory.limit_in_bytes") {
		t.Fatalf("EnsurePod: %v, want an error naming memory.limit_in_bytes", err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v does not carry the path", err)
	}
}
