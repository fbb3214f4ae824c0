// Package checkpoint is the device manager's checkpoint file in the
// kubelet's format (pkg/kubelet/cm/devicemanager/checkpoint): the same
// JSON and the same checksum, so a node moves between the kubelet and
// nodeagent with its device allocations. The checksum hashes the data's
// printed form, type and package names included: the package is named
// checkpoint and its types are named as the kubelet's for that reason.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
	"github.com/nodeagent/nodeagent/internal/checksum"
)

// FileName is the checkpoint's name in the device plugin directory.
const FileName = "kubelet_internal_checkpoint"

// DevicesPerNUMA is a container's device IDs of one resource by NUMA
// node: a device the plugin gave no topology is under node -1, as the
// kubelet files it.
type DevicesPerNUMA map[int64][]string

// PodDevicesEntry is one container's allocation of one resource:
// AllocResp is the plugin's ContainerAllocateResponse, protobuf-encoded.
type PodDevicesEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     DevicesPerNUMA
	AllocResp     []byte
}

type checkpointData struct {
	PodDeviceEntries  []PodDevicesEntry
	RegisteredDevices map[string][]string
}

// Data is the file: the allocations, the healthy devices of each
// registered resource, and the checksum.
type Data struct {
	Data     checkpointData
	Checksum checksum.Checksum
}

// New is a checkpoint of entries and registered devices.
func New(entries []PodDevicesEntry, registered map[string][]string) *Data {
	if entries == nil {
		entries = []PodDevicesEntry{}
	}
	if registered == nil {
		registered = map[string][]string{}
	}
	return &Data{Data: checkpointData{PodDeviceEntries: entries, RegisteredDevices: registered}}
}

// Entries are the allocations.
func (d *Data) Entries() []PodDevicesEntry { return d.Data.PodDeviceEntries }

// Registered are the devices of each resource registered when written.
func (d *Data) Registered() map[string][]string { return d.Data.RegisteredDevices }

// Marshal is the file's content, its checksum computed.
func (d *Data) Marshal() ([]byte, error) {
	d.Checksum = checksum.New(d.Data)
	return json.Marshal(*d)
}

// Write writes the checkpoint into dir, atomically.
func (d *Data) Write(dir string) error {
	b, err := d.Marshal()
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, FileName), b, 0o644, true)
}

// Read reads dir's checkpoint: nil, nil when there is none; an error
// when it does not parse or its checksum does not match.
func Read(dir string) (*Data, error) {
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("device manager checkpoint %s: %w", filepath.Join(dir, FileName), err)
	}
	if err := d.Checksum.Verify(d.Data); err != nil {
		return nil, fmt.Errorf("device manager checkpoint %s: %w", filepath.Join(dir, FileName), err)
	}
	return &d, nil
}
