package cpumanager

import (
	"fmt"
	"sort"

	"k8s.io/utils/cpuset"
)

// NotEnoughCPUsError: fewer CPUs are free for exclusive use than a
// container requests.
type NotEnoughCPUsError struct {
	Requested, Available int
}

func (e *NotEnoughCPUsError) Error() string {
	return fmt.Sprintf("not enough CPUs available to satisfy request: requested=%d, available=%d", e.Requested, e.Available)
}

// take picks n CPUs of avail the way the kubelet's static policy does
// (takeByTopologyNUMAPacked): whole units of the larger of NUMA node and
// socket first, then of the smaller, then whole cores with their sibling
// threads, then single threads — each time from the units with the
// fewest free CPUs first (packed), lowest ID on a tie, so partly used
// sockets and cores fill up before free ones are broken into.
func (t *Topology) take(avail cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	if n > avail.Size() {
		return cpuset.New(), &NotEnoughCPUsError{Requested: n, Available: avail.Size()}
	}
	a := &accumulator{t: t, avail: avail, need: n, result: cpuset.New()}
	// The larger unit first: a NUMA node spanning sockets, or a socket
	// holding several NUMA nodes.
	levels := []func(CPUInfo) int{byNUMA, bySocket}
	if t.NumSockets() < t.NumNUMANodes() {
		levels = []func(CPUInfo) int{bySocket, byNUMA}
	}
	a.levels = levels
	for _, key := range []func(CPUInfo) int{levels[0], levels[1], byCore} {
		a.takeFull(key)
	}
	a.takeThreads()
	if a.need > 0 { // cannot happen: n <= avail
		return cpuset.New(), &NotEnoughCPUsError{Requested: n, Available: avail.Size()}
	}
	return a.result, nil
}

type accumulator struct {
	t      *Topology
	avail  cpuset.CPUSet
	need   int
	result cpuset.CPUSet
	levels []func(CPUInfo) int
}

func (a *accumulator) add(s cpuset.CPUSet) {
	a.result = a.result.Union(s)
	a.avail = a.avail.Difference(s)
	a.need -= s.Size()
}

// packed orders the available CPUs: by larger unit, smaller unit and core,
// each by its number of free CPUs ascending then by ID, then by CPU ID.
func (a *accumulator) packed() []int {
	free := func(key func(CPUInfo) int) map[int]int {
		m := map[int]int{}
		for _, cpu := range a.avail.UnsortedList() {
			m[key(a.t.CPUs[cpu])]++
		}
		return m
	}
	keys := []func(CPUInfo) int{a.levels[0], a.levels[1], byCore}
	counts := make([]map[int]int, len(keys))
	for i, k := range keys {
		counts[i] = free(k)
	}
	cpus := a.avail.List()
	sort.SliceStable(cpus, func(i, j int) bool {
		ci, cj := a.t.CPUs[cpus[i]], a.t.CPUs[cpus[j]]
		for l, k := range keys {
			ki, kj := k(ci), k(cj)
			if counts[l][ki] != counts[l][kj] {
				return counts[l][ki] < counts[l][kj]
			}
			if ki != kj {
				return ki < kj
			}
		}
		return cpus[i] < cpus[j]
	})
	return cpus
}

// takeFull takes every unit of key wholly free and no larger than what is
// still needed, in packed order.
func (a *accumulator) takeFull(key func(CPUInfo) int) {
	if a.need == 0 {
		return
	}
	seen := map[int]bool{}
	for _, cpu := range a.packed() {
		id := key(a.t.CPUs[cpu])
		if seen[id] {
			continue
		}
		seen[id] = true
		unit := a.t.cpusWhere(key, id)
		if unit.Size() <= a.need && unit.IsSubsetOf(a.avail) {
			a.add(unit)
		}
		if a.need == 0 {
			return
		}
	}
}

// takeThreads takes single CPUs in packed order: partly used cores and
// sockets first.
func (a *accumulator) takeThreads() {
	for a.need > 0 {
		cpus := a.packed()
		if len(cpus) == 0 {
			return
		}
		a.add(cpuset.New(cpus[0]))
	}
}
