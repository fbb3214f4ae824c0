package checkpoint

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The kubelet's own code wrote testdata/kubelet_internal_checkpoint
// (hack/kubelet-golden.sh): nodeagent reads it, and writes the same data
// byte for byte, checksum included.
func TestKubeletCheckpointReadAndWrittenAlike(t *testing.T) {
	d, err := Read("testdata")
	if err != nil {
		t.Fatal(err)
	}
	want := []PodDevicesEntry{{PodUID: "6a1e3c1e-0000-4000-8000-000000000001", ContainerName: "app", ResourceName: "example.com/resource",
		DeviceIDs: DevicesPerNUMA{0: {"Dev-1"}}, AllocResp: []byte{0x1a, 0x04, 0x0a, 0x02, 0x2f, 0x78}}}
	if diff := cmp.Diff(want, d.Entries()); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string][]string{"example.com/resource": {"Dev-1", "Dev-2"}}, d.Registered()); diff != "" {
		t.Errorf("registered (-want +got):\n%s", diff)
	}
	dir := t.TempDir()
	if err := New(want, d.Registered()).Write(dir); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, FileName))
	golden, _ := os.ReadFile(filepath.Join("testdata", FileName))
	if !bytes.Equal(got, golden) {
		t.Errorf("written:\n%s\nthe kubelet's:\n%s", got, golden)
	}
}

// A checkpoint whose data was changed is refused; none at all is no
// error.
func TestCorruptCheckpointRefused(t *testing.T) {
	dir := t.TempDir()
	golden, _ := os.ReadFile(filepath.Join("testdata", FileName))
	os.WriteFile(filepath.Join(dir, FileName), bytes.Replace(golden, []byte("Dev-1\"]},"), []byte("Dev-2\"]},"), 1), 0o644)
	if _, err := Read(dir); err == nil {
		t.Error("a changed checkpoint was accepted")
	}
	if d, err := Read(t.TempDir()); d != nil || err != nil {
		t.Errorf("no checkpoint: %v %v", d, err)
	}
}
