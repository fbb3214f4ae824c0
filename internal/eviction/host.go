package eviction

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nodeagent/nodeagent/internal/stats"
)

// Host observes the signals from the host: /proc (under ProcRoot), and
// the file systems of RootDir (nodefs) and ImageFs (imagefs; a func, as
// the runtime tells where its images live).
type Host struct {
	ProcRoot string // "/proc"
	RootDir  string
	// ImageFs returns the image file system's mount point ("" : nodefs's).
	ImageFs func(ctx context.Context) (string, error)
}

// Observe reads every signal it can; a signal it cannot read is left out
// (with the error) rather than failing the others.
func (h Host) Observe(ctx context.Context) (map[string]Observation, error) {
	out := map[string]Observation{}
	var errs []error
	if o, err := memory(filepath.Join(h.ProcRoot, "meminfo")); err == nil {
		out[MemoryAvailable] = o
	} else {
		errs = append(errs, err)
	}
	if o, err := fsAvail(h.RootDir); err == nil {
		out[NodeFsAvailable] = o
		out[ImageFsAvailable] = o
	} else {
		errs = append(errs, err)
	}
	if h.ImageFs != nil {
		if mp, err := h.ImageFs(ctx); err == nil && mp != "" {
			if o, err := fsAvail(mp); err == nil {
				out[ImageFsAvailable] = o
			}
		}
	}
	if o, err := pids(h.ProcRoot); err == nil {
		out[PIDAvailable] = o
	} else {
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}

// memory is MemAvailable of MemTotal.
func memory(path string) (Observation, error) {
	mi, err := stats.KeyValues(path)
	if err != nil {
		return Observation{}, err
	}
	if mi["MemTotal"] == 0 {
		return Observation{}, fmt.Errorf("%s: no MemTotal", path)
	}
	return Observation{Capacity: int64(mi["MemTotal"] << 10), Available: int64(mi["MemAvailable"] << 10)}, nil
}

func fsAvail(path string) (Observation, error) {
	fs, err := stats.Statfs(path, time.Time{})
	if err != nil {
		return Observation{}, err
	}
	return Observation{Available: int64(*fs.AvailableBytes), Capacity: int64(*fs.CapacityBytes)}, nil
}

// pids is pid_max less the threads the kernel runs.
func pids(proc string) (Observation, error) {
	max, cur, err := stats.PIDs(proc)
	if err != nil {
		return Observation{}, err
	}
	return Observation{Available: max - cur, Capacity: max}, nil
}
