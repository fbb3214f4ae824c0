package allocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// StateFile is the checkpoint's name in the state directory (the
// kubelet's allocated_pods_state; the format is this agent's own).
const StateFile = "allocated_pods_state"

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

// writeState checkpoints pods at path atomically and durably.
func writeState(path string, pods map[types.UID]*podRecord) error {
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
	if err := atomicfile.Write(path, b, 0o644, true); err != nil {
		return fmt.Errorf("write allocation state: %w", err)
	}
	return nil
}

// corruptError is a state file that cannot be trusted; its message says
// why.
type corruptError struct{ why string }

func (e *corruptError) Error() string { return "corrupt: " + e.why }

// readState reads the checkpoint at path; an empty state when there is
// none, a *corruptError when it cannot be trusted.
func readState(path string) (map[types.UID]*podRecord, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[types.UID]*podRecord{}, nil
	}
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
