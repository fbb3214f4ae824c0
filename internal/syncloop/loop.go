package syncloop

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/admit"
	"github.com/nodeagent/nodeagent/internal/pleg"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podmanager"
)

// Config wires a Loop.
type Config struct {
	Updates <-chan pod.Update
	// SourcesReady reports whether every pod source has been heard from;
	// until then no runtime pod is treated as an orphan.
	SourcesReady func() bool
	Runtime      Runtime
	PLEG         PLEG
	Admit        admit.Chain
	// Run is the run chain (the kubelet's canRunPod): a pod it refuses is
	// kept Pending with the reason, its containers stopped, and judged
	// again at each sync.
	Run    admit.Chain
	Status StatusSink
	// Pods, if set, is the pod manager the loop keeps the desired pods
	// in (its only writer); others read it through its Reader. New makes
	// one when nil.
	Pods *podmanager.Manager
	// Evictions, if set, carries the eviction manager's decisions in
	// (NewEvictions; made here otherwise).
	Evictions *Evictions
	// Prober, if set, probes containers; a changed verdict syncs the pod
	// at once (a failed liveness probe restarts the container, readiness
	// reaches the status).
	Prober Prober
	// RuntimeHealth returns the runtime's last health error (nil: ready).
	RuntimeHealth func() error
	Clock         clock.WithTicker
	Logger        *zap.Logger

	SyncPeriod         time.Duration // 1s
	HousekeepingPeriod time.Duration // 2s
	ResyncPeriod       time.Duration // 10s default here (the agent passes --sync-frequency, 1m): every pod is synced at least this often
	// OnIteration and OnPodSync, if set, observe each loop iteration (by
	// what woke it: config, pleg, sync, housekeeping) and each pod sync,
	// by the kubelet's operation type: "create" (the worker's first sync),
	// "update" (the first after a new spec) or "sync". Kills are not
	// observed.
	OnIteration func(kind string, d time.Duration)
	OnPodSync   func(op string, d time.Duration)
	ErrorRetry  time.Duration // 2s: retry after a failed status read or kill
	// Housekeeping, if set, is called on every housekeeping tick, once all
	// sources were seen, from the loop goroutine, with every pod UID that
	// is desired, being worked on or present in the runtime (backoff GC,
	// directories of gone pods), and, of those, the ones that still run:
	// not finished (cgroups, CPUs, allocations of finished pods go). It
	// must be quick.
	Housekeeping func(active, running map[pod.UID]bool)
}

// Loop is the sync loop.
type Loop struct {
	cfg    Config
	rt     Runtime
	status StatusSink
	clock  clock.WithTicker
	log    *zap.Logger
	queue  *workQueue

	// pods is the desired set — admitted, held, refused, evicted and
	// terminating pods — of which the loop is the only writer: its
	// goroutine, and workerDone under mu.
	pods *podmanager.Manager

	mu      sync.Mutex
	workers map[pod.UID]*worker
	// finished is when each recently terminated pod's kill completed, so
	// housekeeping does not take a snapshot older than that for an orphan.
	// Not desired-pod state (it is about pods nobody wants any more), so
	// not the pod manager's.
	finished map[pod.UID]time.Time
	// killWaiters are closed when a pod's kill for the node's sake
	// completed (Evictions.Terminate).
	killWaiters map[pod.UID][]chan struct{}
	// evictNotes are the status reason and message of pods being killed
	// for the node's sake, published once their containers stopped.
	evictNotes map[pod.UID]evictNote
	// evictions carries the eviction manager's decisions into the loop.
	evictions *Evictions
	wg        sync.WaitGroup
	ctx       context.Context

	// hk is held by a housekeeping round — its view of the pods and its
	// cleanups (directory scans, unmounts, cgroup removal), off the loop
	// goroutine — and by the admission of a pod: a pod is admitted either
	// before a round's view (and kept by it) or after its cleanups, never
	// between. hkBusy: a round runs (the next tick starts none).
	hk     sync.Mutex
	hkBusy atomic.Bool
}

// New validates cfg and returns a Loop.
func New(cfg Config) (*Loop, error) {
	if cfg.Updates == nil || cfg.Runtime == nil || cfg.PLEG == nil || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("syncloop: Updates, Runtime, PLEG, Clock and Logger are required")
	}
	if cfg.SourcesReady == nil {
		cfg.SourcesReady = func() bool { return true }
	}
	if cfg.RuntimeHealth == nil {
		cfg.RuntimeHealth = func() error { return nil }
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.SyncPeriod, time.Second)
	def(&cfg.HousekeepingPeriod, 2*time.Second)
	def(&cfg.ResyncPeriod, 10*time.Second)
	def(&cfg.ErrorRetry, 2*time.Second)
	if cfg.Pods == nil {
		cfg.Pods = podmanager.New()
	}
	if cfg.Evictions == nil {
		cfg.Evictions = NewEvictions()
	}
	l := &Loop{
		cfg: cfg, rt: cfg.Runtime, status: cfg.Status, clock: cfg.Clock,
		log:         cfg.Logger.Named("syncloop"),
		queue:       newWorkQueue(cfg.Clock),
		pods:        cfg.Pods,
		workers:     map[pod.UID]*worker{},
		finished:    map[pod.UID]time.Time{},
		killWaiters: map[pod.UID][]chan struct{}{},
		evictNotes:  map[pod.UID]evictNote{},
		evictions:   cfg.Evictions,
	}
	l.pods.SetWorkers(l.workerView)
	return l, nil
}

// workerView is the pod manager's view of the workers: whether uid has
// one and whether it is syncing. Safe from any goroutine.
func (l *Loop) workerView(uid pod.UID) (isSyncing, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.workers[uid]
	if !ok {
		return false, false
	}
	return w.state().phase == syncing, true
}

// Pods is the read-only view of the desired pods.
func (l *Loop) Pods() podmanager.Reader { return l.pods }

// Backoff bounds for an unhealthy runtime.
const (
	minUnhealthyWait = 100 * time.Millisecond
	// maxUnhealthyWait is short: the health check only reads the last
	// probe's result, and pods must be synced soon after the runtime is
	// back.
	maxUnhealthyWait = 2 * time.Second
)

// unhealthyBackoff is the loop's wait while the runtime is unhealthy.
type unhealthyBackoff struct{ wait time.Duration }

func (b *unhealthyBackoff) next() time.Duration {
	if b.wait == 0 {
		b.wait = minUnhealthyWait
	}
	w := b.wait
	b.wait = min(b.wait*2, maxUnhealthyWait)
	return w
}

func (b *unhealthyBackoff) reset() { b.wait = 0 }

// Run runs the loop until ctx ends, then waits for every worker.
func (l *Loop) Run(ctx context.Context) {
	l.ctx = ctx
	defer l.evictions.close()
	defer l.wg.Wait()
	l.log.Info("handlers in force", zap.Strings("admit", l.cfg.Admit.Names()), zap.Strings("run", l.cfg.Run.Names()))
	syncT := l.clock.NewTicker(l.cfg.SyncPeriod)
	defer syncT.Stop()
	hkT := l.clock.NewTicker(l.cfg.HousekeepingPeriod)
	defer hkT.Stop()
	var unhealthy unhealthyBackoff
	down := false
	for {
		if err := l.health(); err != nil {
			wait := unhealthy.next()
			if !down {
				l.log.Warn("runtime unhealthy; sync loop backing off", zap.Duration("wait", wait), zap.Error(err))
				if l.status != nil {
					l.status.RuntimeHealth(err)
				}
			} else {
				l.log.Debug("runtime still unhealthy", zap.Duration("wait", wait), zap.Error(err))
			}
			down = true
			select {
			case <-ctx.Done():
				return
			case <-l.clock.After(wait):
			}
			continue
		}
		unhealthy.reset()
		if down {
			down = false
			l.log.Info("runtime healthy again; syncing every pod")
			if l.status != nil {
				l.status.RuntimeHealth(nil)
			}
			l.syncAll()
		}
		if !l.Iterate(ctx, syncT.C(), hkT.C()) {
			return
		}
	}
}

func (l *Loop) health() error {
	if err := l.cfg.RuntimeHealth(); err != nil {
		return err
	}
	return l.cfg.PLEG.Healthy()
}

// Iterate is one syncLoopIteration: it waits for one of the four inputs
// and handles it. It returns false when ctx ended or the config channel
// closed.
func (l *Loop) Iterate(ctx context.Context, syncC, hkC <-chan time.Time) bool {
	if l.ctx == nil {
		l.ctx = ctx
	}
	var start time.Time
	var kind string
	defer func() {
		if start.IsZero() {
			return
		}
		took := l.clock.Since(start)
		l.log.Debug("iteration", zap.String("kind", kind), zap.Duration("took", took))
		if l.cfg.OnIteration != nil {
			l.cfg.OnIteration(kind, took)
		}
	}()
	select {
	case <-ctx.Done():
		return false
	case u, ok := <-l.cfg.Updates:
		if !ok {
			return false
		}
		start, kind = l.clock.Now(), "config"
		l.log.Debug("config update", zap.String("op", u.Op.String()), zap.String("source", u.Source), zap.Int("pods", len(u.Pods)))
		switch u.Op {
		case pod.OpAdd:
			l.HandlePodAdditions(u.Pods)
		case pod.OpUpdate, pod.OpReconcile:
			l.HandlePodUpdates(u.Pods)
		case pod.OpRemove:
			l.HandlePodRemoves(u.Pods)
		}
	case e := <-l.evictions.ch:
		start, kind = l.clock.Now(), "eviction"
		l.handleEviction(e)
	case u := <-l.probeUpdates():
		start, kind = l.clock.Now(), "probe"
		l.handleProbe(u)
	case ev := <-l.cfg.PLEG.Watch():
		start, kind = l.clock.Now(), "pleg"
		l.handlePLEG(ev)
	case <-syncC:
		start, kind = l.clock.Now(), "sync"
		l.HandleSyncPods(l.queue.Due())
	case <-hkC:
		start, kind = l.clock.Now(), "housekeeping"
		l.HandleCleanups()
	}
	return true
}

// HandlePodAdditions admits new pods in creation order and starts their
// workers.
func (l *Loop) HandlePodAdditions(pods []*v1.Pod) {
	sort.SliceStable(pods, func(i, j int) bool {
		return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp)
	})
	var snap map[pod.UID]*pod.RuntimeStatus
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			l.remove(p, deletionGrace(p)) // deleted while the agent was away
			continue
		}
		if l.pods.IsAdmitted(p.UID) {
			l.HandlePodUpdates([]*v1.Pod{p})
			continue
		}
		if isTerminal(p.Status.Phase) {
			// Over already (an API pod that ended before the agent's
			// restart): not admitted, never run again; what is left of it
			// is stopped and kept until the pod is deleted.
			l.log.Info("pod already finished; keeping what is left of it", zap.String("pod", pod.FullName(p)),
				zap.String("uid", string(p.UID)), zap.String("phase", string(p.Status.Phase)))
			l.admitFinished(p)
			continue
		}
		l.admitNew(p, &snap)
	}
}

// admitNew runs the admit chain on p and, when it admits p, records and
// dispatches it (first stopping the runtime pods of its name nobody
// wants) — all under l.hk: the chain allocates (exclusive CPUs, resource
// allocations), and a housekeeping round must never release what it
// allocated for a pod that round's view of the pods missed. snap is the
// runtime's view, taken once per batch of additions.
func (l *Loop) admitNew(p *v1.Pod, snap *map[pod.UID]*pod.RuntimeStatus) {
	l.hk.Lock()
	defer l.hk.Unlock()
	others := l.activeOthers()
	if r := l.cfg.Admit.Admit(&admit.Attributes{Pod: p, OtherPods: others}); !r.Admit {
		l.log.Warn("pod refused by admission", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)),
			zap.String("reason", r.Reason), zap.String("message", r.Message))
		l.pods.Refuse(p)
		if l.status != nil {
			l.status.Refused(p, r.Reason, r.Message)
		}
		return
	}
	l.log.Info("pod admitted", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)))
	if l.status != nil {
		// Visible at once (Pending / ContainerCreating, startTime now),
		// not only once its first sync, maybe a long pull, ends.
		if *snap == nil {
			*snap, _ = l.cfg.PLEG.Snapshot()
		}
		l.status.Admitted(p, (*snap)[p.UID])
	}
	l.pods.Set(p)
	l.killSameName(p)
	l.dispatch(p.UID, p)
}

// admitFinished records an already finished pod as admitted and
// dispatches it (its worker keeps what is left of it), between two
// housekeeping rounds.
func (l *Loop) admitFinished(p *v1.Pod) {
	l.hk.Lock()
	defer l.hk.Unlock()
	l.pods.Set(p)
	l.dispatch(p.UID, p)
}

// killSameName terminates runtime pods of p's full name that nobody
// wants — the old version of an edited manifest, also when the edit
// happened while the agent was down — so that dispatch holds p until they
// are gone.
func (l *Loop) killSameName(p *v1.Pod) {
	snap, taken := l.cfg.PLEG.Snapshot()
	for uid, st := range snap {
		if uid == p.UID || st.Namespace != p.Namespace || st.Name != p.Name {
			continue
		}
		if l.pods.IsAdmitted(uid) {
			continue
		}
		if l.killedSince(uid, taken) {
			continue
		}
		l.log.Info("stopping the previous pod of this name first", zap.String("pod", pod.FullName(p)),
			zap.String("uid", string(uid)), zap.String("replacement", string(p.UID)))
		l.terminate(uid, nil, pod.FullName(p), -1)
	}
}

// HandlePodUpdates hands a newer spec to the pod's worker.
func (l *Loop) HandlePodUpdates(pods []*v1.Pod) {
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			l.remove(p, deletionGrace(p))
			continue
		}
		if !l.pods.IsAdmitted(p.UID) {
			if s := l.pods.State(p.UID); s == podmanager.Refused || s == podmanager.Evicted {
				l.pods.Refuse(p) // its newer spec
				continue
			}
			l.HandlePodAdditions([]*v1.Pod{p})
			continue
		}
		l.pods.Set(p)
		l.dispatch(p.UID, p)
	}
}

// activeOthers are the admitted pods that are not finished: what a new
// pod is admitted beside (the kubelet's filterOutInactivePods).
func (l *Loop) activeOthers() []*v1.Pod {
	pods := l.pods.Unordered()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := pods[:0]
	for _, o := range pods {
		if w, ok := l.workers[o.UID]; ok && w.state().phase != syncing {
			continue
		}
		out = append(out, o)
	}
	return out
}

// HandlePodRemoves terminates removed pods with their own grace period.
func (l *Loop) HandlePodRemoves(pods []*v1.Pod) {
	for _, p := range pods {
		l.remove(p, -1)
	}
}

// remove terminates p: a pod removed from its source (grace < 0: the
// pod's own grace period), or a pod whose deletion the API server asked
// for (p.DeletionTimestamp set, with the grace period it gives; a later
// shorter one wins).
func (l *Loop) remove(p *v1.Pod, grace int64) {
	if l.pods.Forget(p.UID) { // refused or evicted
		l.mu.Lock()
		w, killing := l.workers[p.UID]
		if killing {
			// An evicted pod still being killed: its removal is published
			// once the kill is over (workerDone), not while its containers
			// run; a deletion's shorter grace period applies.
			w.apply(event{kind: evForget})
			g := grace
			if p.DeletionTimestamp != nil {
				g = deletionGrace(p)
			}
			w.kill(p, g)
		}
		l.mu.Unlock()
		if !killing && l.status != nil {
			l.status.Removed(p)
		}
		return
	}
	wanted := l.pods.IsAdmitted(p.UID)
	if !wanted {
		if p.DeletionTimestamp == nil {
			return
		}
		l.mu.Lock()
		_, busy := l.workers[p.UID]
		_, finished := l.finished[p.UID]
		l.mu.Unlock()
		if !busy && finished {
			// Killed already; the API still shows it: finish again.
			if l.status != nil {
				l.status.Removed(p)
			}
			return
		}
	}
	l.mu.Lock()
	held := l.pods.Delete(p) // held: never started
	l.mu.Unlock()
	if held {
		if l.status != nil {
			l.status.Removed(p)
		}
		return
	}
	if wanted {
		l.log.Info("pod removed; terminating", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)),
			zap.Bool("deleted", p.DeletionTimestamp != nil), zap.Int64("grace", grace))
	}
	if l.status != nil {
		g := grace
		if g < 0 {
			g = int64(v1.DefaultTerminationGracePeriodSeconds)
			if tg := p.Spec.TerminationGracePeriodSeconds; tg != nil {
				g = *tg
			}
		}
		l.status.Terminating(p, g)
	}
	l.terminate(p.UID, p, pod.FullName(p), grace)
}

// deletionGrace is the grace period the API server gave a deleted pod.
func deletionGrace(p *v1.Pod) int64 {
	if g := p.DeletionGracePeriodSeconds; g != nil {
		return max(*g, 0)
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return v1.DefaultTerminationGracePeriodSeconds
}

// syncAll wakes every worker (the runtime is back: what it holds may have
// changed behind the agent's back).
func (l *Loop) syncAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.workers {
		w.poke()
	}
}

// ResyncNamespace wakes the worker of every pod in namespace ns (an
// object its pods may read changed). Safe from any goroutine.
func (l *Loop) ResyncNamespace(ns string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range l.workers {
		if strings.HasPrefix(w.name, ns+"/") {
			w.poke()
		}
	}
}

// HandleSyncPods wakes the workers of pods that are due.
func (l *Loop) HandleSyncPods(uids []pod.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, uid := range uids {
		if w, ok := l.workers[uid]; ok {
			w.poke()
		}
	}
}

func (l *Loop) handlePLEG(ev pleg.Event) {
	l.log.Debug("pleg event", zap.String("uid", string(ev.UID)), zap.String("event", string(ev.Type)), zap.String("containerID", ev.Data))
	if ev.Type == pleg.ContainerRemoved {
		return // removals are the agent's own doing
	}
	l.mu.Lock()
	w, ok := l.workers[ev.UID]
	l.mu.Unlock()
	if ok {
		w.poke()
	}
}

// probeUpdates is the prober's channel; nil (never ready) without one.
func (l *Loop) probeUpdates() <-chan pod.ProbeUpdate {
	if l.cfg.Prober == nil {
		return nil
	}
	return l.cfg.Prober.Updates()
}

func (l *Loop) handleProbe(u pod.ProbeUpdate) {
	l.log.Debug("probe result", zap.String("uid", string(u.UID)), zap.String("container", u.Container),
		zap.String("probe", u.Kind.String()), zap.String("result", u.Result.String()))
	l.mu.Lock()
	w, ok := l.workers[u.UID]
	l.mu.Unlock()
	if ok {
		w.poke()
	}
}

// HandleCleanups is housekeeping: runtime pods nobody wants (orphans,
// including pods of an earlier run of the agent whose manifest is gone)
// are killed, once every source has been heard from.
func (l *Loop) HandleCleanups() {
	if !l.cfg.SourcesReady() {
		return
	}
	snap, taken := l.cfg.PLEG.Snapshot()
	defer l.startHousekeeping(snap)
	l.mu.Lock()
	for uid, t := range l.finished {
		if l.clock.Since(t) > time.Minute {
			delete(l.finished, uid)
		}
	}
	l.mu.Unlock()
	for uid, st := range snap {
		if l.pods.IsAdmitted(uid) {
			continue
		}
		l.mu.Lock()
		_, busy := l.workers[uid]
		l.mu.Unlock()
		if busy || l.killedSince(uid, taken) {
			continue
		}
		l.log.Info("killing orphaned pod", zap.String("pod", st.Namespace+"/"+st.Name), zap.String("uid", string(uid)))
		l.terminate(uid, nil, st.Namespace+"/"+st.Name, -1)
	}
}

// killedSince reports whether uid's kill completed at or after a
// snapshot taken at taken: the snapshot still shows a pod that is gone.
func (l *Loop) killedSince(uid pod.UID, taken time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	done, ok := l.finished[uid]
	return ok && !taken.After(done)
}

// startHousekeeping starts a housekeeping round off the loop goroutine,
// unless one still runs.
func (l *Loop) startHousekeeping(snap map[pod.UID]*pod.RuntimeStatus) {
	if l.cfg.Housekeeping == nil || !l.hkBusy.CompareAndSwap(false, true) {
		return
	}
	l.wg.Go(func() {
		defer l.hkBusy.Store(false)
		l.hk.Lock()
		defer l.hk.Unlock()
		l.housekeeping(snap)
	})
}

// housekeeping hands the cleanups the pods to keep: every desired pod,
// every pod the runtime showed (an orphan goes with its kill), every pod
// with a worker; and of those the ones still running (a finished pod
// keeps its directories and logs, not its cgroup and CPUs). l.hk is held.
func (l *Loop) housekeeping(snap map[pod.UID]*pod.RuntimeStatus) {
	pods := l.pods.Unordered()
	active := make(map[pod.UID]bool, len(pods)+len(snap))
	for _, p := range pods {
		active[p.UID] = true
	}
	for uid := range snap {
		active[uid] = true
	}
	running := make(map[pod.UID]bool, len(active))
	l.mu.Lock()
	for uid := range l.workers {
		active[uid] = true
	}
	for uid := range active {
		if w, ok := l.workers[uid]; !ok || w.state().phase != finished {
			running[uid] = true
		}
	}
	l.mu.Unlock()
	l.cfg.Housekeeping(active, running)
}

// dispatch gives p to its worker, starting one when needed — unless
// another pod of the same name is still terminating: then p is held until
// that one is gone.
func (l *Loop) dispatch(uid pod.UID, p *v1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.workers[uid]; ok {
		l.untrackTerminationLocked(w.name, uid) // re-added before its kill ended
		w.update(p)
		return
	}
	name := pod.FullName(p)
	if held, first, others := l.pods.Hold(p); held {
		if first {
			l.log.Info("pod waits for the previous pod of its name to terminate", zap.String("pod", name),
				zap.String("uid", string(uid)), zap.Int("terminating", others))
		}
		return
	}
	l.startWorkerLocked(uid, p, name).poke()
}

// untrackTerminationLocked ends uid's termination under name; when no
// other pod of that name is terminating, the held pod (if any) starts.
// l.mu is held.
func (l *Loop) untrackTerminationLocked(name string, uid pod.UID) {
	next := l.pods.EndTermination(name, uid)
	if next == nil {
		return
	}
	if _, running := l.workers[next.UID]; running {
		return
	}
	l.log.Info("starting the pod that waited for its predecessor", zap.String("pod", name), zap.String("uid", string(next.UID)))
	l.startWorkerLocked(next.UID, next, name).poke()
}

// terminate asks uid's worker to kill the pod, starting one for an orphan;
// grace < 0: the pod's own grace period.
func (l *Loop) terminate(uid pod.UID, p *v1.Pod, name string, grace int64) {
	l.terminateBy(uid, name, event{kind: evKill, pod: p, grace: grace})
}

// terminateBy gives uid's worker a kill or an eviction (e), starting one
// for an orphan.
func (l *Loop) terminateBy(uid pod.UID, name string, e event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.workers[uid]
	if !ok {
		w = l.startWorkerLocked(uid, e.pod, name)
	}
	l.pods.StartTermination(w.name, uid, e.pod)
	w.apply(e)
}

func (l *Loop) startWorkerLocked(uid pod.UID, p *v1.Pod, name string) *worker {
	w := newWorker(l, uid, p, name)
	// A pod killed before (and now back) must not act on a view older
	// than that kill.
	w.lastSync = l.finished[uid]
	l.workers[uid] = w
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		w.run(l.ctx)
	}()
	return w
}

// evictNote is an evicted pod's status reason and message.
type evictNote struct{ reason, message string }

// evictionNote is the note of a pod being evicted, if any.
func (l *Loop) evictionNote(uid pod.UID) (evictNote, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.evictNotes[uid]
	return n, ok
}

// workerDone removes w after its pod was killed, unless the pod was
// re-added meanwhile; it returns whether the worker should exit.
func (l *Loop) workerDone(w *worker) bool {
	l.mu.Lock()
	s := w.apply(event{kind: evKilled})
	if s.phase != terminated {
		l.mu.Unlock() // re-added meanwhile: apply woke it
		return false
	}
	p, keep := s.pod, s.evicted
	delete(l.workers, w.uid)
	for _, done := range l.killWaiters[w.uid] {
		close(done)
	}
	delete(l.killWaiters, w.uid)
	delete(l.evictNotes, w.uid)
	l.finished[w.uid] = l.clock.Now()
	l.queue.Forget(w.uid)
	w.log.Info("pod terminated")
	l.untrackTerminationLocked(w.name, w.uid)
	l.mu.Unlock()
	if l.status != nil && p != nil && !keep {
		l.status.Removed(p) // file I/O: outside l.mu
	}
	return true
}

// Workers is the number of live pod workers.
func (l *Loop) Workers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.workers)
}

// Evict is Evictions.Evict on the loop's evictions.
func (l *Loop) Evict(p *v1.Pod, grace int64, message string) {
	l.evictions.Evict(p, grace, message)
}

func (l *Loop) handleEviction(e eviction) {
	p, ok := l.pods.Evict(e.pod.UID) // kept (Failed) until its source drops it
	if !ok {
		if e.done != nil {
			close(e.done)
		}
		return // gone meanwhile
	}
	l.log.Warn("evicting pod", zap.String("pod", pod.FullName(p)), zap.String("uid", string(p.UID)),
		zap.Int64("grace", e.grace), zap.String("reason", e.reason), zap.String("message", e.message))
	// Its status (Failed with the reason) is published once its
	// containers stopped, as the kubelet holds a terminal phase back
	// while containers may run: the worker's kill does it.
	l.mu.Lock()
	if _, ok := l.evictNotes[p.UID]; !ok {
		l.evictNotes[p.UID] = evictNote{reason: e.reason, message: e.message}
	}
	if e.done != nil {
		l.killWaiters[p.UID] = append(l.killWaiters[p.UID], e.done)
	}
	l.mu.Unlock()
	l.terminateBy(p.UID, pod.FullName(p), event{kind: evEvict, pod: p, grace: e.grace})
}
