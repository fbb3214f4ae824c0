// Package checksum is the checksum of the kubelet's checkpoint files (its
// pkg/kubelet/checkpointmanager/checksum): FNV-32a over
// k8s.io/utils/dump.ForHash of the data. ForHash prints each type with
// its package's name, so a struct hashed here hashes as the kubelet's
// only when its type and package are named as the kubelet's are: this
// package is named checksum for that reason (a Checksum field prints as
// checksum.Checksum), and the CPU manager's file format lives in a
// package named state.
package checksum

import (
	"fmt"
	"hash/fnv"

	"k8s.io/utils/dump"
)

// Checksum is a checkpoint's checksum.
type Checksum uint64

// New is the checksum of data.
func New(data any) Checksum {
	return Of(dump.ForHash(data))
}

// Of is the checksum of an already dumped object.
func Of(dumped string) Checksum {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dumped)
	return Checksum(h.Sum32())
}

// Verify reports whether c is data's checksum.
func (c Checksum) Verify(data any) error {
	if got := New(data); got != c {
		return &CorruptError{Expected: c, Actual: got}
	}
	return nil
}

// CorruptError is a checkpoint whose content does not hash to its
// checksum.
type CorruptError struct{ Expected, Actual Checksum }

func (e *CorruptError) Error() string {
	return fmt.Sprintf("checksum %d, content hashes to %d", e.Expected, e.Actual)
}
