package node

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Capacity reads the host's capacity: CPUs, memory, ephemeral storage
// (the file system of rootDir), huge pages, and maxPods.
func Capacity(rootDir string, maxPods int) v1.ResourceList {
	l := v1.ResourceList{
		v1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourcePods: *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	var info syscall.Sysinfo_t
	if syscall.Sysinfo(&info) == nil {
		l[v1.ResourceMemory] = *resource.NewQuantity(int64(info.Totalram)*int64(info.Unit), resource.BinarySI)
	}
	var fs syscall.Statfs_t
	if syscall.Statfs(rootDir, &fs) == nil {
		l[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(fs.Blocks)*fs.Bsize, resource.BinarySI)
	}
	sizes, _ := filepath.Glob("/sys/kernel/mm/hugepages/hugepages-*kB")
	for _, dir := range sizes {
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(dir), "hugepages-"), "kB"), 10, 64)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "nr_hugepages"))
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			continue
		}
		size := resource.NewQuantity(kb*1024, resource.BinarySI)
		name := v1.ResourceName(v1.ResourceHugePagesPrefix + size.String())
		l[name] = *resource.NewQuantity(n*kb*1024, resource.BinarySI)
	}
	return l
}

// Threshold is a hard eviction threshold on a signal, as a quantity or
// a percentage of capacity.
type Threshold struct {
	Signal   string
	Quantity *resource.Quantity
	Percent  float64
}

// DefaultEvictionHard is the kubelet's default --eviction-hard.
const DefaultEvictionHard = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%"

// ParseThresholds parses "signal<value,…" (value a quantity or a
// percentage), as --eviction-hard.
func ParseThresholds(s string) ([]Threshold, error) {
	var out []Threshold
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		sig, val, ok := strings.Cut(part, "<")
		if !ok || sig == "" || val == "" {
			return nil, fmt.Errorf("eviction threshold %q: want signal<quantity or signal<percent%%", part)
		}
		t := Threshold{Signal: sig}
		if p, ok := strings.CutSuffix(val, "%"); ok {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f < 0 || f > 100 {
				return nil, fmt.Errorf("eviction threshold %q: bad percentage", part)
			}
			t.Percent = f / 100
		} else {
			q, err := resource.ParseQuantity(val)
			if err != nil || q.Sign() < 0 {
				return nil, fmt.Errorf("eviction threshold %q: bad quantity", part)
			}
			t.Quantity = &q
		}
		out = append(out, t)
	}
	return out, nil
}

// signalResource is the resource a hard eviction threshold is taken from
// (the kubelet's GetNodeAllocatableAndCapacity).
var signalResource = map[string]v1.ResourceName{
	"memory.available": v1.ResourceMemory,
	"nodefs.available": v1.ResourceEphemeralStorage,
}

// Allocatable is capacity minus the reservations (kube-reserved,
// system-reserved) and the hard eviction thresholds on memory and the
// node file system, never below zero.
func Allocatable(capacity v1.ResourceList, reserved []v1.ResourceList, hard []Threshold) v1.ResourceList {
	out := v1.ResourceList{}
	for name, q := range capacity {
		out[name] = q.DeepCopy()
	}
	sub := func(name v1.ResourceName, q resource.Quantity) {
		cur, ok := out[name]
		if !ok {
			return
		}
		cur.Sub(q)
		if cur.Sign() < 0 {
			cur = *resource.NewQuantity(0, cur.Format)
		}
		out[name] = cur
	}
	for _, r := range reserved {
		for name, q := range r {
			sub(name, q)
		}
	}
	for _, t := range hard {
		name, ok := signalResource[t.Signal]
		if !ok {
			continue
		}
		if t.Quantity != nil {
			sub(name, *t.Quantity)
			continue
		}
		if c, ok := capacity[name]; ok {
			sub(name, *resource.NewQuantity(int64(float64(c.Value())*t.Percent), resource.BinarySI))
		}
	}
	return out
}
