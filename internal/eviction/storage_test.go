package eviction

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/volume"
)

type fakeStorage map[types.UID]PodStorage

func (f fakeStorage) PodStorage(_ context.Context, pods []*v1.Pod) (map[types.UID]PodStorage, error) {
	out := map[types.UID]PodStorage{}
	for _, p := range pods {
		if u, ok := f[p.UID]; ok {
			out[p.UID] = u
		}
	}
	return out, nil
}

func withEmptyDir(p *v1.Pod, name, limit string, medium v1.StorageMedium) *v1.Pod {
	ed := &v1.EmptyDirVolumeSource{Medium: medium}
	if limit != "" {
		q := resource.MustParse(limit)
		ed.SizeLimit = &q
	}
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}})
	return p
}

func withStorageLimit(p *v1.Pod, container, limit string) *v1.Pod {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == container {
			p.Spec.Containers[i].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}
			return p
		}
	}
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: container,
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}}})
	return p
}

// TestLocalStorageEviction: without any node pressure, every pod past an
// emptyDir sizeLimit, its containers' total ephemeral-storage limit or a
// container's own is evicted at once (grace 0) with the kubelet's
// message; pods within their limits, without limits, or with a memory
// emptyDir (a tmpfs of its size) stay; a pass that evicted for storage
// evicts nothing else.
func TestLocalStorageEviction(t *testing.T) {
	pods := []*v1.Pod{
		withEmptyDir(mkPod("volume-over", "", 0, false), "scratch", "10Mi", ""),
		withEmptyDir(mkPod("volume-within", "", 0, false), "scratch", "10Mi", ""),
		withEmptyDir(mkPod("memory-volume", "", 0, false), "shm", "1Mi", v1.StorageMediumMemory),
		withStorageLimit(withStorageLimit(mkPod("pod-over", "", 0, false), "main", "20Mi"), "side", "20Mi"),
		withStorageLimit(withStorageLimit(mkPod("container-over", "", 0, false), "main", "5Mi"), "side", "20Mi"),
		mkPod("unlimited", "", 0, false),
		withEmptyDir(mkPod("critical-over", "", 2000001000, false), "scratch", "1Mi", ""),
		withStorageLimit(withEmptyDir(withEmptyDir(mkPod("uncountable", "", 0, false), "a", "", ""), "b", "", ""), "main", "1Gi"),
	}
	storage := fakeStorage{
		"volume-over":   {Volumes: map[string]int64{"scratch": 11 * mi}},
		"volume-within": {Volumes: map[string]int64{"scratch": 9 * mi}},
		"memory-volume": {Volumes: map[string]int64{"shm": 5 * mi}}, // not measured in truth; never judged
		// 15 + 15 + 11 Mi of volume: past the 40 Mi the containers sum to,
		// while each container stays within its own 20 Mi.
		"pod-over": {Containers: map[string]int64{"main": 15 * mi, "side": 15 * mi}, Volumes: map[string]int64{"data": 11 * mi}},
		// main past its own 5 Mi, the pod within its 25 Mi (with one
		// container, the pod's total would be judged first, as the kubelet).
		"container-over": {Containers: map[string]int64{"main": 6 * mi, "side": 1 * mi}},
		"unlimited":      {Containers: map[string]int64{"main": 1 << 40}},
		// System-critical: never evicted, as the kubelet's.
		"critical-over": {Volumes: map[string]int64{"scratch": 100 * mi}},
		// Two volumes too big to count: their sum stays past the limit.
		"uncountable": {Volumes: map[string]int64{"a": math.MaxInt64, "b": math.MaxInt64}},
	}
	m, obs, _, out := setup(t, []Threshold{hard(MemoryAvailable, "100Mi")}, pods, fakeStats{})
	m.cfg.Storage = storage
	obs.obs[MemoryAvailable] = Observation{Available: 10 * mi, Capacity: 4000 * mi} // pressure too
	if _, err := m.Synchronize(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"volume-over":    `Usage of EmptyDir volume "scratch" exceeds the limit "10Mi".`,
		"pod-over":       "Pod ephemeral local storage usage exceeds the total limit of containers 40Mi.",
		"container-over": `Container main exceeded its local ephemeral storage limit "5Mi".`,
		"uncountable":    "Pod ephemeral local storage usage exceeds the total limit of containers 1Gi.",
	}
	if len(*out) != len(want) {
		t.Fatalf("evicted %+v; want %v only (storage first, nothing for the memory pressure in the same pass)", *out, want)
	}
	for _, e := range *out {
		if want[e.pod] != e.msg || e.grace != 0 {
			t.Errorf("evicted %s with grace %d: %q; want grace 0: %q", e.pod, e.grace, e.msg, want[e.pod])
		}
	}
}

// TestLocalStorageRead: LocalStorage adds each container's writable
// layer and logs, and measures disk-backed emptyDir volumes as du does
// (not a memory one, not a file system mounted beneath).
func TestLocalStorageRead(t *testing.T) {
	podDir := t.TempDir()
	p := withEmptyDir(withEmptyDir(mkPod("p", "", 0, false), "scratch", "1Mi", ""), "shm", "", v1.StorageMediumMemory)
	dir := volume.EmptyDirPath(podDir, "scratch")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), []byte(strings.Repeat("x", 3*mi)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A hard link is counted once.
	if err := os.Link(filepath.Join(dir, "sub", "f"), filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	s := LocalStorage{
		Stats:  fakeStats{"p": {Containers: map[string]Usage{"main": {Disk: 1000}}}},
		Logs:   func(_ *v1.Pod, c string) (int64, error) { return map[string]int64{"main": 24}[c], nil },
		PodDir: func(types.UID) string { return podDir },
	}
	got, err := s.PodStorage(context.Background(), []*v1.Pod{p})
	if err != nil {
		t.Fatal(err)
	}
	u := got["p"]
	if u.Containers["main"] != 1024 {
		t.Errorf("container main: %d bytes; want the layer's 1000 and the logs' 24", u.Containers["main"])
	}
	if n := u.Volumes["scratch"]; n < 3*mi || n > 3*mi+64<<10 {
		t.Errorf("emptyDir scratch: %d bytes; want 3 MiB and its directories", n)
	}
	if _, ok := u.Volumes["shm"]; ok {
		t.Error("the memory emptyDir was measured")
	}
	// A volume with more files than counted is past any limit.
	s.MaxEntries = 2
	got, _ = s.PodStorage(context.Background(), []*v1.Pod{p})
	if msg := storageViolation(p, got["p"]); !strings.Contains(msg, `"scratch" exceeds the limit`) {
		t.Errorf("too many files: %q; want the volume over its limit", msg)
	}
}
