// Package state is the CPU manager's checkpoint file in the kubelet's
// format (pkg/kubelet/cm/cpumanager/state), so that nodeagent and the
// kubelet each read what the other wrote: the kubelet's v4 file (what
// kubelets since 1.35 write: the v2 fields with their checksum, for
// older kubelets, and the data again as a JSON string with its own
// checksum) is written; v4 and v2 files are read, and the files earlier
// nodeagent versions wrote. The package is named state, and its v2 type
// CPUManagerCheckpointV2, because the kubelet's v2 checksum hashes a dump
// that names them (see internal/checksum).
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	"k8s.io/utils/dump"

	"github.com/nodeagent/nodeagent/internal/checksum"
)

// CPUManagerCheckpointV2 is the kubelet's v2 checkpoint: the policy, the
// shared pool and the exclusive assignments (pod UID → container →
// cpuset).
type CPUManagerCheckpointV2 struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
	Checksum      checksum.Checksum            `json:"checksum"`
}

// ContainerCPUs is a container's CPUs at admission (the kubelet's v4
// baselines, for in-place resize of exclusive CPUs).
type ContainerCPUs struct {
	Baseline string `json:"baseline"`
}

// Data is the v4 checkpoint's payload. PodEntries (pod-level
// assignments, which nodeagent does not make) are kept as they were read.
type Data struct {
	PolicyName    string                              `json:"policyName"`
	DefaultCPUSet string                              `json:"defaultCpuSet"`
	Entries       map[string]map[string]string        `json:"entries,omitempty"`
	PodEntries    map[string]json.RawMessage          `json:"podEntries,omitempty"`
	Baselines     map[string]map[string]ContainerCPUs `json:"baselines,omitempty"`
}

// v4 is the kubelet's v4 checkpoint file.
type v4 struct {
	CPUManagerCheckpointV2
	Data         string            `json:"data"`
	DataChecksum checksum.Checksum `json:"dataChecksum"`
}

// sumV2 is the kubelet's v2 checksum: the dump of the v2 struct (checksum
// 0) under the name the struct had before v3, CPUManagerCheckpoint.
func sumV2(cp CPUManagerCheckpointV2) checksum.Checksum {
	cp.Checksum = 0
	if cp.Entries == nil {
		cp.Entries = map[string]map[string]string{} // the kubelet's is never nil
	}
	obj := strings.Replace(dump.ForHash(&cp), "CPUManagerCheckpointV2", "CPUManagerCheckpoint", 1)
	return checksum.Of(obj)
}

// Marshal is d as the kubelet writes it (v4).
func Marshal(d Data) ([]byte, error) {
	if d.Entries == nil {
		d.Entries = map[string]map[string]string{}
	}
	data, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	cp := v4{CPUManagerCheckpointV2: CPUManagerCheckpointV2{PolicyName: d.PolicyName, DefaultCPUSet: d.DefaultCPUSet, Entries: d.Entries},
		Data: string(data), DataChecksum: checksum.New(string(data))}
	cp.Checksum = sumV2(cp.CPUManagerCheckpointV2)
	return json.Marshal(cp)
}

// CorruptError is a checkpoint that cannot be trusted.
type CorruptError struct{ Why string }

func (e *CorruptError) Error() string { return "corrupt: " + e.Why }

// Unmarshal reads a v4 or v2 checkpoint (the kubelet's, or an earlier
// nodeagent's), verifying its checksum as the kubelet does: a v4 file by
// its data checksum (never falling back to its v2 part), a v2 file by the
// kubelet's v2 checksum (0: none, accepted as the kubelet accepts it) or
// by the checksum earlier nodeagent versions wrote (FNV-32a over the
// file's JSON with checksum 0).
func Unmarshal(b []byte) (Data, error) {
	var cp v4
	cp.Entries = map[string]map[string]string{}
	if err := json.Unmarshal(b, &cp); err != nil {
		return Data{}, &CorruptError{Why: err.Error()}
	}
	if cp.Data != "" || cp.DataChecksum != 0 {
		if err := cp.DataChecksum.Verify(cp.Data); err != nil {
			return Data{}, &CorruptError{Why: "v4 data: " + err.Error()}
		}
		var d Data
		if err := json.Unmarshal([]byte(cp.Data), &d); err != nil {
			return Data{}, &CorruptError{Why: "v4 data: " + err.Error()}
		}
		return d, nil
	}
	v2 := cp.CPUManagerCheckpointV2
	d := Data{PolicyName: v2.PolicyName, DefaultCPUSet: v2.DefaultCPUSet, Entries: v2.Entries}
	if v2.Checksum == 0 || v2.Checksum == sumV2(v2) {
		return d, nil
	}
	if legacy, err := legacySum(v2); err == nil && legacy == v2.Checksum {
		return d, nil
	}
	return Data{}, &CorruptError{Why: fmt.Sprintf("checksum %d, content hashes to %d", v2.Checksum, sumV2(v2))}
}

// legacySum is the checksum nodeagent wrote before it wrote the
// kubelet's: FNV-32a over the JSON encoding with checksum 0.
func legacySum(cp CPUManagerCheckpointV2) (checksum.Checksum, error) {
	cp.Checksum = 0
	if len(cp.Entries) == 0 {
		cp.Entries = nil // omitted, as it was written
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return 0, err
	}
	h := fnv.New32a()
	h.Write(b)
	return checksum.Checksum(h.Sum32()), nil
}

// IsCorrupt reports whether err is a checkpoint that cannot be trusted.
func IsCorrupt(err error) bool {
	var c *CorruptError
	return errors.As(err, &c)
}
