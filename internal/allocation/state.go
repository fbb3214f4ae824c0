package allocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
	"github.com/nodeagent/nodeagent/internal/checksum"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// StateFile is the kubelet's allocation checkpoint in the state
// directory, written in the kubelet's format (with ActuatedFile) so that a
// kubelet started on the node reads them; nodeagent's own records, which
// say more (each running instance's ID and hash), are in AgentStateFile.
const (
	StateFile      = "allocated_pods_state"
	ActuatedFile   = "actuated_pods_state"
	AgentStateFile = "nodeagent_allocation_state"
)

// podRecord is what the node allocated one pod, and what it applied to
// its running containers beyond their annotations.
type podRecord struct {
	// Containers are the resources allocated to its app containers and
	// sidecars, by name.
	Containers map[string]v1.ResourceRequirements `json:"containers"`
	// Pod is its pod-level resources as admitted (never resized here).
	Pod *v1.ResourceRequirements `json:"pod,omitempty"`
	// Actuated are the records of running instances, by container name
	// (each for one instance ID).
	Actuated map[string]pod.Actuated `json:"actuated,omitempty"`
}

// checkpoint is the file format: the records by pod UID and a checksum,
// FNV-32a over the JSON encoding with checksum 0 (as the CPU manager's).
type checkpoint struct {
	Pods     map[types.UID]*podRecord `json:"pods"`
	Checksum uint64                   `json:"checksum"`
}

func (c checkpoint) sum() (uint64, error) {
	c.Checksum = 0
	b, err := json.Marshal(c)
	if err != nil {
		return 0, err
	}
	h := fnv.New32a()
	h.Write(b)
	return uint64(h.Sum32()), nil
}

// writeState checkpoints pods in dir atomically and durably: the
// kubelet's two files, then nodeagent's own (last: readState takes a
// kubelet file newer than it as the kubelet's word).
func writeState(dir string, pods map[types.UID]*podRecord) error {
	allocated, actuated := kubeletEntries(pods)
	for _, f := range []struct {
		name    string
		entries map[types.UID]kubeletPodInfo
	}{{StateFile, allocated}, {ActuatedFile, actuated}} {
		b, err := marshalKubelet(f.entries)
		if err != nil {
			return err
		}
		// Renamed into place, not fsynced: nodeagent's own file (below) is
		// its durable record; these are for a kubelet started later.
		if err := atomicfile.Write(filepath.Join(dir, f.name), b, 0o644, false); err != nil {
			return fmt.Errorf("write allocation state: %w", err)
		}
	}
	c := checkpoint{Pods: pods}
	sum, err := c.sum()
	if err != nil {
		return err
	}
	c.Checksum = sum
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, AgentStateFile), b, 0o644, true); err != nil {
		return fmt.Errorf("write allocation state: %w", err)
	}
	return nil
}

// corruptError is a state file that cannot be trusted; its message says
// why.
type corruptError struct{ why string }

func (e *corruptError) Error() string { return "corrupt: " + e.why }

// readState reads the allocations in dir: nodeagent's own file, unless
// the kubelet wrote its allocated_pods_state after it (the kubelet ran
// the node since); else the kubelet's file (a node the kubelet ran), or
// that file as an earlier nodeagent wrote it (its own format). It
// returns the file read; an empty state when there is none, a
// *corruptError when it cannot be trusted.
func readState(dir string) (map[types.UID]*podRecord, string, error) {
	own, kube := filepath.Join(dir, AgentStateFile), filepath.Join(dir, StateFile)
	ownSt, ownErr := os.Stat(own)
	kubeSt, kubeErr := os.Stat(kube)
	if ownErr == nil {
		if kubeErr == nil && kubeSt.ModTime().After(ownSt.ModTime()) {
			if b, err := os.ReadFile(kube); err == nil {
				if pods, err := unmarshalKubelet(b); err == nil {
					return pods, kube, nil
				}
			}
		}
		pods, err := readOwn(own)
		return pods, own, err
	}
	if !errors.Is(ownErr, os.ErrNotExist) {
		return nil, own, fmt.Errorf("read allocation state: %w", ownErr)
	}
	b, err := os.ReadFile(kube)
	if errors.Is(err, os.ErrNotExist) {
		return map[types.UID]*podRecord{}, kube, nil
	}
	if err != nil {
		return nil, kube, fmt.Errorf("read allocation state: %w", err)
	}
	if pods, err := unmarshalKubelet(b); err == nil {
		return pods, kube, nil
	}
	pods, err := readOwn(kube) // an earlier nodeagent's
	return pods, kube, err
}

// readOwn reads nodeagent's own format at path.
func readOwn(path string) (map[types.UID]*podRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read allocation state: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, &corruptError{err.Error()}
	}
	sum, err := c.sum()
	if err != nil {
		return nil, &corruptError{err.Error()}
	}
	if sum != c.Checksum {
		return nil, &corruptError{fmt.Sprintf("checksum %d, content hashes to %d", c.Checksum, sum)}
	}
	if c.Pods == nil {
		c.Pods = map[types.UID]*podRecord{}
	}
	for uid, r := range c.Pods {
		if r == nil || r.Containers == nil {
			return nil, &corruptError{fmt.Sprintf("pod %s has no container allocations", uid)}
		}
	}
	return c.Pods, nil
}

// kubeletPodInfo is the kubelet's record of one pod
// (pkg/kubelet/allocation/state.PodResourceInfo; its field names are its
// JSON names).
type kubeletPodInfo struct {
	ContainerResources   map[string]v1.ResourceRequirements
	PodLevelResources    *v1.ResourceRequirements
	EmptyDirVolumeLimits map[string]*resource.Quantity
}

// kubeletCheckpoint is the kubelet's allocation checkpoint: the entries
// as a JSON string, and its checksum.
type kubeletCheckpoint struct {
	Data     string            `json:"data"`
	Checksum checksum.Checksum `json:"checksum"`
}

type kubeletData struct {
	Entries map[types.UID]kubeletPodInfo `json:"entries,omitempty"`
}

// kubeletEntries are pods as the kubelet records them: what is allocated,
// and what the running containers were given (the actuated record's, else
// the allocation they were created with).
func kubeletEntries(pods map[types.UID]*podRecord) (allocated, actuated map[types.UID]kubeletPodInfo) {
	allocated, actuated = map[types.UID]kubeletPodInfo{}, map[types.UID]kubeletPodInfo{}
	for uid, r := range pods {
		al := kubeletPodInfo{ContainerResources: map[string]v1.ResourceRequirements{}, PodLevelResources: r.Pod}
		ac := kubeletPodInfo{ContainerResources: map[string]v1.ResourceRequirements{}, PodLevelResources: r.Pod}
		for name, res := range r.Containers {
			al.ContainerResources[name] = res
			ac.ContainerResources[name] = res
			if a, ok := r.Actuated[name]; ok {
				ac.ContainerResources[name] = a.Resources
			}
		}
		allocated[uid], actuated[uid] = al, ac
	}
	return allocated, actuated
}

func marshalKubelet(entries map[types.UID]kubeletPodInfo) ([]byte, error) {
	data, err := json.Marshal(kubeletData{Entries: entries})
	if err != nil {
		return nil, err
	}
	return json.Marshal(kubeletCheckpoint{Data: string(data), Checksum: checksum.New(string(data))})
}

// unmarshalKubelet reads the kubelet's allocated_pods_state, its checksum
// verified as the kubelet does.
func unmarshalKubelet(b []byte) (map[types.UID]*podRecord, error) {
	var cp kubeletCheckpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, &corruptError{err.Error()}
	}
	if cp.Data == "" {
		return nil, &corruptError{"not the kubelet's format (no data)"}
	}
	if err := cp.Checksum.Verify(cp.Data); err != nil {
		return nil, &corruptError{err.Error()}
	}
	var d kubeletData
	if err := json.Unmarshal([]byte(cp.Data), &d); err != nil {
		return nil, &corruptError{err.Error()}
	}
	pods := make(map[types.UID]*podRecord, len(d.Entries))
	for uid, e := range d.Entries {
		r := &podRecord{Containers: e.ContainerResources, Pod: e.PodLevelResources}
		if r.Containers == nil {
			r.Containers = map[string]v1.ResourceRequirements{}
		}
		pods[uid] = r
	}
	return pods, nil
}
