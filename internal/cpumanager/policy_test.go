package cpumanager

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// assignments renders the exclusive assignments for cmp.
func assignments(m *Manager) map[string]map[string]string {
	out := map[string]map[string]string{}
	for uid, cs := range m.Assignments() {
		out[uid] = map[string]string{}
		for name, set := range cs {
			out[uid][name] = set.String()
		}
	}
	return out
}

func TestStaticAllocationOrder(t *testing.T) {
	e := newEnv(t, dualSocketHT, func(c *Config) { c.ReservedMilliCPU = 1500 }) // 2 CPUs: core 0
	if got := e.m.reserved; !got.Equals(set("0,16")) {
		t.Fatalf("reserved %s, want 0,16", got)
	}
	steps := []struct {
		pod  *v1.Pod
		want map[string]string // container → CPUs; absent: shared
	}{
		{newPod("two", v1.RestartPolicyAlways, nil, container("c", "2")), map[string]string{"c": "1,17"}},
		{newPod("socket", v1.RestartPolicyAlways, nil, container("c", "16")), map[string]string{"c": "8-15,24-31"}},
		{newPod("three", v1.RestartPolicyAlways, nil, container("c", "3")), map[string]string{"c": "2-3,18"}},
		{newPod("one", v1.RestartPolicyAlways, nil, container("c", "1")), map[string]string{"c": "19"}},
		{newPod("fraction", v1.RestartPolicyAlways, nil, container("c", "1500m")), nil},
		{newPod("mixed", v1.RestartPolicyAlways, nil, container("whole", "1"), container("part", "500m")), map[string]string{"whole": "4"}},
	}
	for _, s := range steps {
		if err := e.m.Allocate(s.pod); err != nil {
			t.Fatalf("allocate %s: %v", s.pod.Name, err)
		}
		for _, c := range s.pod.Spec.Containers {
			got, _ := e.m.ContainerCPUs(s.pod.UID, c.Name)
			want, ok := s.want[c.Name]
			if !ok {
				want = e.m.SharedCPUs().String()
			}
			if got != want {
				t.Errorf("%s/%s: CPUs %s, want %s", s.pod.Name, c.Name, got, want)
			}
		}
	}
	if got, want := e.m.SharedCPUs(), set("0,5-7,16,20-23"); !got.Equals(want) {
		t.Errorf("shared pool %s, want %s", got, want)
	}
	// Burstable and BestEffort pods get nothing exclusive.
	burstable := newPod("burstable", v1.RestartPolicyAlways, nil, container("c", "2"))
	burstable.Spec.Containers[0].Resources.Limits = nil
	for _, p := range []*v1.Pod{burstable, newPod("besteffort", v1.RestartPolicyAlways, nil, container("c", ""))} {
		if err := e.m.Allocate(p); err != nil {
			t.Fatal(err)
		}
		if got, _ := e.m.ContainerCPUs(p.UID, "c"); got != "0,5-7,16,20-23" {
			t.Errorf("%s: CPUs %s, want the shared pool", p.Name, got)
		}
	}
	// Not enough: all or nothing.
	big := newPod("big", v1.RestartPolicyAlways, nil, container("a", "2"), container("b", "8"))
	err := e.m.Allocate(big)
	var ne *NotEnoughCPUsError
	if !errors.As(err, &ne) || ne.Requested != 8 || ne.Available != 5 {
		t.Fatalf("allocate 2+8 with 7 free: %v, want requested=8 available=5 (after the first container's 2)", err)
	}
	if _, ok := e.m.Assignments()[string(big.UID)]; ok {
		t.Errorf("refused pod keeps CPUs: %v", e.m.Assignments()[string(big.UID)])
	}
	if got := e.m.SharedCPUs(); !got.Equals(set("0,5-7,16,20-23")) {
		t.Errorf("shared pool after a refusal %s, want it unchanged", got)
	}
}

func TestSingleSocketTwoCores(t *testing.T) {
	e := newEnv(t, oneSocketTwoCores) // reserved: 1 CPU, CPU 0
	g := newPod("g", v1.RestartPolicyAlways, nil, container("c", "1"))
	if err := e.m.Allocate(g); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.ContainerCPUs(g.UID, "c"); got != "1" {
		t.Errorf("CPUs %s, want 1", got)
	}
	if got := e.m.SharedCPUs(); !got.Equals(set("0")) {
		t.Errorf("shared %s, want 0 (the reserved CPU stays shared)", got)
	}
	err := e.m.Allocate(newPod("g2", v1.RestartPolicyAlways, nil, container("c", "1")))
	if err == nil || !strings.Contains(err.Error(), "requested=1, available=0") {
		t.Errorf("second pod: %v, want requested=1, available=0", err)
	}
	// Admitting the same pod again keeps its CPUs.
	if err := e.m.Allocate(g); err != nil {
		t.Fatal(err)
	}
	e.m.RemoveStale(map[pod.UID]bool{})
	if got := e.m.SharedCPUs(); !got.Equals(set("0-1")) {
		t.Errorf("shared after the pod went %s, want 0-1", got)
	}
	if err := e.m.Allocate(newPod("g2", v1.RestartPolicyAlways, nil, container("c", "1"))); err != nil {
		t.Errorf("after release: %v", err)
	}
}

func TestReservedCPUs(t *testing.T) {
	tests := []struct {
		name    string
		m       machine
		cfg     func(*Config)
		want    string
		wantErr string
	}{
		{"--reserved-cpus", dualSocketHT, func(c *Config) { c.ReservedCPUs = set("3,5"); c.ReservedMilliCPU = 0 }, "3,5", ""},
		{"--reserved-cpus wins over kube/system reserved", dualSocketHT, func(c *Config) { c.ReservedCPUs = set("7"); c.ReservedMilliCPU = 4000 }, "7", ""},
		{"derived: ceil(1100m) = 2, a whole core", dualSocketHT, func(c *Config) { c.ReservedMilliCPU = 1100 }, "0,16", ""},
		{"derived: 3, a core then a thread", dualSocketHT, func(c *Config) { c.ReservedMilliCPU = 3000 }, "0-1,16", ""},
		{"derived on NUMA nodes", twoNUMANodes, func(c *Config) { c.ReservedMilliCPU = 500 }, "0", ""},
		{"none reserved", oneSocketTwoCores, func(c *Config) { c.ReservedMilliCPU = 0 }, "", "needs CPUs reserved"},
		{"not on this node", oneSocketTwoCores, func(c *Config) { c.ReservedCPUs = set("2") }, "", "not all are CPUs of this node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := &env{updater: &fakeUpdater{}}
			cfg := Config{Policy: PolicyStatic, SysfsRoot: tt.m.sysfs(t), StateDir: t.TempDir(), Updater: e.updater, Pods: &fakeSpecs{},
				Clock: newEnv(t, oneSocketTwoCores).clock, Logger: newEnv(t, oneSocketTwoCores).cfg.Logger}
			tt.cfg(&cfg)
			m, err := New(cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !m.reserved.Equals(set(tt.want)) {
				t.Errorf("reserved %s, want %s", m.reserved, tt.want)
			}
			// Reserved CPUs are never given out.
			free := m.topo.All().Difference(m.reserved).Size()
			p := newPod("all", v1.RestartPolicyAlways, nil, container("c", itoa(free)))
			if err := m.Allocate(p); err != nil {
				t.Fatal(err)
			}
			if got := m.Assignments()[string(p.UID)]["c"]; got.Intersection(m.reserved).Size() > 0 {
				t.Errorf("exclusive %s overlaps reserved %s", got, m.reserved)
			}
			if !m.SharedCPUs().Equals(m.reserved) {
				t.Errorf("shared %s, want the reserved %s", m.SharedCPUs(), m.reserved)
			}
		})
	}
}

func itoa(n int) string { return cpuset.New(n).String() }

func TestInitContainersCPUsReused(t *testing.T) {
	tests := []struct {
		name       string
		init       []v1.Container
		app        []v1.Container
		wantShared string
		check      func(t *testing.T, a map[string]cpuset.CPUSet)
	}{
		{"app inside the init's CPUs", []v1.Container{container("init", "4")}, []v1.Container{container("app", "2")}, "0-1,4-7,16-17,20-23",
			func(t *testing.T, a map[string]cpuset.CPUSet) {
				if !a["app"].IsSubsetOf(a["init"]) {
					t.Errorf("app %s not within init %s", a["app"], a["init"])
				}
			}},
		{"app beyond the init's CPUs", []v1.Container{container("init", "2")}, []v1.Container{container("app", "4")}, "0-1,4-7,16-17,20-23",
			func(t *testing.T, a map[string]cpuset.CPUSet) {
				if !a["init"].IsSubsetOf(a["app"]) {
					t.Errorf("init %s not within app %s", a["init"], a["app"])
				}
			}},
		{"two apps share no CPU, both from the init's", []v1.Container{container("init", "4")}, []v1.Container{container("a", "2"), container("b", "2")}, "0-1,4-7,16-17,20-23",
			func(t *testing.T, a map[string]cpuset.CPUSet) {
				if a["a"].Intersection(a["b"]).Size() > 0 || !a["a"].Union(a["b"]).Equals(a["init"]) {
					t.Errorf("a %s b %s init %s", a["a"], a["b"], a["init"])
				}
			}},
		{"a sidecar's CPUs are its own", []v1.Container{sidecar(container("side", "2"))}, []v1.Container{container("app", "2")}, "0-1,4-7,16-17,20-23",
			func(t *testing.T, a map[string]cpuset.CPUSet) {
				if a["side"].Intersection(a["app"]).Size() > 0 {
					t.Errorf("sidecar %s and app %s share CPUs", a["side"], a["app"])
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Reserve all but cores 2-5 of socket 0 (CPUs 2-5,18-21) so the
			// numbers are easy to follow; each pod takes 4 of them.
			e := newEnv(t, dualSocketHT, func(c *Config) { c.ReservedCPUs = set("0-1,6-15,16-17,22-31") })
			p := newPod("p", v1.RestartPolicyAlways, tt.init, tt.app...)
			if err := e.m.Allocate(p); err != nil {
				t.Fatal(err)
			}
			tt.check(t, e.m.Assignments()[string(p.UID)])
			if got := e.m.SharedCPUs().Difference(set("8-15,24-31")); !got.Equals(set(tt.wantShared)) {
				t.Errorf("shared (socket 0) %s, want %s", got, tt.wantShared)
			}
		})
	}
}

func sidecar(c v1.Container) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func TestFullPCPUsOnly(t *testing.T) {
	opt := func(c *Config) {
		c.Options = map[string]string{OptionFullPCPUsOnly: "true"}
		c.ReservedCPUs = set("0") // CPU 16, its sibling, cannot be given out either
	}
	tests := []struct {
		name    string
		cpus    string
		want    string
		wantErr string
	}{
		{"whole core", "2", "1,17", ""},
		{"two whole cores", "4", "1-2,17-18", ""},
		{"not a multiple of the threads per core", "3", "", "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"},
		{"more than the free whole cores", "32", "", "not enough free physical CPUs: available physical CPUs = 30, requested CPUs = 32, CPUs per core = 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, dualSocketHT, opt)
			p := newPod("p", v1.RestartPolicyAlways, nil, container("c", tt.cpus))
			err := e.m.Allocate(p)
			if tt.wantErr != "" {
				var smt *SMTAlignmentError
				if !errors.As(err, &smt) || smt.Reason() != "SMTAlignmentError" || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want SMTAlignmentError %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.m.Assignments()[string(p.UID)]["c"]; !got.Equals(set(tt.want)) {
				t.Errorf("CPUs %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := New(Config{Policy: PolicyNone, StateDir: t.TempDir(), Logger: newEnv(t, oneSocketTwoCores).cfg.Logger,
		Options: map[string]string{OptionFullPCPUsOnly: "true"}}); err == nil {
		t.Error("full-pcpus-only with the none policy: no error")
	}
	e := newEnv(t, dualSocketHT)
	if _, err := e.restart(t, func(c *Config) { c.Options = map[string]string{"distribute-cpus-across-numa": "true"} }); err == nil {
		t.Error("unknown option: no error")
	}
}

func TestNonePolicy(t *testing.T) {
	dir := t.TempDir()
	m, err := New(Config{Policy: PolicyNone, StateDir: dir, Logger: newEnv(t, oneSocketTwoCores).cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	p := newPod("g", v1.RestartPolicyAlways, nil, container("c", "1"))
	if err := m.Allocate(p); err != nil {
		t.Fatal(err)
	}
	if cpus, ok := m.ContainerCPUs(p.UID, "c"); ok {
		t.Errorf("none policy sets a cpuset %q", cpus)
	}
	if diff := cmp.Diff(map[string]map[string]string{}, assignments(m)); diff != "" {
		t.Errorf("assignments (-want +got):\n%s", diff)
	}
}
