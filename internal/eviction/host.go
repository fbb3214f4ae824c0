package eviction

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
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
	b, err := os.ReadFile(path)
	if err != nil {
		return Observation{}, err
	}
	var o Observation
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "MemTotal:":
			o.Capacity = kb << 10
		case "MemAvailable:":
			o.Available = kb << 10
		}
	}
	if o.Capacity == 0 {
		return o, fmt.Errorf("%s: no MemTotal", path)
	}
	return o, nil
}

func fsAvail(path string) (Observation, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Observation{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	return Observation{Available: int64(st.Bavail) * st.Bsize, Capacity: int64(st.Blocks) * st.Bsize}, nil
}

// pids is pid_max minus the threads the kernel runs (/proc/loadavg's
// "running/total").
func pids(proc string) (Observation, error) {
	b, err := os.ReadFile(filepath.Join(proc, "sys", "kernel", "pid_max"))
	if err != nil {
		return Observation{}, err
	}
	max, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return Observation{}, fmt.Errorf("pid_max: %w", err)
	}
	la, err := os.ReadFile(filepath.Join(proc, "loadavg"))
	if err != nil {
		return Observation{}, err
	}
	f := strings.Fields(string(la))
	if len(f) < 4 {
		return Observation{}, errors.New("loadavg: short")
	}
	_, total, ok := strings.Cut(f[3], "/")
	n, err := strconv.ParseInt(total, 10, 64)
	if !ok || err != nil {
		return Observation{}, fmt.Errorf("loadavg: %q", f[3])
	}
	return Observation{Available: max - n, Capacity: max}, nil
}
