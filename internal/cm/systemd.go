package cm

import (
	"fmt"
	"strings"

	"github.com/opencontainers/cgroups"
	cgsystemd "github.com/opencontainers/cgroups/systemd"
)

// systemdDriver is the systemd cgroup driver: each cgroup of the pod
// hierarchy is a slice unit (kubepods.slice, kubepods-burstable.slice,
// kubepods-burstable-pod<uid>.slice, a UID's '-' written '_'), made and
// limited through systemd's D-Bus API by opencontainers/cgroups — the
// library and the calls of the kubelet's cgroup manager (Apply(-1) makes
// the slice with no process, Set writes its properties and files). The
// runtime's CgroupParent is the slice's cgroupfs path
// (/kubepods.slice/kubepods-burstable.slice/…), as the kubelet gives it;
// the runtime puts its scopes in the slice named by its last element.
// Listing and the populated check read the cgroup file system.
type systemdDriver struct {
	f *fs
	// newManager is opencontainers/cgroups' manager.New (tests: a fake).
	newManager func(*cgroups.Cgroup) (cgroups.Manager, error)
}

// sliceName is c's unit: its components, '-' escaped to '_' (systemd reads
// '-' as a step down the hierarchy), joined by '-'.
func sliceName(c []string) string {
	parts := make([]string, len(c))
	for i, p := range c {
		parts[i] = strings.ReplaceAll(p, "-", "_")
	}
	return strings.Join(parts, "-") + ".slice"
}

// parentSlice is the unit c is made in: the root slice for kubepods.
func parentSlice(c []string) string {
	if len(c) <= 1 {
		return "-.slice"
	}
	return sliceName(c[:len(c)-1])
}

// rel is c's cgroup path relative to the hierarchies' roots.
func (d systemdDriver) rel(c []string) (string, error) {
	p, err := cgsystemd.ExpandSlice(sliceName(c))
	if err != nil {
		return "", fmt.Errorf("cgroup %s: %w", strings.Join(c, "/"), err)
	}
	return strings.TrimPrefix(p, "/"), nil
}

// resources are r for the library: unlimited written as such (-1), the
// weight converted on v2 as the kubelet does, devices left alone.
func (d systemdDriver) resources(r Resources) *cgroups.Resources {
	lr := &cgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true, CpuQuota: -1, Memory: -1}
	d.shares(lr, r.CPUShares)
	if r.CPUQuota > 0 {
		lr.CpuQuota, lr.CpuPeriod = r.CPUQuota, r.CPUPeriod
	}
	if r.Memory > 0 {
		lr.Memory = r.Memory
	}
	if r.PIDs > 0 {
		pids := r.PIDs
		lr.PidsLimit = &pids
	}
	return lr
}

func (d systemdDriver) shares(lr *cgroups.Resources, shares uint64) {
	if d.f.v2 {
		lr.CpuWeight = sharesToWeight(shares)
		return
	}
	lr.CpuShares = shares
}

func (d systemdDriver) manager(c []string, r *cgroups.Resources) (cgroups.Manager, error) {
	m, err := d.newManager(&cgroups.Cgroup{Systemd: true, Name: sliceName(c), Parent: parentSlice(c), Resources: r})
	if err != nil {
		return nil, fmt.Errorf("slice %s: %w", sliceName(c), err)
	}
	return m, nil
}

func (d systemdDriver) set(c []string, r Resources) error {
	lr := d.resources(r)
	m, err := d.manager(c, lr)
	if err != nil {
		return err
	}
	if err := m.Apply(-1); err != nil {
		return fmt.Errorf("create slice %s: %w", sliceName(c), err)
	}
	if err := m.Set(lr); err != nil {
		return fmt.Errorf("limit slice %s: %w", sliceName(c), err)
	}
	return nil
}

func (d systemdDriver) setShares(c []string, shares uint64) error {
	lr := &cgroups.Resources{SkipDevices: true, SkipFreezeOnSet: true}
	d.shares(lr, shares)
	m, err := d.manager(c, lr)
	if err != nil {
		return err
	}
	if err := m.Set(lr); err != nil {
		return fmt.Errorf("set cpu shares of slice %s: %w", sliceName(c), err)
	}
	return nil
}

func (d systemdDriver) exists(c []string) bool {
	rel, err := d.rel(c)
	return err == nil && d.f.exists(rel)
}

// pods gives the escaped "pod<uid>" of each pod slice: escaping is not
// reversible ('-' and '_' both become '_'), so active pods are compared
// escaped.
func (d systemdDriver) pods(c []string) map[string]bool {
	out := map[string]bool{}
	rel, err := d.rel(c)
	if err != nil {
		return out
	}
	prefix := strings.TrimSuffix(sliceName(c), ".slice") + "-"
	for name := range d.f.children(rel) {
		comp, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if comp, ok = strings.CutSuffix(comp, ".slice"); ok && strings.HasPrefix(comp, "pod") && len(comp) > 3 {
			out[comp] = true
		}
	}
	return out
}

func (systemdDriver) component(name string) string { return strings.ReplaceAll(name, "-", "_") }

// remove stops c's slice (systemd removes its cgroup) once nothing runs
// in it: stopping a slice would kill what does, and nothing is killed
// here.
func (d systemdDriver) remove(c []string) error {
	rel, err := d.rel(c)
	if err != nil {
		return err
	}
	if d.f.populated(rel) {
		return fmt.Errorf("slice %s: %w", sliceName(c), errBusy)
	}
	m, err := d.manager(c, &cgroups.Resources{SkipDevices: true})
	if err != nil {
		return err
	}
	if err := m.Destroy(); err != nil {
		return fmt.Errorf("remove slice %s: %w", sliceName(c), err)
	}
	return nil
}

func (d systemdDriver) parent(c []string) (string, error) {
	rel, err := d.rel(c)
	return "/" + rel, err
}
