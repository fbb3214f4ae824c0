package cm

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// errBusy is a cgroup that still holds processes: not removed yet.
var errBusy = errors.New("cgroup still has processes")

// backend is a cgroup driver: how the pod hierarchy's cgroups are made,
// limited, listed, removed and named to the runtime. A cgroup is named by
// its components beneath the cgroup root ({"kubepods", "burstable",
// "pod<uid>"}), as the kubelet's CgroupName.
type backend interface {
	// set makes the cgroup c (its parents exist) when it is absent and
	// writes r.
	set(c []string, r Resources) error
	// setShares writes only the cpu shares (v2: weight) of c.
	setShares(c []string, shares uint64) error
	// exists reports whether the cgroup c is there.
	exists(c []string) bool
	// pods lists the pod cgroups under the tier c by their last
	// component as the driver writes it (component's form).
	pods(c []string) map[string]bool
	// component is a cgroup name's component as the driver writes it.
	component(name string) string
	// remove removes c and the empty cgroups beneath; while a process is
	// in it, it fails with errBusy, leaving everything.
	remove(c []string) error
	// parent is c as the runtime's CgroupParent.
	parent(c []string) (string, error)
}

// cgroupfs is the cgroupfs driver: directories under Root written
// directly.
type cgroupfs struct {
	f    *fs
	root string
}

func (d cgroupfs) rel(c []string) string {
	return strings.TrimPrefix(path.Join(append([]string{"/", d.root}, c...)...), "/")
}

func (d cgroupfs) set(c []string, r Resources) error {
	rel := d.rel(c)
	if err := d.f.ensure(rel); err != nil {
		return err
	}
	return d.f.apply(rel, r)
}

func (d cgroupfs) setShares(c []string, shares uint64) error {
	return d.f.setShares(d.rel(c), shares)
}

func (d cgroupfs) exists(c []string) bool { return d.f.exists(d.rel(c)) }

func (d cgroupfs) pods(c []string) map[string]bool {
	out := map[string]bool{}
	for name := range d.f.children(d.rel(c)) {
		if uid, ok := strings.CutPrefix(name, "pod"); ok && uid != "" {
			out[name] = true
		}
	}
	return out
}

func (cgroupfs) component(name string) string { return name }

func (d cgroupfs) remove(c []string) error {
	err := d.f.remove(d.rel(c))
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("%w: %w", errBusy, err)
	}
	return err
}

func (d cgroupfs) parent(c []string) (string, error) { return "/" + d.rel(c), nil }
