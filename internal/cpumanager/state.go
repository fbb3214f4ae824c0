package cpumanager

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// StateFile is the checkpoint's name under the root directory (the
// kubelet's).
const StateFile = "cpu_manager_state"

// state is what the policy decided: the shared pool and the exclusive
// assignments, by pod UID and container name. It is not safe for
// concurrent use; the Manager's mutex guards it.
type state struct {
	policy      string
	defaultSet  cpuset.CPUSet
	assignments map[string]map[string]cpuset.CPUSet
}

func newState(policy string, def cpuset.CPUSet) *state {
	return &state{policy: policy, defaultSet: def, assignments: map[string]map[string]cpuset.CPUSet{}}
}

func (s *state) clone() *state {
	c := newState(s.policy, s.defaultSet)
	for uid, cs := range s.assignments {
		c.assignments[uid] = map[string]cpuset.CPUSet{}
		for name, set := range cs {
			c.assignments[uid][name] = set
		}
	}
	return c
}

func (s *state) get(uid, name string) (cpuset.CPUSet, bool) {
	set, ok := s.assignments[uid][name]
	return set, ok
}

func (s *state) set(uid, name string, cpus cpuset.CPUSet) {
	if s.assignments[uid] == nil {
		s.assignments[uid] = map[string]cpuset.CPUSet{}
	}
	s.assignments[uid][name] = cpus
}

func (s *state) delete(uid, name string) {
	delete(s.assignments[uid], name)
	if len(s.assignments[uid]) == 0 {
		delete(s.assignments, uid)
	}
}

// assigned is the union of every exclusive assignment.
func (s *state) assigned() cpuset.CPUSet {
	out := cpuset.New()
	for _, cs := range s.assignments {
		for _, set := range cs {
			out = out.Union(set)
		}
	}
	return out
}

// checkpoint is the file format, the kubelet's CPUManagerCheckpointV2.
// The checksum is FNV-32a over the JSON encoding with checksum 0 (the
// kubelet hashes a Go dump of the struct instead, so the files are not
// interchangeable with a kubelet's).
type checkpoint struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      uint64                       `json:"checksum"`
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

// writeState checkpoints s at path atomically and durably.
func writeState(path string, s *state) error {
	c := checkpoint{PolicyName: s.policy, DefaultCPUSet: s.defaultSet.String()}
	for uid, cs := range s.assignments {
		for name, set := range cs {
			if c.Entries == nil {
				c.Entries = map[string]map[string]string{}
			}
			if c.Entries[uid] == nil {
				c.Entries[uid] = map[string]string{}
			}
			c.Entries[uid][name] = set.String()
		}
	}
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
		return fmt.Errorf("write CPU manager state: %w", err)
	}
	return nil
}

// corruptError is a state file that cannot be trusted; its message says
// why.
type corruptError struct{ why string }

func (e *corruptError) Error() string { return "corrupt: " + e.why }

func corrupt(format string, args ...any) error {
	return &corruptError{why: fmt.Sprintf(format, args...)}
}

// readState reads the checkpoint at path; (nil, nil) when there is none.
func readState(path string) (*state, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read CPU manager state: %w", err)
	}
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, corrupt("%v", err)
	}
	sum, err := c.sum()
	if err != nil {
		return nil, corrupt("%v", err)
	}
	if sum != c.Checksum {
		return nil, corrupt("checksum %d, content hashes to %d", c.Checksum, sum)
	}
	def, err := cpuset.Parse(c.DefaultCPUSet)
	if err != nil {
		return nil, corrupt("defaultCpuSet %q: %v", c.DefaultCPUSet, err)
	}
	s := newState(c.PolicyName, def)
	for uid, cs := range c.Entries {
		for name, str := range cs {
			set, err := cpuset.Parse(str)
			if err != nil {
				return nil, corrupt("entry %s/%s %q: %v", uid, name, str, err)
			}
			s.set(uid, name, set)
		}
	}
	return s, nil
}

// Checkpoint is a read-only view of a checkpoint, for tools (nodeagent
// describe): the policy, the shared pool and the exclusive assignments by
// pod UID and container name.
type Checkpoint struct {
	Policy      string
	Shared      cpuset.CPUSet
	Assignments map[string]map[string]cpuset.CPUSet
}

// ReadCheckpoint reads <stateDir>/cpu_manager_state; nil when there is
// none.
func ReadCheckpoint(stateDir string) (*Checkpoint, error) {
	st, err := readState(filepath.Join(stateDir, StateFile))
	if err != nil || st == nil {
		return nil, err
	}
	return &Checkpoint{Policy: st.policy, Shared: st.defaultSet, Assignments: st.assignments}, nil
}
