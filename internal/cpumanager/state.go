package cpumanager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
	cpstate "github.com/nodeagent/nodeagent/internal/cpumanager/state"
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

// writeState checkpoints s at path atomically and durably, in the
// kubelet's format (internal/cpumanager/state: a kubelet started on this
// node reads it).
func writeState(path string, s *state) error {
	d := cpstate.Data{PolicyName: s.policy, DefaultCPUSet: s.defaultSet.String()}
	for uid, cs := range s.assignments {
		for name, set := range cs {
			if d.Entries == nil {
				d.Entries = map[string]map[string]string{}
			}
			if d.Entries[uid] == nil {
				d.Entries[uid] = map[string]string{}
			}
			d.Entries[uid][name] = set.String()
		}
	}
	b, err := cpstate.Marshal(d)
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

// readState reads the checkpoint at path (the kubelet's or nodeagent's);
// (nil, nil) when there is none.
func readState(path string) (*state, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read CPU manager state: %w", err)
	}
	d, err := cpstate.Unmarshal(b)
	var bad *cpstate.CorruptError
	if errors.As(err, &bad) {
		return nil, corrupt("%s", bad.Why)
	}
	if err != nil {
		return nil, err
	}
	def, err := parseCPUs(d.DefaultCPUSet)
	if err != nil {
		return nil, corrupt("defaultCpuSet %q: %v", d.DefaultCPUSet, err)
	}
	if len(d.PodEntries) > 0 {
		return nil, corrupt("pod-level CPU assignments (podEntries, the kubelet's PodLevelResourceManagers) are not supported")
	}
	s := newState(d.PolicyName, def)
	for uid, cs := range d.Entries {
		for name, str := range cs {
			set, err := parseCPUs(str)
			if err != nil {
				return nil, corrupt("entry %s/%s %q: %v", uid, name, str, err)
			}
			s.set(uid, name, set)
		}
	}
	return s, nil
}

// maxCPUID bounds the CPU IDs a state file may name: far above any
// machine's (Linux's NR_CPUS is at most 8192), and low enough that a list
// is parsed in no time.
const maxCPUID = 1 << 16

// parseCPUs parses a state file's CPU list, refusing first anything
// but digits, commas, dashes and spaces, and an ID above maxCPUID (read
// as cpuset.Parse reads it, so no spelling of a huge ID slips through):
// cpuset.Parse adds a range's CPUs one at a time, so a file naming
// "0-9223372036854775807" would never be read to its end.
func parseCPUs(s string) (cpuset.CPUSet, error) {
	if i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == ',' || r == '-' || r == ' ') }); i >= 0 {
		return cpuset.CPUSet{}, fmt.Errorf("unexpected %q in a CPU list", s[i])
	}
	for _, r := range strings.Split(s, ",") {
		for _, id := range strings.Split(r, "-") {
			id = strings.TrimSpace(id)
			if id == "" {
				continue // an empty list, or cpuset.Parse's error
			}
			if n, err := strconv.Atoi(id); err != nil || n > maxCPUID {
				return cpuset.CPUSet{}, fmt.Errorf("CPU %s is past %d", id, maxCPUID)
			}
		}
	}
	return cpuset.Parse(s)
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
