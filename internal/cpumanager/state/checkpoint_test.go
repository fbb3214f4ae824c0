package state

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The golden files are what the kubelet's own code writes
// (hack/kubelet-golden.sh, k8s.io/kubernetes v1.37.2).
func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

var pinned = Data{PolicyName: "static", DefaultCPUSet: "0,3",
	Entries: map[string]map[string]string{"6a1e3c1e-0000-4000-8000-000000000001": {"app": "1-2"}}}

// A kubelet's files are read (v4, and the v2 of older kubelets), with
// their assignments.
func TestReadsTheKubeletsFiles(t *testing.T) {
	for _, tt := range []struct {
		file string
		want Data
	}{
		{"kubelet-v4-none.json", Data{PolicyName: "none"}},
		{"kubelet-v4-static.json", pinned},
		{"kubelet-v2-none.json", Data{PolicyName: "none"}},
		{"kubelet-v2-static.json", pinned},
	} {
		got, err := Unmarshal(golden(t, tt.file))
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if got.PolicyName != tt.want.PolicyName || got.DefaultCPUSet != tt.want.DefaultCPUSet ||
			(len(got.Entries) > 0 || len(tt.want.Entries) > 0) && !reflect.DeepEqual(got.Entries, tt.want.Entries) {
			t.Errorf("%s: read %+v, want %+v", tt.file, got, tt.want)
		}
	}
}

// What nodeagent writes is, byte for byte, what the kubelet writes for the
// same state: a kubelet started on the node reads it as its own.
func TestWritesWhatTheKubeletWrites(t *testing.T) {
	for _, tt := range []struct {
		file string
		d    Data
	}{
		{"kubelet-v4-none.json", Data{PolicyName: "none"}},
		{"kubelet-v4-static.json", pinned},
	} {
		got, err := Marshal(tt.d)
		if err != nil {
			t.Fatal(err)
		}
		if want := golden(t, tt.file); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.file, got, want)
		}
	}
}

// A changed byte is caught in either part of a file; an earlier
// nodeagent's file (its own checksum) is still read.
func TestChecksums(t *testing.T) {
	v4 := golden(t, "kubelet-v4-static.json")
	if _, err := Unmarshal(bytes.Replace(v4, []byte(`\"app\":\"1-2\"`), []byte(`\"app\":\"1-3\"`), 1)); !IsCorrupt(err) {
		t.Fatalf("v4 with its data changed: %v, want corrupt", err)
	}
	v2 := golden(t, "kubelet-v2-static.json")
	if _, err := Unmarshal(bytes.Replace(v2, []byte(`"app":"1-2"`), []byte(`"app":"1-3"`), 1)); !IsCorrupt(err) {
		t.Fatalf("v2 with an entry changed: %v, want corrupt", err)
	}
	old := CPUManagerCheckpointV2{PolicyName: "none", DefaultCPUSet: "0-1"}
	sum, err := legacySum(old)
	if err != nil {
		t.Fatal(err)
	}
	old.Checksum = sum
	b, _ := json.Marshal(old)
	if d, err := Unmarshal(b); err != nil || d.DefaultCPUSet != "0-1" {
		t.Fatalf("an earlier nodeagent's file: %+v, %v", d, err)
	}
	old.DefaultCPUSet = "0-2"
	b, _ = json.Marshal(old)
	if _, err := Unmarshal(b); !IsCorrupt(err) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("an earlier nodeagent's file changed: %v, want corrupt", err)
	}
}
