package logs

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

// Options select what Read writes: the kubelet's PodLogOptions, plus
// what following needs.
type Options struct {
	// Previous reads the instance before the latest one — or the latest
	// itself when LatestIsPrevious.
	Previous bool
	// LatestIsPrevious says the latest instance has exited and waits for
	// its restart (the status shows it as the container's lastState, as
	// the kubelet's does): --previous reads it, the kubelet's way, and not
	// the one before, which the container GC may have collected.
	LatestIsPrevious bool
	// TailLines, when >= 0, starts that many lines before the end of
	// what is there when the read starts; < 0 reads everything.
	TailLines int64
	// SinceTime, when set, skips the lines written before it.
	SinceTime time.Time
	// Timestamps prefixes each line with its time (RFC3339Nano, fixed
	// width) and a space.
	Timestamps bool
	// LimitBytes, when > 0, ends the read after that many bytes, possibly
	// within a line.
	LimitBytes int64
	// Follow keeps reading the latest instance's live file, across
	// rotations, until Exited is closed, a newer instance's log appears,
	// or ctx ends. It does nothing for an instance that is not the latest.
	Follow bool
	// Exited, when closed, tells Read that the followed instance has
	// exited: Read writes what is left and returns. nil: only a newer
	// instance or ctx ends a follow.
	Exited <-chan struct{}
	// Clock drives the periodic checks while following (default: real).
	Clock clock.WithTicker
	// PollInterval is how often a followed log is checked besides the
	// inotify wake-ups (default 1s; 250ms when inotify is unavailable).
	PollInterval time.Duration
}

// Read writes the log of one instance of the container in dir to w:
// every line of stdout and stderr in the order they were finished,
// without the CRI prefix, fragments joined, across the rotated files
// (gzipped ones too) and then the live one. Lines that are not CRI log
// lines are skipped, as the kubelet does. If w has a Flush() method it is
// called whenever a followed log has been read up to its end.
//
// It returns ErrNotFound when the container has no (previous) instance
// with a log; reaching LimitBytes is not an error; a follow ended by ctx
// returns ctx.Err().
func Read(ctx context.Context, dir *ContainerDir, opts Options, w io.Writer) error {
	restarts, err := dir.Restarts()
	if err != nil {
		return err
	}
	idx := len(restarts) - 1
	if opts.Previous && !opts.LatestIsPrevious {
		idx--
	}
	if idx < 0 {
		what := "no log"
		if opts.Previous {
			what = "no previous instance"
		}
		return fmt.Errorf("%w: %s in %s", ErrNotFound, what, dir.path)
	}
	follow := opts.Follow && !opts.Previous && idx == len(restarts)-1
	r := newReader(dir, restarts[idx], opts, w)
	defer r.close()
	if follow {
		// Watched from before the first listing, so that the runtime
		// closing a file is known however early.
		if w, err := watchDir(dir.fd); err == nil {
			defer w.close()
			r.watch, r.writerClosed, r.closeWait = w.wake, w.writerClosed, writerCloseWait
			r.forget = w.forget
		}
	}
	err = r.start(!follow)
	if err == nil && follow {
		err = r.follow(ctx)
	}
	if errors.Is(err, errLimit) {
		err = nil
	}
	return err
}

// ReadRestart writes the log of the container's instance with the given
// restart number, as Read does, without following.
func ReadRestart(dir *ContainerDir, restart int, opts Options, w io.Writer) error {
	restarts, err := dir.Restarts()
	if err != nil {
		return err
	}
	if !slices.Contains(restarts, restart) {
		return fmt.Errorf("%w: no log of instance %d in %s", ErrNotFound, restart, dir.path)
	}
	opts.Follow = false
	r := newReader(dir, restart, opts, w)
	defer r.close()
	err = r.start(true)
	if errors.Is(err, errLimit) {
		err = nil
	}
	return err
}

func newReader(dir *ContainerDir, restart int, opts Options, w io.Writer) *reader {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	r := &reader{
		dir:     dir,
		restart: restart,
		base:    strconv.Itoa(restart) + ".log",
		opts:    opts,
		out:     newOutput(w, opts),
	}
	r.join.out = r.out.line
	return r
}

// source is one open log file.
type source struct {
	f   *os.File // nil: the file was gone by the time it was opened
	gz  *gzip.Reader
	r   *bufio.Reader
	ino uint64
	// name is the file's rotated name without .gz ("0.log.20240102-150405");
	// "" while it is (or was last known as) the live file.
	name    string
	removed bool   // the live file it was is gone without a rotated name
	raw     []byte // a raw line not yet ended by '\n'
}

func (s *source) close() {
	if s != nil && s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// rewind starts the file over (after the tail count).
func (s *source) rewind() error {
	if s.f == nil {
		return nil
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	s.raw = s.raw[:0]
	if s.gz != nil {
		if err := s.gz.Reset(s.f); err != nil {
			return err
		}
		s.r.Reset(s.gz)
		return nil
	}
	s.r.Reset(s.f)
	return nil
}

type reader struct {
	dir     *ContainerDir
	restart int
	base    string // the live file's name, <restart>.log
	opts    Options
	out     *output
	join    joiner

	cur *source
	// prev is the file cur followed, read until prevUntil.
	prev      *source
	prevUntil time.Time
	// seen holds the rotated names there were when cur was opened as the
	// live file: once it is rotated, its name is the first new one.
	seen map[string]bool

	// Following: wake-ups, and whether the runtime closed a file
	// (nil: unknown; then the next file is read as soon as it has data).
	watch        <-chan struct{}
	writerClosed func(name string) bool
	forget       func(keep func(string) bool)
	closeWait    time.Duration
	waitSince    time.Time // since the next file has data, cur not closed
}

func (r *reader) close() {
	r.cur.close()
	r.prev.close()
}

// start reads what the log holds, up to the live file's current end,
// and writes the lines TailLines keeps. cur is then the live file (or
// the last rotated one while the runtime reopens); final (a read that
// does not follow) ends the read there, its last lines included.
func (r *reader) start(final bool) error {
	files, err := r.snapshot()
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range files {
			s.close()
		}
	}()
	if len(files) == 0 {
		r.cur = &source{removed: true} // pruned between listing and opening
		return r.out.endTail()
	}
	start := 0
	if r.opts.TailLines >= 0 {
		if start, err = r.tailStart(files); err != nil {
			return err
		}
	}
	last := len(files) - 1
	for i := start; i < last; i++ {
		if err := r.drain(files[i]); err != nil {
			return err
		}
		if err := r.finish(files[i]); err != nil {
			return err
		}
	}
	r.cur, files[last] = files[last], nil
	if err := r.drain(r.cur); err != nil {
		return err
	}
	if final {
		// What the end of the log completes (a last line without '\n')
		// or leaves unfinished (each stream's pending line) is among the
		// last lines, counted by TailLines like any other.
		if err := r.finish(r.cur); err != nil {
			return err
		}
		if err := r.join.flush(); err != nil {
			return err
		}
	}
	return r.out.endTail()
}

// entry is one rotated file in a listing.
type entry struct {
	rotated
	name  string // without .gz
	plain bool   // the uncompressed file is there
	gzip  bool   // the compressed one is
}

// listing is what the directory holds of the instance.
type listing struct {
	rotated []entry // oldest first
	live    bool
	liveIno uint64
	liveLen int64
	// stable: the live file was the same before and after the names
	// were read, so they are those of its time.
	stable bool
	newer  bool // a later instance has a log
}

func (r *reader) list() (listing, error) {
	var l listing
	before, _, err := r.statLive()
	if err != nil {
		return l, err
	}
	names, err := r.dir.names()
	if err != nil {
		return l, err
	}
	byName := map[string]*entry{}
	for _, n := range names {
		if n == r.base {
			continue
		}
		if k, ok := restartOf(n); ok && k > r.restart {
			l.newer = true
		}
		suffix, ok := strings.CutPrefix(n, r.base+".")
		if !ok || strings.HasSuffix(n, tmpSuffix) {
			continue
		}
		plain, isGz := strings.CutSuffix(n, gzSuffix)
		e := byName[plain]
		if e == nil {
			suffix, _ = strings.CutSuffix(suffix, gzSuffix)
			e = &entry{rotated: parseRotated(plain, suffix), name: plain}
			byName[plain] = e
		}
		if isGz {
			e.gzip = true
		} else {
			e.plain = true
		}
	}
	for _, e := range byName {
		l.rotated = append(l.rotated, *e)
	}
	slices.SortFunc(l.rotated, func(a, b entry) int { return compareRotated(a.rotated, b.rotated) })
	if l.liveIno, l.liveLen, err = r.statLive(); err != nil {
		return l, err
	}
	l.live = l.liveIno != 0
	l.stable = l.live && before == l.liveIno
	return l, nil
}

// statLive is the live file's inode and size; inode 0 when there is none.
func (r *reader) statLive() (uint64, int64, error) {
	st, err := r.dir.stat(r.base)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG:
		return st.Ino, st.Size, nil
	case err == nil:
		return 0, 0, fmt.Errorf("%w: %s/%s is not a regular file", ErrUnsafePath, r.dir.path, r.base)
	case errors.Is(err, unix.ENOENT):
		return 0, 0, nil
	default:
		return 0, 0, fmt.Errorf("stat %s/%s: %w", r.dir.path, r.base, err)
	}
}

// compareRotated is age order (files.go's tidy).
func compareRotated(a, b rotated) int {
	return cmp.Or(cmp.Compare(a.ts, b.ts), cmp.Compare(a.seq, b.seq), cmp.Compare(a.path, b.path))
}

// snapshot opens the instance's files, oldest first, the live one last:
// those of one listing, taken again if the live file was rotated
// meanwhile (else the file live at the listing would be missed).
func (r *reader) snapshot() ([]*source, error) {
	for try := 0; ; try++ {
		l, err := r.list()
		if err != nil {
			return nil, err
		}
		if l.live && !l.stable && try < maxTries {
			continue
		}
		var out []*source
		closeAll := func() {
			for _, s := range out {
				s.close()
			}
		}
		for _, e := range l.rotated {
			s, err := r.openRotated(e)
			if err != nil {
				closeAll()
				return nil, err
			}
			if s.f != nil {
				out = append(out, s)
			}
		}
		if !l.live {
			return out, nil
		}
		s, seen, err := r.openLive()
		if err != nil {
			closeAll()
			return nil, err
		}
		if s.f != nil {
			out = append(out, s)
		}
		r.seen = seen
		if !newNames(seen, l) || try >= maxTries {
			return out, nil
		}
		// Rotated since the listing: the file live then was not opened.
		closeAll()
	}
}

// maxTries bounds the retries of a listing raced by rotations.
const maxTries = 5

// openRotated opens a rotated file, compressed or not: the rotator may
// compress it meanwhile. A file gone altogether yields a source with
// no file.
func (r *reader) openRotated(e entry) (*source, error) {
	s := &source{name: e.name}
	for _, gz := range []bool{false, true} {
		name := e.name
		if gz {
			name += gzSuffix
		}
		f, err := r.dir.open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		s.f = f
		if !gz {
			s.r = bufio.NewReaderSize(f, 64<<10)
			return s, nil
		}
		zr, err := gzip.NewReader(f)
		if errors.Is(err, io.EOF) {
			s.r = bufio.NewReader(strings.NewReader("")) // empty
			return s, nil
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("read %s: %w", f.Name(), err)
		}
		s.gz, s.r = zr, bufio.NewReaderSize(zr, 64<<10)
		return s, nil
	}
	return s, nil
}

// openLive opens the live file and learns how to tell it once rotated:
// the rotated names there are while it is live (reader.seen; once
// rotated, it is the first new one), or, rotated already, its name.
func (r *reader) openLive() (*source, map[string]bool, error) {
	f, err := r.dir.open(r.base)
	if errors.Is(err, os.ErrNotExist) {
		return &source{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, nil, err
	}
	s := &source{f: f, r: bufio.NewReaderSize(f, 64<<10), ino: st.Ino}
	for try := 0; ; try++ {
		l, err := r.list()
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		if (l.stable && l.liveIno == s.ino) || try >= maxTries {
			seen := map[string]bool{}
			for _, e := range l.rotated {
				seen[e.name] = true
			}
			return s, seen, nil
		}
		if name := r.nameOf(l, s.ino); name != "" {
			s.name = name
			return s, nil, nil
		}
	}
}

// rotatedAfter reports whether names holds a rotated name after cur's:
// then cur is not followed by the live file.
func (r *reader) rotatedAfter(names map[string]bool) bool {
	if r.cur.removed {
		return false
	}
	cur := parseRotated(r.cur.name, strings.TrimPrefix(r.cur.name, r.base+"."))
	for name := range names {
		if compareRotated(parseRotated(name, strings.TrimPrefix(name, r.base+".")), cur) > 0 {
			return true
		}
	}
	return false
}

// newNames reports whether names (listed later) holds a rotated name l
// does not; nil names (the live file rotated already) count as new.
func newNames(names map[string]bool, l listing) bool {
	if names == nil {
		return true
	}
	old := map[string]bool{}
	for _, e := range l.rotated {
		old[e.name] = true
	}
	for name := range names {
		if !old[name] {
			return true
		}
	}
	return false
}

// nameOf is the name of the uncompressed rotated file with inode ino, if
// any.
func (r *reader) nameOf(l listing, ino uint64) string {
	for _, e := range l.rotated {
		if !e.plain {
			continue
		}
		if st, err := r.dir.stat(e.name); err == nil && st.Ino == ino {
			return e.name
		}
	}
	return ""
}

// tailStart is the first file to read for TailLines: counting from the
// newest file back, the one from which on there are more than TailLines
// finished lines (one more, as the first may be the end of a line begun
// in the file before).
func (r *reader) tailStart(files []*source) (int, error) {
	var n int64
	for i := len(files) - 1; i > 0; i-- {
		c, err := countLines(files[i])
		if err != nil {
			return 0, err
		}
		if err := files[i].rewind(); err != nil {
			return 0, err
		}
		if n += c; n > r.opts.TailLines {
			// One file more: a line the file before began (a fragment of
			// one stream while the other wrote lines) ends in this one.
			return i - 1, nil
		}
	}
	return 0, nil
}

// countLines counts the F records of a file, to its current end.
func countLines(s *source) (int64, error) {
	var n int64
	for {
		b, err := s.r.ReadSlice('\n')
		if len(b) > 0 && err == nil {
			if rec, perr := parseCRI(b); perr == nil && !rec.partial {
				n++
			}
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return n, nil
		default:
			return 0, fmt.Errorf("read %s: %w", s.f.Name(), err)
		}
	}
}

// drain reads s up to its current end, keeping a last raw line not yet
// ended by '\n' for later.
func (r *reader) drain(s *source) error {
	if s == nil || s.f == nil {
		return nil
	}
	for {
		b, err := s.r.ReadSlice('\n')
		if err == nil {
			if len(s.raw) > 0 {
				s.raw = append(s.raw, b...)
				b = s.raw
			}
			if err := r.raw(b); err != nil {
				return err
			}
			s.raw = s.raw[:0]
			continue
		}
		s.raw = append(s.raw, b...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return fmt.Errorf("read %s: %w", s.f.Name(), err)
		}
	}
}

// finish handles what a file that will not grow any more leaves
// unended, and closes it.
func (r *reader) finish(s *source) error {
	if s == nil {
		return nil
	}
	defer s.close()
	if len(s.raw) == 0 {
		return nil
	}
	raw := s.raw
	s.raw = nil
	return r.raw(raw)
}

func (r *reader) raw(b []byte) error {
	rec, err := parseCRI(b)
	if err != nil {
		return nil // not a CRI log line: skipped, as the kubelet does
	}
	return r.join.add(rec)
}
