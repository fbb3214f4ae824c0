package state

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzUnmarshal feeds arbitrary bytes to Unmarshal as a cpu_manager_state
// file (v4, v2 or an earlier nodeagent's). It must never panic, and fail
// only with a CorruptError; what it accepts, written again (Marshal, the
// kubelet's v4), reads back as the same data (empty and absent maps
// alike, podEntries as the same JSON); writing that again gives the same
// bytes; and the written file's v2 part, what an older kubelet reads,
// holds the same policy, pool and assignments under a valid v2 checksum.
// Seeds: the kubelet's golden files, and testdata/fuzz/FuzzUnmarshal.
func FuzzUnmarshal(f *testing.F) {
	names, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(names) == 0 {
		f.Fatalf("golden files: %v %v", names, err)
	}
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	full, err := Marshal(Data{PolicyName: "static", DefaultCPUSet: "0,4-7",
		Entries:    map[string]map[string]string{"uid-a": {"app": "1-2"}, "uid-b": {}},
		PodEntries: map[string]json.RawMessage{"uid-c": json.RawMessage(`{"cpuSet":"3", "x":[1, 2]}`)},
		Baselines:  map[string]map[string]ContainerCPUs{"uid-a": {"app": {Baseline: "1-2"}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full)
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"0-3","entries":{"u":{"c":"4-5"}},"checksum":0}`))
	f.Add([]byte(`{"policyName":"none","defaultCpuSet":"","checksum":12345}`))
	f.Add([]byte(`{"policyName":"static","defaultCpuSet":"0","data":"","dataChecksum":7}`))
	f.Add([]byte(`{"data":"{\"policyName\":\"static\",\"podEntries\":{\"u\":null}}","dataChecksum":0}`))
	f.Add([]byte(`{"Data":"x","DATACHECKSUM":1,"entries":null}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Unmarshal(b)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("error that is not CorruptError: %T %v", err, err)
			}
			return
		}
		out, err := Marshal(d)
		if err != nil {
			t.Fatalf("accepted data not written: %v", err)
		}
		d2, err := Unmarshal(out)
		if err != nil {
			t.Fatalf("accepted data, written, refused: %v\n%s", err, out)
		}
		if diff := cmp.Diff(d, d2, cmpopts.EquateEmpty(), compactRaw); diff != "" {
			t.Fatalf("read back (-read +written and read again):\n%s", diff)
		}
		out2, err := Marshal(d2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("the same data written twice differs (%v):\n%s\n%s", err, out, out2)
		}

		// The v2 part, for older kubelets.
		var cp v4
		if err := json.Unmarshal(out, &cp); err != nil {
			t.Fatal(err)
		}
		v2 := cp.CPUManagerCheckpointV2
		if v2.Checksum != sumV2(v2) {
			t.Fatalf("v2 checksum %d, content hashes to %d:\n%s", v2.Checksum, sumV2(v2), out)
		}
		if v2.PolicyName != d.PolicyName || v2.DefaultCPUSet != d.DefaultCPUSet || !cmp.Equal(v2.Entries, d.Entries, cmpopts.EquateEmpty()) {
			t.Fatalf("v2 part %+v, data %+v", v2, d)
		}
	})
}

// compactRaw compares raw JSON values by their compact form.
var compactRaw = cmp.Transformer("compact", func(m json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, m); err != nil {
		return "invalid: " + string(m)
	}
	return b.String()
})
