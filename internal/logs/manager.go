package logs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Runtime is the part of the CRI runtime service the manager uses.
// *cri.Conn satisfies it. Calls may come from several workers at once.
type Runtime interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, in *runtimeapi.ReopenContainerLogRequest, opts ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error)
}

// Config configures a Manager. Every field but CallTimeout and
// PodLogsDir is required.
type Config struct {
	Runtime Runtime
	// Labels select the containers to rotate: a container lacking any of
	// them is left alone. The agent passes its own (managed=true and its
	// node name), so agents sharing a runtime never rotate each other's
	// logs.
	Labels map[string]string
	// Owns, if set, is also asked of each container's labels (the agent
	// that adopted the kubelet's containers lists all, Labels nil, and
	// keeps its own and the kubelet's). Labels or Owns is required.
	Owns func(labels map[string]string) bool
	// MaxSize is the size in bytes a log file is rotated at (> 0).
	MaxSize int64
	// MaxFiles is how many files a container's log may span, the live
	// one included (>= 2).
	MaxFiles int
	// MaxWorkers is how many containers are checked and rotated at once.
	MaxWorkers int
	// MonitorInterval is the period of the full pass: list the runtime's
	// containers and check every log file.
	MonitorInterval time.Duration
	// CallTimeout bounds each CRI call (default 2m).
	CallTimeout time.Duration
	// PodLogsDir, if set, is watched (inotify) for new container log
	// files, so a new container is found within ~100ms rather than at
	// the next full pass.
	PodLogsDir string
	Clock      clock.WithTicker
	Logger     *zap.Logger
}

// minCheck is the shortest gap between two checks of one growing file,
// and the look-ahead of the rotation decision (see file.due).
const minCheck = 50 * time.Millisecond

// Manager rotates the log files of running containers.
type Manager struct {
	cfg      Config
	log      *zap.Logger
	minCheck time.Duration

	mu    sync.Mutex       // held through each step: one step at a time
	files map[string]*file // by container ID; written only with mu held, outside workers

	// New log files reported by the watcher, found by discovery passes
	// at growing gaps (a new container's log file is created before the
	// container runs, so the first pass may not list it yet).
	pmu     sync.Mutex
	known   map[string]bool // the paths of files
	pending map[string]bool // reported, not yet known ("" for lost events)
	newLogs chan struct{}   // signals pending, capacity 1
}

// file is one running container's live log file, as last seen. A worker
// owns it for the duration of a check.
type file struct {
	id   string
	path string
	log  *zap.Logger // with containerID and file

	cur  int64     // size at the last check
	size int64     // size at the last rate sample
	at   time.Time // when that sample was taken
	// rate is the growth in bytes per second between the last two
	// samples (halving at each check when the writer slows down);
	// measured once there were two samples far enough apart.
	rate     float64
	measured bool
	// latency is how long a rotation takes from rename to the runtime
	// having reopened the file, during which the writer still writes to
	// the rotated file: the longest seen, decaying by a quarter at each
	// rotation.
	latency time.Duration
	// lateness is how much later than scheduled its checks ran (a busy
	// node, other containers' rotations first), likewise.
	lateness time.Duration
	// next is when the file is checked again before the next full pass;
	// zero when the full pass is soon enough.
	next time.Time
	// fresh is set until the first check tidied the leftovers of an
	// earlier run (stray temporary files, files beyond MaxFiles).
	fresh bool
}

// New validates cfg and returns a Manager.
func New(cfg Config) (*Manager, error) {
	var errs []error
	if cfg.Runtime == nil || cfg.Clock == nil || cfg.Logger == nil {
		errs = append(errs, errors.New("Runtime, Clock and Logger are required"))
	}
	if len(cfg.Labels) == 0 && cfg.Owns == nil {
		errs = append(errs, errors.New("Labels or Owns are required (the agent's own containers): without them every container of the runtime would be rotated"))
	}
	if cfg.MaxSize <= 0 {
		errs = append(errs, fmt.Errorf("max size %d: must be > 0", cfg.MaxSize))
	}
	if cfg.MaxFiles < 2 {
		errs = append(errs, fmt.Errorf("max files %d: must be >= 2", cfg.MaxFiles))
	}
	if cfg.MaxWorkers < 1 {
		errs = append(errs, fmt.Errorf("max workers %d: must be >= 1", cfg.MaxWorkers))
	}
	if cfg.MonitorInterval <= 0 {
		errs = append(errs, fmt.Errorf("monitor interval %v: must be > 0", cfg.MonitorInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("container log manager: %w", err)
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	return &Manager{
		cfg:      cfg,
		log:      cfg.Logger.Named("logs"),
		minCheck: min(minCheck, cfg.MonitorInterval),
		files:    map[string]*file{},
		known:    map[string]bool{},
		pending:  map[string]bool{},
		newLogs:  make(chan struct{}, 1),
	}, nil
}

// Run does a full pass (RotateAll) every MonitorInterval and, between
// passes, checks each growing file again when it could next be due
// (CheckDue), and looks for the containers of new log files
// (PodLogsDir), until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	m.log.Info("rotating container logs", zap.Int64("maxSize", m.cfg.MaxSize), zap.Int("maxFiles", m.cfg.MaxFiles),
		zap.Int("maxWorkers", m.cfg.MaxWorkers), zap.Duration("monitorInterval", m.cfg.MonitorInterval))
	if m.cfg.PodLogsDir != "" {
		if w, err := newWatcher(m.cfg.PodLogsDir, m.newLog, m.log); err != nil {
			m.log.Warn("watch the pod logs directory; new containers are found at the full passes only", zap.Error(err))
		} else {
			done := make(chan struct{})
			go func() {
				defer close(done)
				if err := w.run(ctx); err != nil {
					m.log.Warn("watch the pod logs directory; new containers are found at the full passes only", zap.Error(err))
				}
			}()
			defer func() { <-done }()
		}
	}
	ticker := m.cfg.Clock.NewTicker(m.cfg.MonitorInterval)
	defer ticker.Stop()
	m.rotateAll(ctx)
	var discoverAt time.Time // next discovery pass for pending new logs
	var gap time.Duration    // and the one after
	for {
		wake := m.nextCheck()
		if !discoverAt.IsZero() && (wake.IsZero() || discoverAt.Before(wake)) {
			wake = discoverAt
		}
		var timer clock.Timer
		var timerC <-chan time.Time
		if !wake.IsZero() {
			if d := wake.Sub(m.cfg.Clock.Now()); d > 0 {
				timer = m.cfg.Clock.NewTimer(d)
				timerC = timer.C()
			} else {
				// Already due (the clock moved while the loop was busy):
				// act now, not on a zero timer, which a clock may fire
				// only at its next tick.
				due := make(chan time.Time, 1)
				due <- m.cfg.Clock.Now()
				timerC = due
			}
		}
		select {
		case <-ctx.Done():
		case <-ticker.C():
			m.rotateAll(ctx)
		case <-m.newLogs:
			// The runtime creates the file just before it starts the
			// container: look once it has had a moment to.
			if next := m.cfg.Clock.Now().Add(m.minCheck); discoverAt.IsZero() || next.Before(discoverAt) {
				discoverAt, gap = next, m.minCheck
			}
		case now := <-timerC:
			if discoverAt.IsZero() || now.Before(discoverAt) {
				m.CheckDue(ctx)
				break
			}
			m.rotateAll(ctx)
			discoverAt = time.Time{}
			if gap *= 2; m.stillPending(gap < m.cfg.MonitorInterval) {
				discoverAt = m.cfg.Clock.Now().Add(gap)
			}
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// newLog is the watcher's report of a new log file (or of lost events,
// path "").
func (m *Manager) newLog(path string) {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	if m.known[path] {
		return // a file the runtime reopened after a rotation
	}
	m.pending[path] = true
	select {
	case m.newLogs <- struct{}{}:
	default:
	}
}

// stillPending drops the pending paths now known or gone and reports
// whether some are left; with retry false, it drops them all (the full
// passes will find their containers, if they are ours and run).
func (m *Manager) stillPending(retry bool) bool {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	for p := range m.pending {
		if _, err := os.Stat(p); !retry || p == "" || m.known[p] || err != nil {
			delete(m.pending, p)
		}
	}
	return len(m.pending) > 0
}

func (m *Manager) rotateAll(ctx context.Context) {
	if err := m.RotateAll(ctx); err != nil && ctx.Err() == nil {
		m.log.Warn("list containers for log rotation; retrying at the next interval", zap.Error(err))
	}
}

// nextCheck is the earliest time a file is due before the next full
// pass, zero if none is.
func (m *Manager) nextCheck() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	for _, f := range m.files {
		if !f.next.IsZero() && (next.IsZero() || f.next.Before(next)) {
			next = f.next
		}
	}
	return next
}

// RotateAll is one full pass: it lists the runtime's running containers
// carrying Labels, learns the log path of new ones, forgets those no
// longer running, and checks every log file, rotating those due, up to
// MaxWorkers at once. Problems with one container are logged and left to
// the next pass; the error is the list's. Not safe to call concurrently
// with itself or CheckDue (it waits for them).
func (m *Manager) RotateAll(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	resp, err := m.cfg.Runtime.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: m.cfg.Labels,
	}})
	cancel()
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	running := map[string]bool{}
	for _, c := range resp.GetContainers() {
		// The filter is the runtime's to apply; check it again here so a
		// runtime ignoring it cannot make us touch what is not ours.
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || !hasLabels(c.GetLabels(), m.cfg.Labels) ||
			(m.cfg.Owns != nil && !m.cfg.Owns(c.GetLabels())) {
			continue
		}
		running[c.GetId()] = true
		if m.files[c.GetId()] != nil {
			continue
		}
		path, err := m.logPath(ctx, c.GetId())
		if err != nil {
			m.log.Warn("read container log path; retrying at the next interval", zap.String("containerID", c.GetId()), zap.Error(err))
			continue
		}
		if path == "" {
			continue // the container logs nowhere
		}
		f := &file{id: c.GetId(), path: path, fresh: true,
			log: m.log.With(zap.String("containerID", c.GetId()), zap.String("file", path))}
		m.files[c.GetId()] = f
		f.log.Debug("following container log")
	}
	all := make([]*file, 0, len(m.files))
	m.pmu.Lock()
	clear(m.known)
	for id, f := range m.files {
		if !running[id] {
			delete(m.files, id) // not running: no longer written, so never rotated (as the kubelet)
			continue
		}
		m.known[f.path] = true
		all = append(all, f)
	}
	m.pmu.Unlock()
	m.checkAll(ctx, all, false)
	return nil
}

// CheckDue checks the files whose next check is due, without asking the
// runtime anything unless one must be rotated. Not safe to call
// concurrently with itself or RotateAll (it waits for them).
func (m *Manager) CheckDue(ctx context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	var due []*file
	for _, f := range m.files {
		if !f.next.IsZero() && !now.Before(f.next) {
			due = append(due, f)
		}
	}
	m.checkAll(ctx, due, true)
}

// checkAll checks files with up to MaxWorkers goroutines; each file is
// handled by one of them. scheduled says the checks are those the files
// scheduled.
func (m *Manager) checkAll(ctx context.Context, files []*file, scheduled bool) {
	var g errgroup.Group
	g.SetLimit(m.cfg.MaxWorkers)
	for _, f := range files {
		g.Go(func() error {
			m.check(ctx, f, scheduled)
			return nil
		})
	}
	g.Wait() //nolint:errcheck // the functions return nil
}

func (m *Manager) logPath(ctx context.Context, id string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	resp, err := m.cfg.Runtime.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return "", err
	}
	if resp.GetStatus() == nil {
		return "", errors.New("runtime returned no status")
	}
	return resp.GetStatus().GetLogPath(), nil
}

func (m *Manager) reopen(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	_, err := m.cfg.Runtime.ReopenContainerLog(cctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
	return err
}

// check samples one file and rotates it if it is due; then schedules its
// next check.
func (m *Manager) check(ctx context.Context, f *file, scheduled bool) {
	log := f.log
	if f.fresh {
		if _, err := tidy(f.path, m.cfg.MaxFiles-1); err != nil {
			log.Warn("clean up rotated container logs", zap.Error(err))
		}
		f.fresh = false
	}
	now := m.cfg.Clock.Now()
	if scheduled {
		f.lateness = max(now.Sub(f.next), f.lateness*3/4)
	}
	info, err := os.Stat(f.path)
	if errors.Is(err, os.ErrNotExist) {
		// Gone (removed by hand, or a rotation interrupted between
		// rename and reopen): the runtime writes to no visible file until
		// it reopens one.
		if err := m.reopen(ctx, f.id); err != nil {
			log.Warn("container log missing and reopening it failed; retrying at the next interval", zap.Error(err))
			f.next = time.Time{}
			return
		}
		info, err = os.Stat(f.path)
	}
	if err != nil {
		log.Warn("stat container log; retrying at the next interval", zap.Error(err))
		f.next = time.Time{}
		return
	}
	f.observe(info.Size(), now, m.minCheck)
	if f.due(m.cfg.MaxSize, m.minCheck) {
		if err := m.rotate(ctx, f); err != nil {
			log.Error("rotate container log; retrying at the next interval", zap.Int64("size", f.cur), zap.Error(err))
			f.next = time.Time{}
			return
		}
	}
	f.schedule(m.cfg.Clock.Now(), m.cfg.MaxSize, m.minCheck, m.cfg.MonitorInterval)
}

// rotate moves the live file aside and has the runtime reopen it, then
// compresses the older rotated files (see the package doc for the file
// life cycle). Before the rename, rotated files beyond MaxFiles-2 are
// removed, oldest first: after it there are at most MaxFiles-1 rotated
// files and the live one.
func (m *Manager) rotate(ctx context.Context, f *file) error {
	log := f.log
	rotated, err := tidy(f.path, m.cfg.MaxFiles-2)
	if err != nil {
		return err
	}
	start := m.cfg.Clock.Now()
	name := rotatedName(f.path, start, rotated)
	if err := os.Rename(f.path, name); err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	if err := m.reopen(ctx, f.id); err != nil {
		// Put the file back so the next check retries. If the runtime
		// did create a new file after all, keep both: the rotation
		// happened.
		if _, statErr := os.Lstat(f.path); errors.Is(statErr, os.ErrNotExist) {
			if renameErr := os.Rename(name, f.path); renameErr != nil {
				log.Error("rename rotated log back after a failed reopen; the runtime writes to it until the log is reopened",
					zap.String("rotated", name), zap.Error(renameErr))
			}
		}
		return fmt.Errorf("reopen container log: %w", err)
	}
	done := m.cfg.Clock.Now()
	f.latency = max(done.Sub(start), f.latency*3/4)
	log.Debug("rotated container log", zap.String("rotated", name), zap.Int64("size", f.cur), zap.Duration("latency", done.Sub(start)))
	f.cur, f.size, f.at = 0, 0, done
	for _, r := range rotated {
		if r.gz {
			continue
		}
		if err := compress(r.path); err != nil {
			// Left as it is; the next rotation tries again and MaxFiles
			// still counts it.
			log.Warn("compress rotated container log", zap.String("rotated", r.path), zap.Error(err))
		}
	}
	return nil
}

// observe records the file's size at a check, and its growth rate when
// the previous sample is far enough back to measure one.
func (f *file) observe(size int64, now time.Time, minCheck time.Duration) {
	f.cur = size
	switch {
	case f.at.IsZero() || size < f.size:
		// First sample, or truncated or replaced by someone else: start
		// over.
	case now.Sub(f.at) < minCheck/2:
		return // too close to the last sample to measure a rate
	default:
		f.rate = max(float64(size-f.size)/now.Sub(f.at).Seconds(), f.rate/2)
		f.measured = true
	}
	f.size, f.at = size, now
}

// due reports whether the file must be rotated now: it reached maxSize,
// or at its current rate it would pass maxSize before it could be checked
// again (minCheck, plus how late checks ran) and rotated (the rotation's
// latency). Rotating a fast-growing file a little early is what keeps
// every rotated file within maxSize; a file that does not grow is rotated
// at maxSize, as the kubelet does.
func (f *file) due(maxSize int64, minCheck time.Duration) bool {
	if f.cur >= maxSize {
		return true
	}
	lead := (minCheck + f.lateness + f.latency).Seconds()
	return f.cur > 0 && float64(f.cur)+f.rate*lead >= float64(maxSize)
}

// schedule sets the next check: waiting is safe while the file, at its
// rate, would not reach maxSize before a rotation started at the next
// check completes; the next check is halfway to the last safe moment, no
// sooner than minCheck (due rotates when even that is too late). None
// (the next full pass) when that is an interval away or more, or the file
// does not grow. A file whose rate is not known yet is looked at again
// as soon as one can be measured: a new container may be writing flat
// out.
func (f *file) schedule(now time.Time, maxSize int64, minCheck, interval time.Duration) {
	f.next = time.Time{}
	if !f.measured {
		f.next = f.at.Add(minCheck)
		return
	}
	if f.rate <= 0 {
		return
	}
	safe := time.Duration(float64(maxSize-f.cur)/f.rate*float64(time.Second)) - f.latency - f.lateness
	if d := safe / 2; d < interval {
		f.next = now.Add(max(d, minCheck))
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
