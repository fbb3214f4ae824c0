package podsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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
}

// Dir is the manifest-directory source: every regular, non-hidden file of
// Path is read (no recursion, as the kubelet does) and its Pod documents
// become static pods.
type Dir struct {
	cfg DirConfig
	log *zap.Logger

	mu sync.Mutex
	// good keeps the last pods read from each file, so that a broken edit
	// of a manifest keeps its running pod instead of killing it.
	good     map[string][]*v1.Pod
	problems map[string]string
	reported string // problems last handed to cfg.Problems, encoded
	// read holds the files read at least once; an inotify-triggered relist
	// re-reads only the files its events name and files not read yet.
	read map[string]bool
}

// NewDir validates cfg and returns a Dir.
func NewDir(cfg DirConfig) (*Dir, error) {
	if cfg.Path == "" || cfg.NodeName == "" || cfg.Sink == nil || cfg.Logger == nil || cfg.Clock == nil {
		return nil, errors.New("manifest dir source: Path, NodeName, Sink, Logger and Clock are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	return &Dir{
		cfg:      cfg,
		log:      cfg.Logger.Named("podsource").With(zap.String("source", pod.SourceFile), zap.String("dir", cfg.Path)),
		good:     map[string][]*v1.Pod{},
		problems: map[string]string{},
		read:     map[string]bool{},
	}, nil
}

// Problems returns, per file name, why the file's pods are not (or no
// longer) taken from it. The map is a copy.
func (d *Dir) Problems() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]string, len(d.problems))
	for k, v := range d.problems {
		out[k] = v
	}
	return out
}

// Relist reads the directory once, every file again as the kubelet does,
// and hands the full set of pods to the sink.
func (d *Dir) Relist() { d.relist(nil) }

// relist reads the directory; with changed set (an inotify burst), only
// the files it names and files never read are parsed again, the others
// are taken from the last read.
func (d *Dir) relist(changed map[string]bool) {
	d.mu.Lock()
	pods := d.relistLocked(changed)
	var problems map[string]string
	if enc := fmt.Sprint(d.problems); d.cfg.Problems != nil && enc != d.reported {
		d.reported = enc
		problems = make(map[string]string, len(d.problems))
		for k, v := range d.problems {
			problems[k] = v
		}
	}
	d.mu.Unlock()
	if problems != nil {
		d.cfg.Problems(problems)
	}
	d.cfg.Sink(pods)
}

func (d *Dir) relistLocked(changed map[string]bool) []*v1.Pod {
	entries, err := os.ReadDir(d.cfg.Path)
	if err != nil {
		d.log.Warn("read manifest directory; no pods from it until it is readable", zap.Error(err))
		entries = nil
	}
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		// Stat, not lstat: a symlinked manifest counts, as with the kubelet.
		info, err := os.Stat(filepath.Join(d.cfg.Path, name))
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		present[name] = true
		if changed != nil && !changed[name] && d.read[name] {
			continue
		}
		d.read[name] = true
		d.readFile(name)
	}
	for name := range d.read {
		if !present[name] {
			delete(d.read, name)
		}
	}
	for name := range d.good {
		if !present[name] {
			delete(d.good, name)
		}
	}
	for name := range d.problems {
		if !present[name] {
			delete(d.problems, name)
		}
	}
	return d.dedupLocked()
}

// readFile parses one file and records its pods or its problem.
func (d *Dir) readFile(name string) {
	path := filepath.Join(d.cfg.Path, name)
	log := d.log.With(zap.String("file", name))
	pods, err := d.parse(path, log)
	if err != nil {
		d.problems[name] = err.Error()
		if old, ok := d.good[name]; ok {
			log.Error("manifest is invalid; its pods keep running as last read until it is fixed",
				zap.Int("pods", len(old)), zap.Error(err))
		} else {
			log.Error("manifest is invalid; its pods are not started until it is fixed", zap.Error(err))
		}
		return
	}
	delete(d.problems, name)
	d.good[name] = pods
}

func (d *Dir) parse(path string, log *zap.Logger) ([]*v1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		// As the kubelet: an empty file is an error, not "no pods" — an
		// editor truncating before it writes must not restart the pod.
		// Delete the file to remove its pods.
		return nil, errors.New("file is empty")
	}
	return StaticPods(data, d.cfg.NodeName, pod.SourceFile, log)
}

// dedupLocked flattens the per-file pods in file-name order, dropping a pod
// whose full name or UID an earlier file already has.
func (d *Dir) dedupLocked() []*v1.Pod {
	files := make([]string, 0, len(d.good))
	for f := range d.good {
		files = append(files, f)
	}
	sort.Strings(files)
	seenName := map[string]string{}
	seenUID := map[pod.UID]bool{}
	var out []*v1.Pod
	for _, f := range files {
		for _, p := range d.good[f] {
			full := pod.FullName(p)
			if other, dup := seenName[full]; dup || seenUID[p.UID] {
				d.log.Error("duplicate pod ignored; rename one of them",
					zap.String("file", f), zap.String("pod", full), zap.String("firstFile", other))
				continue
			}
			seenName[full] = f
			seenUID[p.UID] = true
			out = append(out, p)
		}
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
			changed := map[string]bool{filepath.Base(ev.Name): true}
			full := drain(w.Events, changed, d.cfg.Path) || filepath.Clean(ev.Name) == filepath.Clean(d.cfg.Path)
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

// drain collects the file names of the events already queued, so one
// burst costs one re-list; it reports whether one was about dir itself.
func drain(ch <-chan fsnotify.Event, names map[string]bool, dir string) (dirEvent bool) {
	for {
		select {
		case ev := <-ch:
			names[filepath.Base(ev.Name)] = true
			dirEvent = dirEvent || filepath.Clean(ev.Name) == filepath.Clean(dir)
		default:
			return dirEvent
		}
	}
}
