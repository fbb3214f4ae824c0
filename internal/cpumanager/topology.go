package cpumanager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPUInfo places one logical CPU (a hardware thread).
type CPUInfo struct {
	Socket int
	// Core is unique on the node: the lowest CPU ID among the core's
	// threads (sysfs core_id repeats across sockets).
	Core int
	NUMA int
}

// Topology is the node's CPUs: sockets, NUMA nodes, cores and their
// threads. It is immutable once built.
type Topology struct {
	CPUs map[int]CPUInfo
}

// NewTopology builds a Topology from per-CPU placements (tests,
// Discover).
func NewTopology(cpus map[int]CPUInfo) *Topology { return &Topology{CPUs: cpus} }

// Discover reads the online CPUs' topology under sysfsRoot (normally
// /sys): <root>/devices/system/cpu/cpuN/topology/{physical_package_id,
// core_id}, and the NUMA nodes from <root>/devices/system/node/nodeN/
// cpulist (all in node 0 when the kernel has no NUMA nodes to show).
func Discover(sysfsRoot string) (*Topology, error) {
	cpuDir := filepath.Join(sysfsRoot, "devices", "system", "cpu")
	entries, err := os.ReadDir(cpuDir)
	if err != nil {
		return nil, fmt.Errorf("read CPU topology: %w", err)
	}
	var online *cpuset.CPUSet
	if b, err := os.ReadFile(filepath.Join(cpuDir, "online")); err == nil {
		s, err := cpuset.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("read CPU topology: %s/online: %w", cpuDir, err)
		}
		online = &s
	}
	type raw struct{ pkg, core int }
	found := map[int]raw{}
	for _, e := range entries {
		id, ok := cpuID(e.Name())
		if !ok || (online != nil && !online.Contains(id)) {
			continue
		}
		dir := filepath.Join(cpuDir, e.Name(), "topology")
		pkg, err1 := readInt(filepath.Join(dir, "physical_package_id"))
		core, err2 := readInt(filepath.Join(dir, "core_id"))
		if errors.Is(err1, os.ErrNotExist) || errors.Is(err2, os.ErrNotExist) {
			continue // offline: no topology directory
		}
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("read CPU topology: %w", err)
		}
		found[id] = raw{pkg, core}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("read CPU topology: no CPU with a topology under %s", cpuDir)
	}
	numa, err := readNUMA(filepath.Join(sysfsRoot, "devices", "system", "node"))
	if err != nil {
		return nil, err
	}
	// Unique core IDs: the lowest thread of each (package, core_id).
	lowest := map[raw]int{}
	for id, r := range found {
		if l, ok := lowest[r]; !ok || id < l {
			lowest[r] = id
		}
	}
	cpus := make(map[int]CPUInfo, len(found))
	for id, r := range found {
		cpus[id] = CPUInfo{Socket: r.pkg, Core: lowest[r], NUMA: numa[id]}
	}
	return &Topology{CPUs: cpus}, nil
}

func cpuID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "cpu")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// readNUMA maps CPU → NUMA node; empty (every CPU in node 0) without the
// node directory.
func readNUMA(dir string) (map[int]int, error) {
	out := map[int]int{}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read NUMA nodes: %w", err)
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "node")
		n, err := strconv.Atoi(rest)
		if !ok || err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "cpulist"))
		if err != nil {
			return nil, fmt.Errorf("read NUMA nodes: %w", err)
		}
		cpus, err := cpuset.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("read NUMA nodes: %s/%s/cpulist: %w", dir, e.Name(), err)
		}
		for _, c := range cpus.UnsortedList() {
			out[c] = n
		}
	}
	return out, nil
}

// All is every CPU of the node.
func (t *Topology) All() cpuset.CPUSet {
	ids := make([]int, 0, len(t.CPUs))
	for id := range t.CPUs {
		ids = append(ids, id)
	}
	return cpuset.New(ids...)
}

// CPUsPerCore is the number of threads per core (1 without SMT).
func (t *Topology) CPUsPerCore() int {
	cores := t.count(func(c CPUInfo) int { return c.Core })
	if cores == 0 {
		return 1
	}
	return len(t.CPUs) / cores
}

// NumSockets and NumNUMANodes count the node's sockets and NUMA nodes.
func (t *Topology) NumSockets() int   { return t.count(func(c CPUInfo) int { return c.Socket }) }
func (t *Topology) NumNUMANodes() int { return t.count(func(c CPUInfo) int { return c.NUMA }) }

func (t *Topology) count(key func(CPUInfo) int) int {
	seen := map[int]bool{}
	for _, c := range t.CPUs {
		seen[key(c)] = true
	}
	return len(seen)
}

// cpusWhere is the set of CPUs whose key is id.
func (t *Topology) cpusWhere(key func(CPUInfo) int, id int) cpuset.CPUSet {
	var ids []int
	for cpu, c := range t.CPUs {
		if key(c) == id {
			ids = append(ids, cpu)
		}
	}
	return cpuset.New(ids...)
}

// ids lists the distinct keys of the CPUs in s, sorted.
func (t *Topology) ids(s cpuset.CPUSet, key func(CPUInfo) int) []int {
	seen := map[int]bool{}
	for _, cpu := range s.UnsortedList() {
		seen[key(t.CPUs[cpu])] = true
	}
	out := make([]int, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Ints(out)
	return out
}

func bySocket(c CPUInfo) int { return c.Socket }
func byNUMA(c CPUInfo) int   { return c.NUMA }
func byCore(c CPUInfo) int   { return c.Core }

// fullCores is the CPUs of s whose core's threads are all in s.
func (t *Topology) fullCores(s cpuset.CPUSet) cpuset.CPUSet {
	var out []int
	for _, core := range t.ids(s, byCore) {
		if cs := t.cpusWhere(byCore, core); cs.IsSubsetOf(s) {
			out = append(out, cs.List()...)
		}
	}
	return cpuset.New(out...)
}
