package logs

import (
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// timestampFormat is the kubelet's suffix of a rotated log:
	// <log>.20060102-150405, in local time.
	timestampFormat = "20060102-150405"
	gzSuffix        = ".gz"
	tmpSuffix       = ".tmp"
)

// rotated is one rotated file of a live log: <log>.<ts>[_<seq>][.gz].
// seq tells apart files rotated within the same second, which the
// kubelet's one-second timestamps cannot; it sorts after the plain name
// (_ after .), so name order stays age order for tools that sort names.
type rotated struct {
	path string
	ts   string // "" when the suffix is not a timestamp: sorted oldest
	seq  int
	gz   bool
}

func parseRotated(path, suffix string) rotated {
	r := rotated{path: path}
	suffix, r.gz = strings.CutSuffix(suffix, gzSuffix)
	ts, seq, hasSeq := strings.Cut(suffix, "_")
	if _, err := time.Parse(timestampFormat, ts); err != nil {
		return r
	}
	if hasSeq {
		n, err := strconv.Atoi(seq)
		if err != nil || n < 1 {
			return r
		}
		r.seq = n
	}
	r.ts = ts
	return r
}

// tidy lists the rotated files of the live log at path, oldest first,
// after removing leftovers of interrupted rotations (temporary files, and
// originals whose compressed copy is complete) and the oldest files
// beyond keep. Any file named <log>.* counts, as with the kubelet.
func tidy(path string, keep int) ([]rotated, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list rotated logs: %w", err)
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	prefix := base + "."
	var out []rotated
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasPrefix(n, prefix) {
			continue
		}
		p := filepath.Join(dir, n)
		if strings.HasSuffix(n, tmpSuffix) || !strings.HasSuffix(n, gzSuffix) && names[n+gzSuffix] {
			if err := remove(p); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, parseRotated(p, strings.TrimPrefix(n, prefix)))
	}
	slices.SortFunc(out, func(a, b rotated) int {
		return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.seq, b.seq), cmp.Compare(a.path, b.path))
	})
	for len(out) > max(keep, 0) {
		if err := remove(out[0].path); err != nil {
			return nil, err
		}
		out = out[1:]
	}
	return out, nil
}

func remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove old log: %w", err)
	}
	return nil
}

// rotatedName is the name the live log at path gets when rotated at now,
// given the rotated files already there (oldest first): the kubelet's
// <log>.<timestamp>, with _<seq> when that second is taken. Should the
// clock go back, the newest timestamp is reused, so that name order
// stays age order.
func rotatedName(path string, now time.Time, existing []rotated) string {
	ts := now.Format(timestampFormat)
	if n := len(existing); n > 0 && existing[n-1].ts > ts {
		ts = existing[n-1].ts
	}
	seq := -1
	for _, r := range existing {
		if r.ts == ts {
			seq = max(seq, r.seq)
		}
	}
	if seq < 0 {
		return path + "." + ts
	}
	return fmt.Sprintf("%s.%s_%03d", path, ts, seq+1)
}

// compress replaces path with path.gz, written to path.tmp first and
// renamed, so a path.gz is always complete.
func compress(path string) (err error) {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return err
	}
	tmp := path + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	w := gzip.NewWriter(out)
	if _, err := io.Copy(w, in); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path+gzSuffix); err != nil {
		return err
	}
	return remove(path)
}
