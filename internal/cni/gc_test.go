package cni

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"
)

var (
	now    = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	old    = now.Add(-2 * time.Minute)
	recent = now.Add(-10 * time.Second)
)

func att(id, ifName string, mod time.Time) attachment {
	return attachment{NetworkAttachment: &libcni.NetworkAttachment{ContainerID: id, IfName: ifName, Network: "net"}, modTime: mod}
}

func TestValidAttachments(t *testing.T) {
	tests := []struct {
		name   string
		ready  []string
		cached []attachment
		res    []reservation
		want   []types.GCAttachment
	}{
		{name: "nothing", want: []types.GCAttachment{}},
		{name: "ready sandboxes on eth0, of any client", ready: []string{"b", "a"},
			want: []types.GCAttachment{{ContainerID: "a", IfName: "eth0"}, {ContainerID: "b", IfName: "eth0"}}},
		{name: "young cached attachments kept, old ones not", cached: []attachment{att("new", "eth0", recent), att("old", "eth0", old)},
			want: []types.GCAttachment{{ContainerID: "new", IfName: "eth0"}}},
		{name: "young reservations kept, with their interface or eth0",
			res:  []reservation{{containerID: "r1", ifName: "net1", modTime: recent}, {containerID: "r2", modTime: recent}, {containerID: "r3", modTime: old}},
			want: []types.GCAttachment{{ContainerID: "r1", IfName: "net1"}, {ContainerID: "r2", IfName: "eth0"}}},
		{name: "no duplicates", ready: []string{"a"}, cached: []attachment{att("a", "eth0", recent)},
			res:  []reservation{{containerID: "a", ifName: "eth0", modTime: recent}},
			want: []types.GCAttachment{{ContainerID: "a", IfName: "eth0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := validAttachments(tt.ready, tt.cached, tt.res, now, time.Minute)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestStaleAttachments(t *testing.T) {
	other := att("x", "eth0", old)
	other.Network = "other"
	cached := []attachment{att("ready", "eth0", old), att("young", "eth0", recent), att("leaked", "eth0", old), other}
	got := staleAttachments("net", cached, map[string]bool{"ready": true}, now, time.Minute)
	if len(got) != 1 || got[0].ContainerID != "leaked" {
		t.Errorf("stale = %+v, want only the leaked one (not ready, not young, not another network's)", got)
	}
}

func TestStaleReservations(t *testing.T) {
	tests := []struct {
		name string
		r    reservation
		want bool
	}{
		{name: "leaked", r: reservation{ip: "10.0.0.9", containerID: "gone", modTime: old}, want: true},
		{name: "ready sandbox's", r: reservation{ip: "10.0.0.2", containerID: "ready", modTime: old}},
		{name: "a live sandbox's IP under another ID", r: reservation{ip: "10.0.0.3", containerID: "gone", modTime: old}},
		{name: "younger than the grace", r: reservation{ip: "10.0.0.9", containerID: "creating", modTime: recent}},
		{name: "empty file", r: reservation{ip: "10.0.0.9", modTime: old}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := staleReservations([]reservation{tt.r}, map[string]bool{"ready": true}, map[string]bool{"10.0.0.3": true}, now, time.Minute)
			if (len(got) == 1) != tt.want {
				t.Errorf("stale = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHostLocalDirs(t *testing.T) {
	tests := []struct {
		name string
		list string
		want []string
	}{
		{name: "dataDir", list: `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","ipam":{"type":"host-local","dataDir":"/d"}},{"type":"portmap"}]}`,
			want: []string{"/d/n"}},
		{name: "default dataDir", list: `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","ipam":{"type":"host-local"}}]}`,
			want: []string{"/var/lib/cni/networks/n"}},
		{name: "other IPAM", list: `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge","ipam":{"type":"dhcp"}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := libcni.ConfListFromBytes([]byte(tt.list))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, hostLocalDirs(l)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// fakeSandboxes is a runtime with ready sandboxes and their IPs.
type fakeSandboxes struct {
	ips     map[string][]string
	listErr error
	ipCalls int
}

func (f *fakeSandboxes) Known(context.Context) ([]string, error) {
	var ids []string
	for id := range f.ips {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, f.listErr
}

func (f *fakeSandboxes) IPs(_ context.Context, id string) ([]string, error) {
	f.ipCalls++
	return f.ips[id], nil
}

// gcRig is a conf dir, fake plugins, a libcni cache and a host-local store.
type gcRig struct {
	conf, bin, cache, store string
}

func newGCRig(t *testing.T, version string) gcRig {
	t.Helper()
	r := gcRig{conf: t.TempDir(), bin: fakePlugins(t, allPlugins(current)), cache: t.TempDir()}
	data := t.TempDir()
	r.store = filepath.Join(data, "net")
	os.MkdirAll(r.store, 0o755)
	os.MkdirAll(filepath.Join(r.cache, "results"), 0o755)
	body := `{"cniVersion":"` + version + `","name":"net","plugins":[{"type":"bridge","ipam":{"type":"host-local","dataDir":"` + data + `"}},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	os.WriteFile(filepath.Join(r.conf, "10-net.conflist"), []byte(body), 0o644)
	// host-local's own files, never reservations
	os.WriteFile(filepath.Join(r.store, "lock"), nil, 0o600)
	os.WriteFile(filepath.Join(r.store, "last_reserved_ip.0"), []byte("10.0.0.9"), 0o644)
	return r
}

func (r gcRig) reserve(t *testing.T, ip, content string, mod time.Time) {
	t.Helper()
	p := filepath.Join(r.store, ip)
	os.WriteFile(p, []byte(content), 0o644)
	os.Chtimes(p, mod, mod)
}

func (r gcRig) cacheAttachment(t *testing.T, network, id string, mod time.Time) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"kind": "cniCacheV1", "containerId": id, "ifName": "eth0", "networkName": network,
		"netns": "/var/run/netns/gone", "config": []byte(`{}`)})
	p := filepath.Join(r.cache, "results", network+"-"+id+"-eth0")
	os.WriteFile(p, b, 0o600)
	os.Chtimes(p, mod, mod)
}

func (r gcRig) files(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func (r gcRig) monitor(t *testing.T, sbs Sandboxes, clk *clocktesting.FakeClock, log *zap.Logger) *Monitor {
	t.Helper()
	m, err := NewMonitor(MonitorConfig{ConfDir: r.conf, BinDirs: []string{r.bin}, CacheDir: r.cache, Sandboxes: sbs, GCPeriod: 30 * time.Second, Clock: clk, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	m.Recheck(context.Background(), true)
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGC(t *testing.T) {
	wall := time.Now()
	clk := clocktesting.NewFakeClock(wall)
	r := newGCRig(t, "1.1.0")
	sbs := &fakeSandboxes{ips: map[string][]string{"ready1": {"10.0.0.2"}, "ready2": {"10.0.0.3", "fd00::3"}}}
	long, short := wall.Add(-5*time.Minute), wall.Add(-5*time.Second)
	r.reserve(t, "10.0.0.2", "ready1\r\neth0", long)    // a ready sandbox's
	r.reserve(t, "10.0.0.3", "gone9\r\neth0", long)     // a ready sandbox's IP, another ID: never released
	r.reserve(t, "fd00::4", "gone4\r\neth0", long)      // leaked
	r.reserve(t, "10.0.0.5", "gone5", long)             // leaked, written by a plugin that predates ifName
	r.reserve(t, "10.0.0.6", "creating\r\neth0", short) // a sandbox being created
	r.cacheAttachment(t, "net", "ready1", long)
	r.cacheAttachment(t, "net", "leaked7", long)
	r.cacheAttachment(t, "net", "creating", short)
	r.cacheAttachment(t, "othernet", "foreign", long)

	core, logs := observer.New(zapcore.InfoLevel)
	m := r.monitor(t, sbs, clk, zap.New(core))
	res, err := m.GC(context.Background())
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	sort.Strings(res.IPs)
	if d := cmp.Diff(GCResult{Attachments: []string{"leaked7"}, IPs: []string{"10.0.0.5", "fd00::4"}}, res); d != "" {
		t.Errorf("released (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"10.0.0.2", "10.0.0.3", "10.0.0.6", "last_reserved_ip.0", "lock"}, r.files(r.store)); d != "" {
		t.Errorf("store (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"net-creating-eth0", "net-ready1-eth0", "othernet-foreign-eth0"}, r.files(filepath.Join(r.cache, "results"))); d != "" {
		t.Errorf("cache (-want +got):\n%s", d)
	}
	// The leaked attachment got a DEL through the whole list, in reverse.
	calls, _ := os.ReadFile(filepath.Join(r.bin, "calls"))
	for _, want := range []string{"DEL leaked7", "GC "} {
		if !strings.Contains(string(calls), want) {
			t.Errorf("plugin calls %q lack %q", calls, want)
		}
	}
	if strings.Contains(string(calls), "DEL ready1") || strings.Contains(string(calls), "DEL creating") || strings.Contains(string(calls), "DEL foreign") {
		t.Errorf("DEL of a kept attachment: %s", calls)
	}
	// The plugins' GC got the valid set: ready sandboxes and young ones.
	var gc struct {
		Valid []types.GCAttachment `json:"cni.dev/valid-attachments"`
	}
	b, err := os.ReadFile(filepath.Join(r.bin, "gc-bridge.json"))
	if err != nil {
		t.Fatalf("bridge got no GC: %v", err)
	}
	json.Unmarshal(b, &gc)
	want := []types.GCAttachment{{ContainerID: "creating", IfName: "eth0"}, {ContainerID: "ready1", IfName: "eth0"}, {ContainerID: "ready2", IfName: "eth0"}}
	if d := cmp.Diff(want, gc.Valid); d != "" {
		t.Errorf("valid attachments (-want +got):\n%s", d)
	}
	if n := logs.FilterMessage("released leaked pod IP").Len(); n != 2 {
		t.Errorf("%d 'released leaked pod IP' log lines, want 2", n)
	}

	// Once the sandbox being created is older than the grace and still not
	// ready (it failed), its reservation and attachment go too.
	clk.Step(2 * time.Minute)
	res, err = m.GC(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(GCResult{Attachments: []string{"creating"}, IPs: []string{"10.0.0.6"}}, res); d != "" {
		t.Errorf("second GC (-want +got):\n%s", d)
	}
	// The reservation under a live IP stays a candidate by its ID, so the
	// runtime is asked for IPs; with it gone, nothing is left to release
	// and the runtime is not asked again.
	os.Remove(filepath.Join(r.store, "10.0.0.3"))
	calls1 := sbs.ipCalls
	if res, err = m.GC(context.Background()); err != nil || len(res.IPs)+len(res.Attachments) != 0 {
		t.Errorf("third GC = %+v, %v", res, err)
	}
	if sbs.ipCalls != calls1 {
		t.Errorf("sandbox IPs asked for with nothing to release")
	}
}

func TestGCReleasesNothingWhenUnsure(t *testing.T) {
	wall := time.Now()
	long := wall.Add(-5 * time.Minute)
	t.Run("runtime cannot list", func(t *testing.T) {
		r := newGCRig(t, "1.1.0")
		r.reserve(t, "10.0.0.5", "gone\r\neth0", long)
		m := r.monitor(t, &fakeSandboxes{listErr: errors.New("unavailable")}, clocktesting.NewFakeClock(wall), zap.NewNop())
		if _, err := m.GC(context.Background()); err == nil || !strings.Contains(err.Error(), "unavailable") {
			t.Errorf("GC err = %v", err)
		}
		if d := cmp.Diff([]string{"10.0.0.5", "last_reserved_ip.0", "lock"}, r.files(r.store)); d != "" {
			t.Errorf("store (-want +got):\n%s", d)
		}
	})
	t.Run("config broken", func(t *testing.T) {
		r := newGCRig(t, "1.1.0")
		r.reserve(t, "10.0.0.5", "gone\r\neth0", long)
		m := r.monitor(t, &fakeSandboxes{}, clocktesting.NewFakeClock(wall), zap.NewNop())
		os.WriteFile(filepath.Join(r.conf, "10-net.conflist"), []byte(`{"cniVersion":"1.1.0","name":"net","plugins":[{"type":"nosuch"}]}`), 0o644)
		m.Recheck(context.Background(), true)
		if _, err := m.GC(context.Background()); err == nil {
			t.Error("GC ran on a broken config")
		}
		if len(r.files(r.store)) != 3 {
			t.Errorf("store changed: %v", r.files(r.store))
		}
	})
}

// Debian's plugins (CNI 1.0.0) know no GC: the cache pass and the store
// reconcile still release leaks, and no plugin is sent GC.
func TestGCWithPluginsThatPredateGC(t *testing.T) {
	wall := time.Now()
	long := wall.Add(-5 * time.Minute)
	r := newGCRig(t, "1.0.0")
	r.reserve(t, "10.0.0.5", "gone\r\neth0", long)
	r.cacheAttachment(t, "net", "gone", long)
	m := r.monitor(t, &fakeSandboxes{}, clocktesting.NewFakeClock(wall), zap.NewNop())
	res, err := m.GC(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(GCResult{Attachments: []string{"gone"}, IPs: []string{"10.0.0.5"}}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	calls, _ := os.ReadFile(filepath.Join(r.bin, "calls"))
	if strings.Contains(string(calls), "GC") {
		t.Errorf("GC sent to 1.0.0 plugins: %s", calls)
	}
}

func TestRecheckReportsARuntimeChange(t *testing.T) {
	r := newGCRig(t, "1.1.0")
	core, logs := observer.New(zapcore.InfoLevel)
	m := r.monitor(t, &fakeSandboxes{}, clocktesting.NewFakeClock(time.Now()), zap.New(core))
	file := filepath.Join(r.conf, "10-net.conflist")
	good, _ := os.ReadFile(file)

	// Unchanged: nothing is re-validated (no plugin runs).
	os.Remove(filepath.Join(r.bin, "calls"))
	m.Recheck(context.Background(), false)
	if _, err := os.Stat(filepath.Join(r.bin, "calls")); err == nil {
		t.Error("an unchanged config was validated again")
	}

	// An operator's edit breaks it: reported loudly, Err says why.
	os.WriteFile(file, []byte(`{"cniVersion":"1.1.0","name":"net","plugins":[{"type":"bridgee"}]}`), 0o644)
	m.Recheck(context.Background(), false)
	err := m.Err()
	if err == nil || !strings.Contains(err.Error(), `failed to find plugin "bridgee"`) {
		t.Fatalf("Err = %v", err)
	}
	errs := logs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errs) != 1 || !strings.Contains(errs[0].Message, "CNI config is broken") {
		t.Fatalf("error logs: %+v", errs)
	}
	// Still broken at the next forced check: not logged again.
	m.Recheck(context.Background(), true)
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
		t.Errorf("%d error logs, want 1", n)
	}
	// Restored: ready again.
	os.WriteFile(file, good, 0o644)
	m.Recheck(context.Background(), false)
	if err := m.Err(); err != nil {
		t.Errorf("Err after restore = %v", err)
	}
}
