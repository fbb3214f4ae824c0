package cm

import (
	"path"
	"strings"
)

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
	// pods lists the UIDs of the pod cgroups under the tier c.
	pods(c []string) map[string]bool
	// remove removes c and the empty cgroups beneath; it fails, leaving
	// everything, while a process is in it.
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

func (d cgroupfs) pods(c []string) map[string]bool {
	out := map[string]bool{}
	for name := range d.f.children(d.rel(c)) {
		if uid, ok := strings.CutPrefix(name, "pod"); ok && uid != "" {
			out[uid] = true
		}
	}
	return out
}

func (d cgroupfs) remove(c []string) error { return d.f.remove(d.rel(c)) }

func (d cgroupfs) parent(c []string) (string, error) { return "/" + d.rel(c), nil }
