package allocation

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// The golden file is the kubelet's own allocated_pods_state for a pod
// with an app container (cpu and memory) and a sidecar without resources
// (hack/kubelet-golden.sh, k8s.io/kubernetes v1.37.2).
const kubeletUID = types.UID("6a1e3c1e-0000-4000-8000-000000000001")

func kubeletGolden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kubelet-allocated_pods_state"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

func goldenRecords() map[types.UID]*podRecord {
	return map[types.UID]*podRecord{kubeletUID: {Containers: map[string]v1.ResourceRequirements{
		"app": {Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
			Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}},
		"side": {}}}}
}

// Started where a kubelet ran, the manager reads the kubelet's
// allocations; what it writes for them is the kubelet's own bytes, in
// both of the kubelet's files, so a kubelet started again reads them.
func TestKubeletsStateBothWays(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFile), kubeletGolden(t), 0o644); err != nil {
		t.Fatal(err)
	}
	pods, _, err := readState(dir)
	if err != nil {
		t.Fatalf("the kubelet's file: %v", err)
	}
	app := pods[kubeletUID].Containers["app"]
	if app.Limits.Memory().String() != "128Mi" || app.Requests.Cpu().String() != "100m" {
		t.Fatalf("read %+v", pods[kubeletUID])
	}
	if err := writeState(dir, goldenRecords()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{StateFile, ActuatedFile} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); !bytes.Equal(b, kubeletGolden(t)) {
			t.Errorf("%s:\n got %s\nwant %s", f, b, kubeletGolden(t))
		}
	}
}

// nodeagent's own file wins, unless the kubelet wrote after it (the
// kubelet ran the node since: its word is newer).
func TestNewestWriterWins(t *testing.T) {
	dir := t.TempDir()
	own := goldenRecords()
	own[kubeletUID].Containers["app"] = v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}
	if err := writeState(dir, own); err != nil {
		t.Fatal(err)
	}
	if pods, path, _ := readState(dir); filepath.Base(path) != AgentStateFile || memLimit(pods) != "1Gi" {
		t.Fatalf("read %s: want nodeagent's own file", path)
	}
	kube := filepath.Join(dir, StateFile)
	if err := os.WriteFile(kube, kubeletGolden(t), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(kube, later, later); err != nil {
		t.Fatal(err)
	}
	if pods, path, _ := readState(dir); filepath.Base(path) != StateFile || memLimit(pods) != "128Mi" {
		t.Fatalf("read %s: want the kubelet's newer file", path)
	}
}

func memLimit(pods map[types.UID]*podRecord) string {
	if pods[kubeletUID] == nil {
		return ""
	}
	q := pods[kubeletUID].Containers["app"].Limits[v1.ResourceMemory]
	return q.String()
}
