package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Host is where the node's figures are read: roots, so tests give a
// fake tree.
type Host struct {
	ProcRoot   string // "/proc"
	CgroupRoot string // "/sys/fs/cgroup"
	RootDir    string // the agent's root dir: nodefs
}

// userHZ is the kernel's USER_HZ, the unit of /proc/stat (100 on every
// Linux architecture the agent runs on).
const userHZ = 100

// node is the node's figures; what cannot be read is left out (logged at
// debug: a host without a v1 memory controller is not an error).
// Each figure is stamped when it is read (after the CRI calls: a stale
// stamp would skew the rates metrics-server computes).
func (p *Provider) node(onlyCPUAndMemory bool, imageFs *statsapi.FsStats) statsapi.NodeStats {
	h := p.cfg.Host
	n := statsapi.NodeStats{NodeName: p.cfg.NodeName}
	if bt, err := bootTime(h.ProcRoot); err == nil {
		n.StartTime = metav1.NewTime(bt)
	}
	if total, err := hostCPU(h); err == nil {
		cur := cpuSample{at: p.cfg.Clock.Now(), total: total}
		p.mu.Lock()
		r := p.nodeCPU.next(cur)
		p.mu.Unlock()
		n.CPU = &statsapi.CPUStats{Time: metav1.NewTime(cur.at), UsageCoreNanoSeconds: ptr(total), UsageNanoCores: r}
	} else {
		p.log.Debug("node cpu", zap.Error(err))
	}
	now := p.cfg.Clock.Now()
	if m, err := hostMemory(h, now); err == nil {
		n.Memory = m
	} else {
		p.log.Debug("node memory", zap.Error(err))
	}
	if onlyCPUAndMemory {
		return n
	}
	if nw, err := hostNetwork(h.ProcRoot, now); err == nil {
		n.Network = nw
	} else {
		p.log.Debug("node network", zap.Error(err))
	}
	if h.RootDir != "" {
		if fs, err := Statfs(h.RootDir, now); err == nil {
			n.Fs = fs
		}
	}
	if imageFs != nil {
		n.Runtime = &statsapi.RuntimeStats{ImageFs: imageFs, ContainerFs: imageFs}
	}
	if max, cur, err := PIDs(h.ProcRoot); err == nil {
		n.Rlimit = &statsapi.RlimitStats{Time: metav1.NewTime(now), MaxPID: &max, NumOfRunningProcesses: &cur}
	}
	return n
}

// hostCPU is the CPU time the node has used, in core-nanoseconds: the
// root cgroup's (v1 cpuacct.usage, v2 cpu.stat usage_usec), else
// /proc/stat's non-idle time.
func hostCPU(h Host) (uint64, error) {
	for _, f := range []string{"cpu,cpuacct/cpuacct.usage", "cpuacct/cpuacct.usage"} {
		if v, err := readUint(filepath.Join(h.CgroupRoot, f)); err == nil {
			return v, nil
		}
	}
	if kv, err := KeyValues(filepath.Join(h.CgroupRoot, "cpu.stat")); err == nil {
		if v, ok := kv["usage_usec"]; ok {
			return v * 1000, nil
		}
	}
	b, err := os.ReadFile(filepath.Join(h.ProcRoot, "stat"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("/proc/stat: no cpu line")
	}
	var jiffies uint64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		if i == 3 || i == 4 {
			continue // idle, iowait
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		jiffies += n
	}
	return jiffies * (uint64(time.Second) / userHZ), nil
}

// hostMemory is the node's memory as the kubelet reports it: the root
// cgroup's usage and working set (usage less inactive file pages) where
// the v1 memory controller has them, else from /proc/meminfo (usage:
// total less free; working set: usage less inactive file). Available is
// capacity less the working set — what the kubelet's memory.available
// signal is made of.
func hostMemory(h Host, now time.Time) (*statsapi.MemoryStats, error) {
	mi, err := KeyValues(filepath.Join(h.ProcRoot, "meminfo"))
	if err != nil {
		return nil, err
	}
	capacity := mi["MemTotal"] << 10
	if capacity == 0 {
		return nil, errors.New("meminfo: no MemTotal")
	}
	m := &statsapi.MemoryStats{Time: metav1.NewTime(now)}
	var usage, inactive uint64
	if u, err := readUint(filepath.Join(h.CgroupRoot, "memory", "memory.usage_in_bytes")); err == nil {
		st, err := KeyValues(filepath.Join(h.CgroupRoot, "memory", "memory.stat"))
		if err != nil {
			return nil, err
		}
		usage, inactive = u, st["total_inactive_file"]
		m.RSSBytes, m.PageFaults, m.MajorPageFaults = ptr(st["total_rss"]), ptr(st["total_pgfault"]), ptr(st["total_pgmajfault"])
	} else {
		usage = capacity - mi["MemFree"]<<10
		inactive = mi["Inactive(file)"] << 10
		m.RSSBytes = ptr(mi["AnonPages"] << 10)
		if vm, err := KeyValues(filepath.Join(h.ProcRoot, "vmstat")); err == nil {
			m.PageFaults, m.MajorPageFaults = ptr(vm["pgfault"]), ptr(vm["pgmajfault"])
		}
	}
	ws := usage
	if inactive < ws {
		ws -= inactive
	} else {
		ws = 0
	}
	avail := uint64(0)
	if ws < capacity {
		avail = capacity - ws
	}
	m.UsageBytes, m.WorkingSetBytes, m.AvailableBytes = ptr(usage), ptr(ws), ptr(avail)
	return m, nil
}

// hostNetwork is /proc/net/dev of the agent's (the host's) network
// namespace, without the loopback and the pods' veth ends; the default
// interface is eth0 when there is one, else the busiest.
func hostNetwork(procRoot string, now time.Time) (*statsapi.NetworkStats, error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "net", "dev"))
	if err != nil {
		return nil, err
	}
	out := &statsapi.NetworkStats{Time: metav1.NewTime(now)}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		name = strings.TrimSpace(name)
		if !ok || name == "lo" || strings.HasPrefix(name, "veth") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			continue
		}
		num := func(i int) *uint64 {
			v, _ := strconv.ParseUint(f[i], 10, 64)
			return &v
		}
		out.Interfaces = append(out.Interfaces, statsapi.InterfaceStats{Name: name, RxBytes: num(0), RxErrors: num(2), TxBytes: num(8), TxErrors: num(10)})
	}
	if len(out.Interfaces) == 0 {
		return nil, errors.New("no network interface")
	}
	slices.SortFunc(out.Interfaces, func(a, b statsapi.InterfaceStats) int { return strings.Compare(a.Name, b.Name) })
	def := slices.IndexFunc(out.Interfaces, func(i statsapi.InterfaceStats) bool { return i.Name == "eth0" })
	if def < 0 {
		def = 0
		for i, s := range out.Interfaces {
			if *s.RxBytes > *out.Interfaces[def].RxBytes {
				def = i
			}
		}
	}
	out.InterfaceStats = out.Interfaces[def]
	return out, nil
}

// Statfs is the file system holding path: bytes and inodes, capacity,
// available (to unprivileged users, as df) and used.
func Statfs(path string, now time.Time) (*statsapi.FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", path, err)
	}
	return fsStats(st, now), nil
}

func fsStats(st unix.Statfs_t, now time.Time) *statsapi.FsStats {
	bs := uint64(st.Bsize)
	return &statsapi.FsStats{
		Time:           metav1.NewTime(now),
		AvailableBytes: ptr(st.Bavail * bs),
		CapacityBytes:  ptr(st.Blocks * bs),
		UsedBytes:      ptr((st.Blocks - st.Bfree) * bs),
		InodesFree:     ptr(st.Ffree),
		Inodes:         ptr(st.Files),
		InodesUsed:     ptr(st.Files - st.Ffree),
	}
}

// PIDs is the kernel's pid_max and the threads it runs (/proc/loadavg's
// "running/total"): the figures of the kubelet's pid.available.
func PIDs(procRoot string) (max, cur int64, err error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "pid_max"))
	if err != nil {
		return 0, 0, err
	}
	if max, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("pid_max: %w", err)
	}
	la, err := os.ReadFile(filepath.Join(procRoot, "loadavg"))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(la))
	if len(f) < 4 {
		return 0, 0, errors.New("loadavg: short")
	}
	_, total, ok := strings.Cut(f[3], "/")
	if cur, err = strconv.ParseInt(total, 10, 64); !ok || err != nil {
		return 0, 0, fmt.Errorf("loadavg: %q", f[3])
	}
	return max, cur, nil
}

func bootTime(procRoot string) (time.Time, error) {
	kv, err := KeyValues(filepath.Join(procRoot, "stat"))
	if err != nil {
		return time.Time{}, err
	}
	bt, ok := kv["btime"]
	if !ok {
		return time.Time{}, errors.New("/proc/stat: no btime")
	}
	return time.Unix(int64(bt), 0), nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// KeyValues reads "key value" or "key: value [kB]" lines; the first number
// of each line is kept, lines without one are skipped.
func KeyValues(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		out[strings.TrimSuffix(f[0], ":")] = v
	}
	return out, nil
}
