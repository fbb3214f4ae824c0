package podsource

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// DirConfig configures a manifest-directory source.
type DirConfig struct {
	Path     string
	NodeName string
	// Period is the re-list period that catches missed inotify events
	// (--file-check-frequency).
	Period time.Duration
	Clock  clock.WithTicker
	Logger *zap.Logger
	// Sink receives the full set of pods after every change.
	Sink func(pods []*v1.Pod)
	// Problems, if set, receives the file problems (file → reason; empty
	// when none) whenever they change.
	Problems func(map[string]string)
	// RefuseInsecure makes a manifest writable by anyone but root (or one
	// in a directory that is) a problem instead of a warning: a manifest
	// is root on the node.
	RefuseInsecure bool
}

// Dir is the manifest-directory source: every regular, non-hidden file of
// Path is read (no recursion, as the kubelet does) and its Pod documents
// become static pods.
//
// Cost is linear in what changed: a file is parsed (decode, defaults,
// validation) only when its bytes differ from the last read, so a bad file
// is logged once per change, and an inotify burst reads only the files it
// names. Every file that yields no pod is listed among the problems with
// its reason: unparsable, invalid, empty, not a Pod, not a regular file
// (FIFO, device, directory symlink loop…), unreadable, too large, or a
// duplicate of a pod another file defines.
type Dir struct {
	cfg DirConfig
	log *zap.Logger

	mu    sync.Mutex
	files map[string]*manifestFile
	// problemsChanged is set when a problem appeared, changed or went.
	problemsChanged bool
	// dups holds the duplicate-name problems of the last dedup.
	dups map[string]string
	// insecureDir is the last warning about the directory's own
	// permissions ("" when fine), so it is logged once per change.
	insecureDir string
}

// manifestFile is what the source knows of one file.
type manifestFile struct {
	sum [sha256.Size]byte // of the bytes last parsed
	// pods are the last good pods: a broken edit keeps its running pods
	// instead of killing them.
	pods    []*v1.Pod
	problem string
	// insecure is the last permission warning logged for it.
	insecure string
}

// maxManifestSize bounds one manifest file; a bigger one is a problem, not
// a memory spike.
const maxManifestSize = 4 << 20

// NewDir validates cfg and returns a Dir.
func NewDir(cfg DirConfig) (*Dir, error) {
	if cfg.Path == "" || cfg.NodeName == "" || cfg.Sink == nil || cfg.Logger == nil || cfg.Clock == nil {
		return nil, errors.New("manifest dir source: Path, NodeName, Sink, Logger and Clock are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	return &Dir{
		cfg:   cfg,
		log:   cfg.Logger.Named("podsource").With(zap.String("source", pod.SourceFile), zap.String("dir", cfg.Path)),
		files: map[string]*manifestFile{},
		dups:  map[string]string{},
	}, nil
}

// Problems returns, per file name, why the file's pods are not (or no
// longer) taken from it. The map is a copy.
func (d *Dir) Problems() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.problemsLocked()
}

func (d *Dir) problemsLocked() map[string]string {
	out := map[string]string{}
	for name, f := range d.files {
		if f.problem != "" {
			out[name] = f.problem
		}
	}
	for name, why := range d.dups {
		if _, ok := out[name]; !ok {
			out[name] = why
		}
	}
	return out
}

// Relist reads the directory once, every file as the kubelet does (files
// whose bytes did not change are not parsed again), and hands the full set
// of pods to the sink.
func (d *Dir) Relist() { d.relist(nil) }

// relist reads the directory; with changed set (an inotify burst), only
// the files it names are looked at.
func (d *Dir) relist(changed map[string]bool) {
	d.mu.Lock()
	if changed == nil {
		d.relistAllLocked()
	} else {
		for name := range changed {
			if !strings.HasPrefix(name, ".") && name != "" && !strings.Contains(name, "/") {
				d.checkLocked(name)
			}
		}
	}
	pods := d.dedupLocked()
	var problems map[string]string
	if d.problemsChanged && d.cfg.Problems != nil {
		problems = d.problemsLocked()
	}
	d.problemsChanged = false
	d.mu.Unlock()
	if problems != nil {
		d.cfg.Problems(problems)
	}
	d.cfg.Sink(pods)
}

func (d *Dir) relistAllLocked() {
	if info, err := os.Stat(d.cfg.Path); err == nil {
		why := insecure(info)
		if why != d.insecureDir && why != "" {
			d.log.Warn("manifest directory is writable by others than root: whoever can write it is root on this node",
				zap.String("problem", why), zap.Bool("refused", d.cfg.RefuseInsecure))
		}
		d.insecureDir = why
	}
	entries, err := os.ReadDir(d.cfg.Path)
	if err != nil {
		d.log.Warn("read manifest directory; no pods from it until it is readable", zap.Error(err))
		entries = nil
	}
	present := make(map[string]bool, len(entries))
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		present[name] = true
		d.checkLocked(name)
	}
	for name := range d.files {
		if !present[name] {
			d.forgetLocked(name)
		}
	}
}

func (d *Dir) forgetLocked(name string) {
	if f, ok := d.files[name]; ok {
		if f.problem != "" {
			d.problemsChanged = true
		}
		delete(d.files, name)
	}
}

// checkLocked looks at one directory entry: gone, skipped (with its
// reason) or read.
func (d *Dir) checkLocked(name string) {
	path := filepath.Join(d.cfg.Path, name)
	// Stat, not lstat: a symlinked manifest counts, as with the kubelet.
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, lerr := os.Lstat(path); lerr != nil {
			d.forgetLocked(name) // removed
			return
		}
		d.setProblemLocked(name, "symlink to a file that does not exist", nil)
		return
	case err != nil:
		d.setProblemLocked(name, fmt.Sprintf("cannot stat: %v", unwrapPathError(err)), nil)
		return
	case info.IsDir():
		d.forgetLocked(name) // subdirectories are not read (as the kubelet)
		return
	case !info.Mode().IsRegular():
		d.setProblemLocked(name, fmt.Sprintf("not a regular file (%s)", fileKind(info.Mode())), nil)
		return
	case info.Size() > maxManifestSize:
		d.setProblemLocked(name, fmt.Sprintf("file is larger than %d bytes", maxManifestSize), nil)
		return
	}
	d.readLocked(name, path)
}

// permittedLocked applies the permission policy to the opened file's
// metadata (not to the path, which could be swapped between a check and
// the read): false when the file is refused.
func (d *Dir) permittedLocked(name string, info fs.FileInfo) bool {
	why := insecure(info)
	if why == "" && d.insecureDir != "" {
		why = "its directory " + d.insecureDir
	}
	if why != "" && d.cfg.RefuseInsecure {
		d.setProblemLocked(name, "refused: writable by others than root ("+why+"); fix the permissions or drop --manifest-permissions=refuse", nil)
		return false
	}
	f := d.entryLocked(name)
	if why != "" && f.insecure != why {
		d.log.Warn("manifest is writable by others than root: whoever can write it is root on this node",
			zap.String("file", name), zap.String("problem", why))
	}
	f.insecure = why
	return true
}

// insecure says why a manifest (or its directory) could be written by
// someone other than root, "" when only root can.
func insecure(info fs.FileInfo) string {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	mode := info.Mode().Perm()
	switch {
	case st.Uid != 0 && mode&0o200 != 0:
		return fmt.Sprintf("owned by uid %d with mode %04o", st.Uid, mode)
	case mode&0o002 != 0:
		return fmt.Sprintf("world-writable, mode %04o", mode)
	case st.Gid != 0 && mode&0o020 != 0:
		return fmt.Sprintf("writable by group %d, mode %04o", st.Gid, mode)
	}
	return ""
}

// readLocked reads one regular file and parses it when its bytes changed.
func (d *Dir) readLocked(name, path string) {
	data, info, err := readLimited(path, maxManifestSize)
	if err != nil {
		d.setProblemLocked(name, fmt.Sprintf("read: %v", unwrapPathError(err)), nil)
		return
	}
	if !d.permittedLocked(name, info) {
		return
	}
	sum := sha256.Sum256(data)
	if f, ok := d.files[name]; ok && f.sum == sum {
		return // unchanged since it was parsed: same pods, same problem
	}
	log := d.log.With(zap.String("file", name))
	pods, err := d.parse(data, log)
	if err != nil {
		d.setProblemLocked(name, err.Error(), log)
	} else {
		f := d.entryLocked(name)
		if f.problem != "" {
			d.problemsChanged = true
			log.Info("manifest is valid again", zap.Int("pods", len(pods)))
		}
		f.problem, f.pods = "", pods
	}
	d.files[name].sum = sum
}

func (d *Dir) entryLocked(name string) *manifestFile {
	f, ok := d.files[name]
	if !ok {
		f = &manifestFile{}
		d.files[name] = f
	}
	return f
}

// setProblemLocked records why a file gives no (new) pods; it is logged
// (once: only a changed problem is) when log is set or the problem is new.
func (d *Dir) setProblemLocked(name, problem string, log *zap.Logger) {
	f := d.entryLocked(name)
	if f.problem == problem {
		return
	}
	f.problem = problem
	f.sum = [sha256.Size]byte{} // read again when it becomes readable
	d.problemsChanged = true
	if log == nil {
		log = d.log.With(zap.String("file", name))
	}
	if len(f.pods) > 0 {
		log.Warn("manifest is invalid; its pods keep running as last read until it is fixed",
			zap.Int("pods", len(f.pods)), zap.String("problem", problem))
	} else {
		log.Warn("manifest is invalid; its pods are not started until it is fixed", zap.String("problem", problem))
	}
}

func (d *Dir) parse(data []byte, log *zap.Logger) ([]*v1.Pod, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		// As the kubelet: an empty file is an error, not "no pods" — an
		// editor truncating before it writes must not restart the pod.
		// Delete the file to remove its pods.
		return nil, errors.New("file is empty")
	}
	return StaticPods(data, d.cfg.NodeName, pod.SourceFile, log)
}

// readLimited reads at most limit bytes of a regular file; O_NONBLOCK so
// that a file swapped for a FIFO after the stat cannot hang the source.
// It returns the opened file's metadata with its bytes.
func readLimited(path string, limit int64) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("not a regular file (%s)", fileKind(info.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) > limit {
		return nil, nil, fmt.Errorf("file is larger than %d bytes", limit)
	}
	return data, info, nil
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m.IsDir():
		return "directory"
	}
	return m.Type().String()
}

// dedupLocked flattens the per-file pods in file-name order, dropping a pod
// whose full name or UID an earlier file already has; each dropped pod is
// a problem of its file.
func (d *Dir) dedupLocked() []*v1.Pod {
	files := make([]string, 0, len(d.files))
	for name, f := range d.files {
		if len(f.pods) > 0 {
			files = append(files, name)
		}
	}
	sort.Strings(files)
	seenName := make(map[string]string, len(files))
	seenUID := make(map[pod.UID]bool, len(files))
	out := make([]*v1.Pod, 0, len(files))
	dups := map[string]string{}
	for _, name := range files {
		for _, p := range d.files[name].pods {
			full := pod.FullName(p)
			if other, dup := seenName[full]; dup || seenUID[p.UID] {
				if other == "" {
					other = "another file"
				}
				dups[name] = fmt.Sprintf("pod %s is already defined by %s; this file's copy is ignored (rename one of them)", full, other)
				continue
			}
			seenName[full] = name
			seenUID[p.UID] = true
			out = append(out, p)
		}
	}
	if !maps.Equal(dups, d.dups) {
		for name, why := range dups {
			if d.dups[name] != why {
				d.log.Warn("duplicate pod ignored", zap.String("file", name), zap.String("problem", why))
			}
		}
		d.dups = dups
		d.problemsChanged = true
	}
	return out
}

// Run lists the directory at once, then on every inotify event and every
// Period, until ctx ends. Events arriving together are read as one change.
func (d *Dir) Run(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("create inotify watcher: %w", err)
	}
	defer w.Close()
	watching := false
	watch := func() {
		if watching {
			return
		}
		if err := w.Add(d.cfg.Path); err != nil {
			d.log.Warn("watch manifest directory; relying on the periodic re-list", zap.Error(err))
			return
		}
		watching = true
	}
	watch()
	d.Relist()
	tick := d.cfg.Clock.NewTicker(d.cfg.Period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
			watch()
			d.Relist()
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("inotify watcher closed")
			}
			changed := map[string]bool{}
			full := note(changed, ev, d.cfg.Path)
			full = d.collect(w.Events, changed) || full
			if full {
				// The directory itself changed (replaced, moved): watch
				// it anew and read everything.
				if watching {
					w.Remove(d.cfg.Path) //nolint:errcheck
				}
				watching = false
				watch()
				d.Relist()
				continue
			}
			d.relist(changed)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("inotify watcher closed")
			}
			// An overflow loses events: read everything.
			d.log.Warn("inotify error; re-reading the whole directory", zap.Error(err))
			d.Relist()
		}
	}
}

// Event coalescing: after an event, events are collected until none came
// for burstQuiet, or for at most burstMax, so that a burst (files moved in
// by the thousand, an editor's write-and-rename) costs one re-read of the
// files it names, not one per event.
const (
	burstQuiet = 2 * time.Millisecond
	burstMax   = 100 * time.Millisecond
)

// collect gathers the file names of the events of one burst; it reports
// whether one was about the directory itself.
func (d *Dir) collect(ch <-chan fsnotify.Event, names map[string]bool) (dirEvent bool) {
	deadline := d.cfg.Clock.Now().Add(burstMax)
	for {
		dirEvent = drain(ch, names, d.cfg.Path) || dirEvent
		left := deadline.Sub(d.cfg.Clock.Now())
		if left <= 0 {
			return dirEvent
		}
		t := d.cfg.Clock.NewTimer(min(burstQuiet, left))
		select {
		case ev, ok := <-ch:
			t.Stop()
			if !ok {
				return dirEvent
			}
			dirEvent = note(names, ev, d.cfg.Path) || dirEvent
		case <-t.C():
			return dirEvent
		}
	}
}

// drain collects the file names of the events already queued; it reports
// whether one was about dir itself.
func drain(ch <-chan fsnotify.Event, names map[string]bool, dir string) (dirEvent bool) {
	for {
		select {
		case ev := <-ch:
			dirEvent = note(names, ev, dir) || dirEvent
		default:
			return dirEvent
		}
	}
}

// note records the file an event names; it reports whether the event was
// about dir itself.
func note(names map[string]bool, ev fsnotify.Event, dir string) bool {
	names[filepath.Base(ev.Name)] = true
	return filepath.Clean(ev.Name) == filepath.Clean(dir)
}
