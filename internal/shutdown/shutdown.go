package shutdown

import (
	"context"
	"errors"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"
)

// The kubelet's reasons and messages (nodeshutdown_manager.go).
const (
	Reason             = "Terminated"
	Message            = "Pod was terminated in response to imminent node shutdown."
	NotAdmittedReason  = "NodeShutdown"
	NotAdmittedMessage = "Pod was rejected as the node is shutting down."
)

// ErrShuttingDown is the node's state while it shuts down (the Ready
// condition's message).
var ErrShuttingDown = errors.New("node is shutting down")

// Group is the pods of a priority and up (to the next group's), stopped
// within GracePeriodSeconds.
type Group struct {
	Priority           int32
	GracePeriodSeconds int64
}

// The priorities of the two groups shutdownGracePeriod and
// shutdownGracePeriodCriticalPods make (scheduling's
// DefaultPriorityWhenNoDefaultClassExists and SystemCriticalPriority).
const (
	defaultPriority  = 0
	criticalPriority = 2000000000
)

// Groups are the shutdown groups, lowest priority first: byPriority as
// given, else regular pods within period minus critical and critical
// ones within critical (the kubelet's migrateConfig); none when no period
// is set (graceful node shutdown off).
func Groups(period, critical time.Duration, byPriority []kubeletv1beta1.ShutdownGracePeriodByPodPriority) []Group {
	var out []Group
	for _, g := range byPriority {
		out = append(out, Group{Priority: g.Priority, GracePeriodSeconds: g.ShutdownGracePeriodSeconds})
	}
	if len(out) == 0 {
		if period <= 0 || critical > period {
			return nil
		}
		out = []Group{
			{Priority: defaultPriority, GracePeriodSeconds: int64((period - critical) / time.Second)},
			{Priority: criticalPriority, GracePeriodSeconds: int64(critical / time.Second)},
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority < out[j].Priority })
	return out
}

// Inhibitor is logind as the manager needs it.
type Inhibitor interface {
	// InhibitDelay is logind's InhibitDelayMaxUSec: the longest a delay
	// lock holds a shutdown back.
	InhibitDelay() (time.Duration, error)
	// RaiseInhibitDelay makes logind's InhibitDelayMaxUSec d (a
	// configuration override and a reload).
	RaiseInhibitDelay(d time.Duration) error
	// Inhibit takes a delay lock on shutdown; closing it releases it.
	Inhibit() (io.Closer, error)
	// Watch delivers PrepareForShutdown: true when the shutdown starts,
	// false when it is cancelled; closed when the connection is lost.
	Watch() (<-chan bool, error)
	// PreparingForShutdown is logind's PreparingForShutdown: whether a
	// shutdown is under way now (what a signal missed while disconnected
	// said).
	PreparingForShutdown() (bool, error)
	Close() error
}

// Config wires a Manager.
type Config struct {
	Groups []Group
	// Connect opens logind's API (the system bus).
	Connect func() (Inhibitor, error)
	// ActivePods are the pods to stop.
	ActivePods func() []*v1.Pod
	// Terminate stops a pod with the grace period given, its status
	// Failed with the reason and message; the channel is closed once it
	// is stopped.
	Terminate func(p *v1.Pod, grace int64, reason, message string) <-chan struct{}
	// OnShutdown, if set, is called when the shutdown starts and when it
	// is cancelled (the Node's status).
	OnShutdown func()
	// Event, if set, records an event about the node.
	Event  func(reason, message string)
	Clock  clock.WithTicker
	Logger *zap.Logger
}

// Manager is graceful node shutdown.
type Manager struct {
	cfg          Config
	log          *zap.Logger
	shuttingDown atomic.Bool

	mu   sync.Mutex
	lock io.Closer
}

// New returns a Manager; nil Groups: nothing to do (Run returns at once).
func New(cfg Config) *Manager {
	return &Manager{cfg: cfg, log: cfg.Logger.Named("shutdown")}
}

// ShuttingDown is ErrShuttingDown while the node shuts down.
func (m *Manager) ShuttingDown() error {
	if m.shuttingDown.Load() {
		return ErrShuttingDown
	}
	return nil
}

// reconnectPeriod is how long after a lost connection logind is asked
// again (the kubelet's dbusReconnectPeriod).
const reconnectPeriod = time.Second

// Run takes the lock and watches for the shutdown until ctx ends,
// connecting again when the connection is lost. The lock is released
// when ctx ends.
func (m *Manager) Run(ctx context.Context) {
	if len(m.cfg.Groups) == 0 {
		return
	}
	m.log.Info("graceful node shutdown", zap.Any("groups", m.cfg.Groups))
	last := ""
	for {
		// Retried every second; logged when the error changes.
		if err := m.watch(ctx); err != nil && ctx.Err() == nil && err.Error() != last {
			last = err.Error()
			m.log.Error("graceful node shutdown: logind not reached; retrying every second", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-m.cfg.Clock.After(reconnectPeriod):
		}
	}
}

// requested is the time the groups ask for: their sum.
func (m *Manager) requested() time.Duration {
	var sum int64
	for _, g := range m.cfg.Groups {
		sum += g.GracePeriodSeconds
	}
	return time.Duration(sum) * time.Second
}

// ensureInhibitDelay raises logind's InhibitDelayMaxSec to the periods
// asked for when it is shorter, as the kubelet does, and waits (up to
// two seconds) for logind to have reloaded; still shorter, it warns: pods
// get only that long.
func (m *Manager) ensureInhibitDelay(ctx context.Context, in Inhibitor) error {
	delay, err := in.InhibitDelay()
	if err != nil {
		return err
	}
	req := m.requested()
	if delay >= req {
		return nil
	}
	if err := in.RaiseInhibitDelay(req); err != nil {
		m.log.Warn("could not raise logind's InhibitDelayMaxSec", zap.Error(err))
	} else {
		for i := 0; ; i++ {
			if delay, err = in.InhibitDelay(); err != nil {
				return err
			}
			if delay >= req || i == 20 {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-m.cfg.Clock.After(100 * time.Millisecond):
			}
		}
		if delay < req {
			m.log.Warn("logind's InhibitDelayMaxSec is still shorter than the shutdown grace periods after the override: pods get only that long (a logind.conf.d drop-in sorting after it may set it lower, or logind did not reload)",
				zap.Duration("inhibitDelayMax", delay), zap.Duration("requested", req), zap.String("dropIn", LogindConfDropIn))
			return nil
		}
	}
	if delay < req {
		m.log.Warn("logind's InhibitDelayMaxSec is shorter than the shutdown grace periods: pods get only that long (raise InhibitDelayMaxSec in logind.conf)",
			zap.Duration("inhibitDelayMax", delay), zap.Duration("requested", req))
		return nil
	}
	m.log.Info("raised logind's InhibitDelayMaxSec to the shutdown grace periods", zap.Duration("inhibitDelayMax", delay), zap.String("dropIn", LogindConfDropIn))
	return nil
}

// watch is one connection's life: lock, then shutdown events.
func (m *Manager) watch(ctx context.Context) error {
	in, err := m.cfg.Connect()
	if err != nil {
		return err
	}
	defer in.Close()
	defer m.release()
	if err := m.ensureInhibitDelay(ctx, in); err != nil {
		return err
	}
	if err := m.acquire(in); err != nil {
		return err
	}
	events, err := in.Watch()
	if err != nil {
		return err
	}
	// A cancellation missed while disconnected: the node is not shutting
	// down any more. A shutdown missed is acted on now.
	if now, err := in.PreparingForShutdown(); err == nil && now != m.shuttingDown.Load() {
		if !now {
			m.log.Info("node shutdown cancelled while logind was not reached")
			m.shuttingDown.Store(false)
			m.notify()
		} else {
			m.shutdownNow(ctx)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case down, ok := <-events:
			if !ok {
				return errors.New("logind's signals ended")
			}
			if !down {
				m.log.Info("node shutdown cancelled")
				m.event("Shutdown manager detected shutdown cancellation")
				m.shuttingDown.Store(false)
				m.notify()
				if err := m.acquire(in); err != nil {
					return err
				}
				continue
			}
			m.shutdownNow(ctx)
		}
	}
}

// shutdownNow is the node's shutdown: shutting down, pods stopped by
// priority, the lock released.
func (m *Manager) shutdownNow(ctx context.Context) {
	m.log.Warn("node shutting down: stopping pods by priority")
	m.event("Shutdown manager detected shutdown event")
	m.shuttingDown.Store(true)
	m.notify()
	m.stopPods(ctx)
	m.release()
	m.log.Info("pods stopped; the inhibitor lock is released and the shutdown goes on")
}

func (m *Manager) acquire(in Inhibitor) error {
	lock, err := in.Inhibit()
	if err != nil {
		return err
	}
	m.release()
	m.mu.Lock()
	m.lock = lock
	m.mu.Unlock()
	return nil
}

func (m *Manager) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lock != nil {
		m.lock.Close()
		m.lock = nil
	}
}

func (m *Manager) notify() {
	if m.cfg.OnShutdown != nil {
		go m.cfg.OnShutdown()
	}
}

func (m *Manager) event(msg string) {
	if m.cfg.Event != nil {
		m.cfg.Event("NodeShutdown", msg)
	}
}

// stopPods stops the active pods group by group, lowest priority first:
// a group's pods at once, each with the group's period (or its own
// terminationGracePeriodSeconds when shorter), the next group when all
// stopped or the period passed.
func (m *Manager) stopPods(ctx context.Context) {
	groups := group(m.cfg.Groups, m.cfg.ActivePods())
	for i, pods := range groups {
		if len(pods) == 0 {
			continue
		}
		g := m.cfg.Groups[i]
		// The group's period runs from now, whatever handing the pods to
		// the loop takes (as the kubelet's, each pod from its own
		// goroutine).
		period := m.cfg.Clock.After(time.Duration(g.GracePeriodSeconds) * time.Second)
		var wg sync.WaitGroup
		for _, p := range pods {
			grace := g.GracePeriodSeconds
			if t := p.Spec.TerminationGracePeriodSeconds; t != nil && *t <= grace {
				grace = *t
			}
			m.log.Info("stopping pod for the node's shutdown", zap.String("pod", p.Namespace+"/"+p.Name), zap.Int64("grace", grace))
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-m.cfg.Terminate(p, grace, Reason, Message):
				case <-ctx.Done():
				}
			}()
		}
		all := make(chan struct{})
		go func() { wg.Wait(); close(all) }()
		select {
		case <-all:
		case <-ctx.Done():
			return
		case <-period:
			m.log.Warn("shutdown group's period passed before all its pods stopped", zap.Int32("priority", g.Priority),
				zap.Int64("period", g.GracePeriodSeconds))
		}
	}
}

// group sorts pods into groups (the kubelet's groupByPriority): a pod
// goes to the group of the highest priority not above its own; one below
// every group to the first, one above every group to the last.
func group(groups []Group, pods []*v1.Pod) [][]*v1.Pod {
	out := make([][]*v1.Pod, len(groups))
	for _, p := range pods {
		var prio int32
		if p.Spec.Priority != nil {
			prio = *p.Spec.Priority
		}
		i := sort.Search(len(groups), func(i int) bool { return groups[i].Priority >= prio })
		switch {
		case i == len(groups):
			i = len(groups) - 1
		case i > 0 && groups[i].Priority > prio:
			i--
		}
		out[i] = append(out[i], p)
	}
	return out
}
