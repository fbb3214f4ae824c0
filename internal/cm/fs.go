package cm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// v2Controllers are the controllers enabled down to the pod cgroups on
// cgroup v2, those the host has.
var v2Controllers = []string{"cpuset", "cpu", "io", "memory", "hugetlb", "pids"}

// fs is the cgroup file system: the hierarchies under the mount root and
// the files written in them.
type fs struct {
	v2 bool
	// hier are the hierarchies' roots: on v1 one per mounted hierarchy
	// (controller directories, named ones, a hybrid host's unified one;
	// symlinks such as cpu -> cpu,cpuacct skipped); on v2 the mount root.
	hier []string
	// cpuDir, memDir and pidsDir hold cpu.*, memory.* and pids.* files
	// (pidsDir "" on a v1 host without the pids controller).
	cpuDir, memDir, pidsDir string
	// enable is what v2 parents get in cgroup.subtree_control.
	enable string
	// rmdir removes an empty cgroup (unix.Rmdir; tests give cgroupfs
	// semantics to a plain directory).
	rmdir func(string) error
}

// discover finds the hierarchies under mountRoot: v2 when the root has
// cgroup.controllers, else each directory holding cgroup.procs.
func discover(mountRoot string) (*fs, error) {
	f := &fs{rmdir: unix.Rmdir}
	if b, err := os.ReadFile(filepath.Join(mountRoot, "cgroup.controllers")); err == nil {
		f.v2, f.hier, f.cpuDir, f.memDir, f.pidsDir = true, []string{mountRoot}, mountRoot, mountRoot, mountRoot
		have := strings.Fields(string(b))
		var on []string
		for _, c := range v2Controllers {
			if slices.Contains(have, c) {
				on = append(on, "+"+c)
			}
		}
		if !slices.Contains(have, "cpu") || !slices.Contains(have, "memory") {
			return nil, fmt.Errorf("cgroup v2 at %s lacks the cpu or memory controller (has %q)", mountRoot, strings.TrimSpace(string(b)))
		}
		f.enable = strings.Join(on, " ")
		return f, nil
	}
	entries, err := os.ReadDir(mountRoot)
	if err != nil {
		return nil, fmt.Errorf("read cgroup mount root: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() { // symlinks too: their target is listed under its own name
			continue
		}
		dir := filepath.Join(mountRoot, e.Name())
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
			continue
		}
		f.hier = append(f.hier, dir)
		ctrls := strings.Split(e.Name(), ",")
		if slices.Contains(ctrls, "cpu") && f.cpuDir == "" {
			f.cpuDir = dir
		}
		if slices.Contains(ctrls, "memory") && f.memDir == "" {
			f.memDir = dir
		}
		if slices.Contains(ctrls, "pids") && f.pidsDir == "" {
			f.pidsDir = dir
		}
	}
	if f.cpuDir == "" || f.memDir == "" {
		return nil, fmt.Errorf("no cgroup v2 and no cgroup v1 cpu and memory hierarchies under %s", mountRoot)
	}
	return f, nil
}

// ensure makes the cgroup rel (slash-separated, relative to each
// hierarchy's root) and its missing parents in every hierarchy. New v1
// cpuset cgroups get their parent's cpus and mems; on v2 each parent
// enables the controllers for its children.
func (f *fs) ensure(rel string) error {
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	for _, h := range f.hier {
		if _, err := os.Stat(filepath.Join(h, rel)); err == nil {
			continue
		}
		dir := h
		for _, part := range parts {
			parent := dir
			dir = filepath.Join(dir, part)
			if f.v2 && f.enable != "" {
				if err := writeFile(parent, "cgroup.subtree_control", f.enable); err != nil {
					return fmt.Errorf("enable controllers for %s: %w", dir, err)
				}
			}
			err := os.Mkdir(dir, 0o755)
			if errors.Is(err, os.ErrExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("create cgroup: %w", err)
			}
			if !f.v2 && slices.Contains(strings.Split(filepath.Base(h), ","), "cpuset") {
				if err := inheritCpuset(parent, dir); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// inheritCpuset gives a new v1 cpuset cgroup its parent's CPUs and
// memory nodes: empty ones would refuse every process.
func inheritCpuset(parent, dir string) error {
	for _, name := range []string{"cpuset.cpus", "cpuset.mems"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && strings.TrimSpace(string(b)) != "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(parent, name))
		if err != nil {
			return fmt.Errorf("read parent cpuset: %w", err)
		}
		if err := writeFile(dir, name, strings.TrimSpace(string(b))); err != nil {
			return err
		}
	}
	return nil
}

// apply writes r to the cgroup rel: cpu shares (v2: weight), the CFS
// quota, the memory limit, the pids limit when set; unlimited ones
// written as such.
func (f *fs) apply(rel string, r Resources) error {
	if err := f.setShares(rel, r.CPUShares); err != nil {
		return err
	}
	if r.PIDs > 0 && f.pidsDir != "" {
		if err := writeFile(filepath.Join(f.pidsDir, rel), "pids.max", strconv.FormatInt(r.PIDs, 10)); err != nil {
			return err
		}
	}
	cpu, mem := filepath.Join(f.cpuDir, rel), filepath.Join(f.memDir, rel)
	if f.v2 {
		max := "max"
		if r.CPUQuota > 0 {
			max = fmt.Sprintf("%d %d", r.CPUQuota, r.CPUPeriod)
		}
		if err := writeFile(cpu, "cpu.max", max); err != nil {
			return err
		}
		limit := "max"
		if r.Memory > 0 {
			limit = strconv.FormatInt(r.Memory, 10)
		}
		return writeFile(mem, "memory.max", limit)
	}
	quota := int64(-1)
	if r.CPUQuota > 0 {
		if err := writeFile(cpu, "cpu.cfs_period_us", strconv.FormatUint(r.CPUPeriod, 10)); err != nil {
			return err
		}
		quota = r.CPUQuota
	}
	if err := writeFile(cpu, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)); err != nil {
		return err
	}
	limit := int64(-1)
	if r.Memory > 0 {
		limit = r.Memory
	}
	return writeFile(mem, "memory.limit_in_bytes", strconv.FormatInt(limit, 10))
}

// setShares writes the cpu shares of the cgroup rel (v2: cpu.weight).
func (f *fs) setShares(rel string, shares uint64) error {
	if f.v2 {
		return writeFile(filepath.Join(f.cpuDir, rel), "cpu.weight", strconv.FormatUint(sharesToWeight(shares), 10))
	}
	return writeFile(filepath.Join(f.cpuDir, rel), "cpu.shares", strconv.FormatUint(shares, 10))
}

// exists reports whether the cgroup rel is there (in the cpu
// hierarchy).
func (f *fs) exists(rel string) bool {
	_, err := os.Stat(filepath.Join(f.cpuDir, rel))
	return err == nil
}

// children lists the cgroups directly under rel in any hierarchy, by
// name.
func (f *fs) children(rel string) map[string]bool {
	out := map[string]bool{}
	for _, h := range f.hier {
		entries, _ := os.ReadDir(filepath.Join(h, rel))
		for _, e := range entries {
			if e.IsDir() {
				out[e.Name()] = true
			}
		}
	}
	return out
}

// populated reports whether the cgroup rel or one beneath it holds a
// process in any hierarchy (v2: cgroup.events; v1: every cgroup.procs).
// A cgroup it cannot read counts as populated.
func (f *fs) populated(rel string) bool {
	for _, h := range f.hier {
		dir := filepath.Join(h, rel)
		if f.v2 {
			kv, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
			if errors.Is(err, os.ErrNotExist) {
				if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
					continue
				}
			}
			if err != nil || !strings.Contains(string(kv), "populated 0") {
				return true
			}
			continue
		}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() {
				return nil
			}
			if d.Name() == "cgroup.procs" {
				b, err := os.ReadFile(p)
				if err != nil || strings.TrimSpace(string(b)) != "" {
					return errPopulated
				}
			}
			return nil
		})
		if err != nil {
			return true
		}
	}
	return false
}

var errPopulated = errors.New("populated")

// remove removes the cgroup rel from every hierarchy, the empty cgroups
// beneath it first (what the runtime left of its containers). A cgroup
// that still has processes stays: the error says so.
func (f *fs) remove(rel string) error {
	var errs []error
	for _, h := range f.hier {
		if err := f.removeTree(filepath.Join(h, rel)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (f *fs) removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := f.removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := f.rmdir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// writeFile writes one cgroup interface file.
func writeFile(dir, name, value string) error {
	return os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644)
}
