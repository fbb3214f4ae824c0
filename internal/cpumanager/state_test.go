package cpumanager

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestCheckpointRoundTrip(t *testing.T) {
	e := newEnv(t, dualSocketHT)
	pods := []*v1.Pod{
		newPod("a", v1.RestartPolicyAlways, []v1.Container{container("init", "4")}, container("c", "2")),
		newPod("b", v1.RestartPolicyAlways, nil, container("c", "3"), container("d", "500m")),
	}
	for _, p := range pods {
		if err := e.m.Allocate(p); err != nil {
			t.Fatal(err)
		}
	}
	before, shared := assignments(e.m), e.m.SharedCPUs()

	// The file is the kubelet's format.
	var c map[string]any
	b, err := os.ReadFile(filepath.Join(e.cfg.StateDir, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"policyName", "defaultCpuSet", "entries", "checksum"} {
		if _, ok := c[k]; !ok {
			t.Errorf("checkpoint has no %q: %s", k, b)
		}
	}

	m, err := e.restart(t)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, assignments(m)); diff != "" {
		t.Errorf("restored assignments (-want +got):\n%s", diff)
	}
	if !m.SharedCPUs().Equals(shared) {
		t.Errorf("restored shared %s, want %s", m.SharedCPUs(), shared)
	}
	// Re-admission after the restart re-pins nothing.
	for _, p := range pods {
		if err := m.Allocate(p); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(before, assignments(m)); diff != "" {
		t.Errorf("after re-admission (-want +got):\n%s", diff)
	}
}

func TestCheckpointRefusals(t *testing.T) {
	path := func(e *env) string { return filepath.Join(e.cfg.StateDir, StateFile) }
	pinned := func(t *testing.T, e *env) {
		if err := e.m.Allocate(newPod("g", v1.RestartPolicyAlways, nil, container("c", "2"))); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// setup prepares the state directory of a static manager on
		// dualSocketHT; restart adjusts the next start's config.
		setup   func(t *testing.T, e *env)
		restart func(*Config)
		want    []string // in the error; nil: no error
	}{
		{"content changed", func(t *testing.T, e *env) {
			pinned(t, e)
			b, _ := os.ReadFile(path(e))
			// In the data the kubelet's v4 file verifies (a JSON string).
			os.WriteFile(path(e), []byte(strings.Replace(string(b), `\"c\":\"1,17\"`, `\"c\":\"1-2,17\"`, 1)), 0o644)
		}, nil, []string{"is corrupt", "checksum", "delete " + "<path>", "start nodeagent again"}},
		{"not JSON", func(t *testing.T, e *env) { os.WriteFile(path(e), []byte("{garbage"), 0o644) },
			nil, []string{"is corrupt", "delete <path>"}},
		{"truncated", func(t *testing.T, e *env) {
			pinned(t, e)
			b, _ := os.ReadFile(path(e))
			os.WriteFile(path(e), b[:len(b)/2], 0o644)
		}, nil, []string{"is corrupt"}},
		{"static with pinned containers, now none", pinned, func(c *Config) { c.Policy = PolicyNone },
			[]string{`written by policy "static"`, "pins containers", "uid-g", `configured policy is "none"`, "--cpu-manager-policy=static", "delete <path>"}},
		{"static without pinned containers, now none", func(t *testing.T, e *env) {}, func(c *Config) { c.Policy = PolicyNone }, nil},
		{"other CPUs than the node's", pinned, func(c *Config) { c.SysfsRoot = oneSocketTwoCores.sysfs(t) },
			[]string{"covers CPUs 0-31", "this node's CPUs are 0-1", "delete <path>"}},
		{"reserved CPUs held exclusively", pinned, func(c *Config) { c.ReservedCPUs = set("1") },
			[]string{"reserved CPUs 1 are assigned exclusively", "uid-g", "--reserved-cpus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, dualSocketHT)
			tt.setup(t, e)
			opts := []func(*Config){}
			if tt.restart != nil {
				opts = append(opts, tt.restart)
			}
			_, err := e.restart(t, opts...)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("start: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("start: no error")
			}
			for _, w := range tt.want {
				w = strings.ReplaceAll(w, "<path>", path(e))
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
		})
	}
}

func TestNoneToStatic(t *testing.T) {
	dir := t.TempDir()
	log := newEnv(t, oneSocketTwoCores).cfg.Logger
	if _, err := New(Config{Policy: PolicyNone, StateDir: dir, Logger: log}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, StateFile))
	if !strings.Contains(string(b), `"policyName":"none"`) {
		t.Fatalf("none checkpoint %s", b)
	}
	e := newEnv(t, oneSocketTwoCores, func(c *Config) { c.StateDir = dir })
	if got := e.m.SharedCPUs(); !got.Equals(set("0-1")) {
		t.Errorf("shared %s, want 0-1", got)
	}
	b, _ = os.ReadFile(filepath.Join(dir, StateFile))
	if !strings.Contains(string(b), `"policyName":"static"`) {
		t.Errorf("checkpoint after none → static: %s", b)
	}
}

// Started where a kubelet ran (its cpu_manager_state, policy none, as the
// kubelet 1.37 writes it), the manager starts, and what it writes back is
// the kubelet's own bytes for that state: the kubelet reads it again.
func TestTakesOverTheKubeletsState(t *testing.T) {
	dir := t.TempDir()
	kubelets, err := os.ReadFile(filepath.Join("state", "testdata", "kubelet-v4-none.json"))
	if err != nil {
		t.Fatal(err)
	}
	kubelets = bytes.TrimSpace(kubelets)
	if err := os.WriteFile(filepath.Join(dir, StateFile), kubelets, 0o644); err != nil {
		t.Fatal(err)
	}
	log := newEnv(t, oneSocketTwoCores).cfg.Logger
	if _, err := New(Config{Policy: PolicyNone, StateDir: dir, Logger: log}); err != nil {
		t.Fatalf("start on the kubelet's state: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, StateFile)); !bytes.Equal(b, kubelets) {
		t.Fatalf("wrote back %s\nthe kubelet wrote %s", b, kubelets)
	}
}
