package cm

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/cgroups"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// fakeSystemd records the slices the driver asks opencontainers/cgroups
// for; the real D-Bus calls are proven on a booted systemd host
// (hack/test-host).
type fakeSystemd struct {
	mu        sync.Mutex
	calls     []string
	resources map[string]cgroups.Resources // unit -> last Set
	parents   map[string]string
	applyErr  error
}

type fakeSliceManager struct {
	cgroups.Manager
	s  *fakeSystemd
	cg *cgroups.Cgroup
}

func (f *fakeSystemd) new(cg *cgroups.Cgroup) (cgroups.Manager, error) {
	if !cg.Systemd {
		return nil, errors.New("not a systemd cgroup")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.parents[cg.Name] = cg.Parent
	return fakeSliceManager{s: f, cg: cg}, nil
}

func (m fakeSliceManager) record(op string) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.s.calls = append(m.s.calls, op+" "+m.cg.Name)
}

func (m fakeSliceManager) Apply(pid int) error {
	if pid != -1 {
		return errors.New("a slice is made with no process")
	}
	m.record("apply")
	return m.s.applyErr
}

func (m fakeSliceManager) Set(r *cgroups.Resources) error {
	m.record("set")
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	m.s.resources[m.cg.Name] = *r
	return nil
}

func (m fakeSliceManager) Destroy() error {
	m.record("destroy")
	return nil
}

func newSystemdManager(t *testing.T, mnt string, pids int64) (*Manager, *fakeSystemd) {
	t.Helper()
	f := &fakeSystemd{resources: map[string]cgroups.Resources{}, parents: map[string]string{}}
	m, err := New(Config{MountRoot: mnt, Driver: DriverSystemd, Node: allocatable, PodPIDs: pids, Logger: zaptest.NewLogger(t), newSystemd: f.new})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	return m, f
}

func TestSystemdSlices(t *testing.T) {
	mnt := unifiedV2(t)
	m, f := newSystemdManager(t, mnt, 1024)
	// kubepods and its tiers as the kubelet names them, each in its
	// parent slice, limited as with cgroupfs (v2: weights).
	for unit, parent := range map[string]string{
		"kubepods.slice": "-.slice", "kubepods-besteffort.slice": "kubepods.slice", "kubepods-burstable.slice": "kubepods.slice",
	} {
		if f.parents[unit] != parent {
			t.Errorf("%s made in %q, want %q", unit, f.parents[unit], parent)
		}
		if !slices.Contains(f.calls, "apply "+unit) {
			t.Errorf("%s not applied: %v", unit, f.calls)
		}
	}
	kp := f.resources["kubepods.slice"]
	if kp.CpuWeight != 59 || kp.Memory != 1<<30 || kp.CpuQuota != -1 || !kp.SkipDevices {
		t.Errorf("kubepods.slice resources %+v", kp)
	}
	if w := f.resources["kubepods-besteffort.slice"].CpuWeight; w != 1 {
		t.Errorf("besteffort weight %d, want 1 (2 shares)", w)
	}

	parent, err := m.EnsurePod(named(burstableAll, "b-1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podb_1.slice"; parent != want {
		t.Errorf("cgroup parent %q, want %q", parent, want)
	}
	r := f.resources["kubepods-burstable-podb_1.slice"]
	if r.CpuWeight != 4 || r.CpuQuota != 20000 || r.CpuPeriod != 100000 || r.Memory != 64<<20 || r.PidsLimit == nil || *r.PidsLimit != 1024 {
		t.Errorf("pod slice resources %+v", r)
	}
	if f.parents["kubepods-burstable-podb_1.slice"] != "kubepods-burstable.slice" {
		t.Errorf("pod slice made in %q", f.parents["kubepods-burstable-podb_1.slice"])
	}
	if w := f.resources["kubepods-burstable.slice"].CpuWeight; w != 4 {
		t.Errorf("burstable tier weight %d after a 100m pod, want 4", w)
	}
	gp, err := m.EnsurePod(named(guaranteed, "g-1"))
	if err != nil || gp != "/kubepods.slice/kubepods-podg_1.slice" {
		t.Fatalf("guaranteed parent %q, %v", gp, err)
	}
	if r := f.resources["kubepods-podg_1.slice"]; r.Memory != 128<<20 || r.CpuQuota != 100000 {
		t.Errorf("guaranteed slice resources %+v", r)
	}
	be, err := m.EnsurePod(named(bestEffort, "e-1"))
	if err != nil {
		t.Fatal(err)
	}
	if r := f.resources["kubepods-besteffort-pode_1.slice"]; r.Memory != -1 || r.CpuQuota != -1 {
		t.Errorf("besteffort slice not unlimited: %+v", r)
	}

	// Cleanup: what systemd made on disk; b-1's slice still has a
	// process, e-1's is empty, an orphan of an earlier run too.
	mkfile(t, filepath.Join(mnt, parent, "cgroup.events"), "populated 1\nfrozen 0\n")
	mkfile(t, filepath.Join(mnt, be, "cgroup.events"), "populated 0\nfrozen 0\n")
	orphan := "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podold_1.slice"
	mkfile(t, filepath.Join(mnt, orphan, "cgroup.events"), "populated 0\n")
	mkfile(t, filepath.Join(mnt, gp, "cgroup.events"), "populated 0\n")
	m.Cleanup(map[pod.UID]bool{"g-1": true}) // the pods ensured since the last one are kept once
	f.calls = nil
	m.Cleanup(map[pod.UID]bool{"g-1": true})
	slices.Sort(f.calls)
	if want := []string{"destroy kubepods-besteffort-pode_1.slice", "destroy kubepods-besteffort-podold_1.slice", "set kubepods-burstable.slice"}; !slices.Equal(f.calls, want) {
		t.Errorf("cleanup calls %v, want %v (no destroy of a slice with a process or of an active pod)", f.calls, want)
	}
	if w := f.resources["kubepods-burstable.slice"].CpuWeight; w != 1 {
		t.Errorf("burstable tier weight %d after b-1 left, want 1", w)
	}
}

// On cgroup v1 the driver gives shares, not weights.
func TestSystemdV1Shares(t *testing.T) {
	m, f := newSystemdManager(t, hybridV1(t), 0)
	if _, err := m.EnsurePod(named(burstableAll, "b-1")); err != nil {
		t.Fatal(err)
	}
	r := f.resources["kubepods-burstable-podb_1.slice"]
	if r.CpuShares != 102 || r.CpuWeight != 0 || r.PidsLimit != nil {
		t.Errorf("v1 pod slice resources %+v, want 102 shares and no pids limit", r)
	}
}

// A slice systemd refuses fails the pod's sandbox with the unit named.
func TestSystemdApplyError(t *testing.T) {
	m, f := newSystemdManager(t, unifiedV2(t), 0)
	f.applyErr = errors.New("Unit kubepods-burstable-podb_1.slice failed")
	_, err := m.EnsurePod(named(burstableAll, "b-1"))
	if err == nil || !strings.Contains(err.Error(), "create slice kubepods-burstable-podb_1.slice") {
		t.Fatalf("EnsurePod: %v", err)
	}
}

// An unchanged pod whose slice exists is not written again at each sync;
// a changed one (a resize) is. Active pods are compared escaped: a UID
// with '_' keeps its slice.
func TestSystemdWritesOnChange(t *testing.T) {
	mnt := unifiedV2(t)
	m, f := newSystemdManager(t, mnt, 0)
	p := named(burstableAll, "u_1")
	parent, err := m.EnsurePod(p)
	if err != nil {
		t.Fatal(err)
	}
	mkfile(t, filepath.Join(mnt, parent, "cgroup.events"), "populated 0\n") // what systemd made
	f.calls = nil
	if _, err := m.EnsurePod(p); err != nil {
		t.Fatal(err)
	}
	if len(f.calls) != 0 {
		t.Errorf("an unchanged pod's slice written again: %v", f.calls)
	}
	resized := p.DeepCopy()
	resized.Spec.Containers[0].Resources.Limits[v1.ResourceMemory] = resource.MustParse("96Mi")
	if _, err := m.EnsurePod(resized); err != nil {
		t.Fatal(err)
	}
	if r := f.resources["kubepods-burstable-podu_1.slice"]; r.Memory != 96<<20 {
		t.Errorf("resized pod's slice memory %d, want 96Mi", r.Memory)
	}
	m.Cleanup(map[pod.UID]bool{"u_1": true})
	m.Cleanup(map[pod.UID]bool{"u_1": true})
	if slices.ContainsFunc(f.calls, func(c string) bool { return strings.HasPrefix(c, "destroy") }) {
		t.Errorf("an active pod's slice destroyed: %v", f.calls)
	}
}
