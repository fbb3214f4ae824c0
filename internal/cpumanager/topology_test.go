package cpumanager

import (
	"errors"
	"testing"

	"k8s.io/utils/cpuset"
)

func TestDiscover(t *testing.T) {
	tests := []struct {
		name                       string
		m                          machine
		cpus, perCore, socks, numa int
	}{
		{"1 socket x 2 cores", oneSocketTwoCores, 2, 1, 1, 1},
		{"2 sockets x 8 cores x 2 threads", dualSocketHT, 32, 2, 2, 2},
		{"2 NUMA nodes in one socket", twoNUMANodes, 8, 1, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topo := tt.m.topology(t)
			if got := len(topo.CPUs); got != tt.cpus {
				t.Errorf("%d CPUs, want %d", got, tt.cpus)
			}
			if got := topo.CPUsPerCore(); got != tt.perCore {
				t.Errorf("CPUsPerCore %d, want %d", got, tt.perCore)
			}
			if got := topo.NumSockets(); got != tt.socks {
				t.Errorf("NumSockets %d, want %d", got, tt.socks)
			}
			if got := topo.NumNUMANodes(); got != tt.numa {
				t.Errorf("NumNUMANodes %d, want %d", got, tt.numa)
			}
		})
	}
	// core_id repeats across sockets; cores stay distinct.
	topo := dualSocketHT.topology(t)
	if a, b := topo.CPUs[0], topo.CPUs[8]; a.Core == b.Core || a.Socket == b.Socket {
		t.Errorf("CPU 0 %+v and CPU 8 %+v share a core", a, b)
	}
	if a, b := topo.CPUs[1], topo.CPUs[17]; a != b {
		t.Errorf("siblings CPU 1 %+v and CPU 17 %+v differ", a, b)
	}
	if _, err := Discover(t.TempDir()); err == nil {
		t.Error("Discover of an empty root: no error")
	}
}

func TestTakeOrder(t *testing.T) {
	tests := []struct {
		name  string
		m     machine
		avail string
		n     int
		want  string
	}{
		{"single core", oneSocketTwoCores, "1", 1, "1"},
		{"a whole core with its sibling, packed in the partly used socket", dualSocketHT, "1-15,17-31", 2, "1,17"},
		{"a whole socket", dualSocketHT, "1-15,17-31", 16, "8-15,24-31"},
		{"a whole core, then a thread of the next core", dualSocketHT, "1-15,17-31", 3, "1-2,17"},
		{"a partly used core first", dualSocketHT, "3-15,18-31", 1, "18"},
		{"a whole NUMA node/socket, then a thread of the other", dualSocketHT, "0-31", 17, "0-8,16-23"},
		{"a whole NUMA node inside a socket", twoNUMANodes, "1-7", 4, "4-7"},
		{"packed into the partly used NUMA node", twoNUMANodes, "1-7", 2, "1-2"},
		{"lowest CPUs for the reservation", dualSocketHT, "0-31", 2, "0,16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.m.topology(t).take(set(tt.avail), tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equals(set(tt.want)) {
				t.Errorf("take(%s, %d) = %s, want %s", tt.avail, tt.n, got, tt.want)
			}
		})
	}
	_, err := oneSocketTwoCores.topology(t).take(cpuset.New(1), 2)
	var ne *NotEnoughCPUsError
	if !errors.As(err, &ne) || ne.Requested != 2 || ne.Available != 1 {
		t.Errorf("take 2 of 1: %v, want NotEnoughCPUsError requested=2 available=1", err)
	}
}
