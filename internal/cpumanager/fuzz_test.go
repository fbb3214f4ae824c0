package cpumanager

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/utils/cpuset"

	cpstate "github.com/nodeagent/nodeagent/internal/cpumanager/state"
)

// FuzzCPUManagerState feeds arbitrary bytes to ReadCheckpoint as
// <stateDir>/cpu_manager_state (the kubelet's v4 or v2 file, or an
// earlier nodeagent's). It must never panic; an error is a corrupt
// file's (IsCorrupt for the format, corruptError for the content); what
// it accepts, written back as the agent writes it (writeState, the
// kubelet's v4) and read again, is the same state: policy, shared pool
// and every assignment; and writing that again gives the same bytes.
//
// A CPU list naming an ID past maxCPUID is corrupt (cpuset.Parse would
// add "0-9223372036854775807" one CPU at a time, for ever).
// Seeds: testdata/fuzz/FuzzCPUManagerState.
func FuzzCPUManagerState(f *testing.F) {
	for _, name := range []string{"kubelet-v4-none.json", "kubelet-v4-static.json", "kubelet-v2-none.json", "kubelet-v2-static.json"} {
		b, err := os.ReadFile(filepath.Join("state", "testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	v4, err := cpstate.Marshal(cpstate.Data{PolicyName: "static", DefaultCPUSet: "0,4-7",
		Entries:   map[string]map[string]string{"uid-a": {"app": "1-2", "init": ""}, "uid-b": {"c": "3"}},
		Baselines: map[string]map[string]cpstate.ContainerCPUs{"uid-a": {"app": {Baseline: "1-2"}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v4)
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"0-3","entries":{"u":{"c":"4-5"}},"checksum":0}`))
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"3-1","checksum":0}`))
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"0-9223372036854775807","checksum":0}`))
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"0-+9223372036854775807","checksum":0}`))
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"0","entries":{"u":{"c":"x"}}}`))
	f.Add([]byte(`{"policyName":"none","defaultCpuSet":"","checksum":12345}`))
	f.Add([]byte(`{"data":"{\"policyName\":\"static\",\"podEntries\":{\"u\":{}}}","dataChecksum":0}`))
	f.Add([]byte(`{"data":"not json","dataChecksum":1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, StateFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		cp, err := ReadCheckpoint(dir)
		if err != nil {
			if _, ok := err.(*corruptError); !ok && !cpstate.IsCorrupt(err) {
				t.Fatalf("error that is not a corrupt file's: %T %v", err, err)
			}
			return
		}
		if cp == nil {
			t.Fatal("no checkpoint and no error for an existing file")
		}
		st := &state{policy: cp.Policy, defaultSet: cp.Shared, assignments: cp.Assignments}
		for uid, cs := range st.assignments {
			if len(cs) == 0 {
				t.Fatalf("pod %s read with an empty assignment map", uid)
			}
		}

		again := t.TempDir()
		path := filepath.Join(again, StateFile)
		if err := writeState(path, st); err != nil {
			t.Fatalf("accepted state not written: %v", err)
		}
		written, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ReadCheckpoint(again)
		if err != nil || back == nil {
			t.Fatalf("accepted state, written back, read as %v, %v:\n%s", back, err, written)
		}
		if back.Policy != cp.Policy || !back.Shared.Equals(cp.Shared) || !sameAssignments(back.Assignments, cp.Assignments) {
			t.Fatalf("read %+v, written back and read again %+v", cp, back)
		}
		if err := writeState(path, &state{policy: back.Policy, defaultSet: back.Shared, assignments: back.Assignments}); err != nil {
			t.Fatal(err)
		}
		rewritten, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(rewritten) != string(written) {
			t.Fatalf("the same state written twice differs:\n%s\n%s", written, rewritten)
		}
	})
}

func sameAssignments(a, b map[string]map[string]cpuset.CPUSet) bool {
	if len(a) != len(b) {
		return false
	}
	for uid, cs := range a {
		if len(cs) != len(b[uid]) {
			return false
		}
		for name, set := range cs {
			other, ok := b[uid][name]
			if !ok || !set.Equals(other) {
				return false
			}
		}
	}
	return true
}
