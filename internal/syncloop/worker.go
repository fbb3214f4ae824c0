package syncloop

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/admit"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// worker serialises all runtime work of one pod: it acts on its pod's
// state (podState, changed only through podState.next; see doc.go for the
// diagram) — a sync while syncing, a stop and the final status once
// finished, the kill while terminating — and exits once terminated.
type worker struct {
	uid  pod.UID
	name string // namespace/name, for pods of the same name (edits)
	loop *Loop
	log  *zap.Logger
	wake chan struct{}

	mu sync.Mutex
	// st is the pod's state. Guarded by mu; the loop changes it only
	// through the worker's methods.
	st podState
	// cancelSync cancels the SyncPod in flight, so a removal does not
	// wait for a hung image pull; cancelKill the kill in flight, when a
	// shorter grace period comes. Guarded by mu.
	cancelSync, cancelKill context.CancelFunc
	// updated: a new spec came since the last sync began (guarded by
	// mu); synced: a sync was done (worker goroutine only). They name the
	// sync for OnPodSync.
	updated bool

	// Worker goroutine only:
	// lastSync is when the worker's last runtime action ended; the next
	// one needs a cached status newer than that.
	lastSync time.Time
	// blockedBy is the run chain's last refusal reason ("" when it runs).
	blockedBy string
	synced    bool
	// finLogged: the pod's end was logged; released: a finished pod's
	// volumes were released.
	finLogged, released bool
	// created is when the worker started: the pod's start on the node
	// for activeDeadlineSeconds, unless a sandbox of it is older.
	created time.Time
}

func newWorker(l *Loop, uid pod.UID, p *v1.Pod, name string) *worker {
	log := l.log.With(zap.String("uid", string(uid)), zap.String("pod", name))
	return &worker{uid: uid, name: name, loop: l, log: log, wake: make(chan struct{}, 1), st: initialState(p), created: l.clock.Now()}
}

// poke asks for one more step; pokes coalesce.
func (w *worker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// apply moves the pod's state on by e, with the side effects of the
// change — a sync in flight cancelled by a kill, a kill in flight
// restarted for a shorter grace period — and wakes the worker. It
// returns the new state.
func (w *worker) apply(e event) podState {
	w.mu.Lock()
	before := w.st
	w.st = before.next(e)
	after := w.st
	if e.kind == evUpdate {
		w.updated = true
	}
	if after.phase == terminating {
		if w.cancelSync != nil {
			w.cancelSync()
		}
		// A kill in flight is restarted only for a grace period shorter
		// than the one it runs with.
		if w.cancelKill != nil && before.phase == terminating && after.grace >= 0 &&
			after.grace < effectiveGrace(before.grace, before.pod) {
			w.cancelKill()
		}
	}
	w.mu.Unlock()
	w.poke()
	return after
}

// update hands the worker a newer spec.
func (w *worker) update(p *v1.Pod) { w.apply(event{kind: evUpdate, pod: p}) }

// kill asks for the pod's termination; p, if set, is its newest version
// (a deleted API pod); grace < 0 is the pod's own grace period.
func (w *worker) kill(p *v1.Pod, grace int64) { w.apply(event{kind: evKill, pod: p, grace: grace}) }

// state is a snapshot of the pod's state.
func (w *worker) state() podState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

func (w *worker) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		if done := w.step(ctx); done {
			return
		}
	}
}

// step does one sync or one kill; it returns true when the pod is gone
// and the worker may exit.
func (w *worker) step(ctx context.Context) bool {
	l := w.loop
	start := l.clock.Now()
	st, err := l.cfg.PLEG.GetNewerThan(ctx, w.uid, w.lastSync)
	now := w.state()
	killing := now.phase == terminating || now.pod == nil
	if err != nil && killing && st != nil && ctx.Err() == nil {
		// A pod being killed needs no exit codes: go on with the list-level view.
		w.log.Warn("inspect pod failed; killing it from the list-level view", zap.Error(err))
		err = nil
	}
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn("read pod status from runtime failed; retrying", zap.Error(err))
			l.queue.Enqueue(w.uid, l.cfg.ErrorRetry)
		}
		return false
	}
	// Read the wanted state after the wait: a removal may have come.
	syncCtx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	cur, updated := w.st, w.updated
	p := cur.pod
	killing = cur.phase == terminating || p == nil
	if killing {
		w.cancelKill = cancel
	} else {
		w.cancelSync = cancel
		w.updated = false
	}
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.cancelSync, w.cancelKill = nil, nil
		w.mu.Unlock()
		cancel()
		w.lastSync = l.clock.Now()
	}()
	if killing {
		if l.cfg.Prober != nil {
			l.cfg.Prober.RemovePod(w.uid)
		}
		failed := func(what string, err error) {
			switch {
			case syncCtx.Err() != nil && ctx.Err() == nil:
				w.log.Info(what + " restarted with a shorter grace period") // kill() poked
			case ctx.Err() == nil:
				w.log.Error(what+" failed; retrying", zap.Error(err))
				l.queue.Enqueue(w.uid, l.cfg.ErrorRetry)
			}
		}
		// A pod whose deletion the API server asked for ends with a
		// final status — every container terminated, phase Succeeded or
		// Failed — written before its containers and the object go: first
		// stop, then (on a view taken after the stop, with the exit codes)
		// publish and remove.
		deleted := p != nil && p.DeletionTimestamp != nil && l.status != nil
		// An evicted pod (or one stopped for the node's shutdown) ends
		// the same way: stopped, then Failed with its reason on the
		// stopped view, then removed.
		note, evicted := evictNote{}, false
		if p != nil && cur.evicted && l.status != nil {
			note, evicted = l.evictionNote(w.uid)
		}
		if (deleted || evicted) && !cur.stopped {
			if err := l.rt.StopPod(syncCtx, p, st, cur.grace); err != nil {
				failed("stop pod", err)
				return false
			}
			w.apply(event{kind: evStopped}) // a no-op when re-added meanwhile
			return false
		}
		switch {
		case evicted:
			l.status.Evicted(p, note.reason, note.message, st)
		case deleted:
			l.status.Terminated(p, st)
		}
		if err := l.rt.KillPod(syncCtx, p, st, cur.grace); err != nil {
			failed("kill pod", err)
			return false
		}
		return l.workerDone(w)
	}
	if cur.phase == finished {
		return w.finished(syncCtx, p, st, *cur.fin)
	}
	deadline, exceeded := w.activeDeadline(p, st)
	if exceeded {
		w.log.Info("pod was active longer than its activeDeadlineSeconds; ending it",
			zap.Int64("activeDeadlineSeconds", *p.Spec.ActiveDeadlineSeconds))
		w.finish(reasonDeadlineExceeded, messageDeadlineExceeded)
		return false
	}
	if r := l.cfg.Run.Admit(&admit.Attributes{Pod: p}); !r.Admit {
		return w.blocked(syncCtx, p, st, r)
	}
	w.blockedBy = ""
	res := l.rt.SyncPod(syncCtx, p, st)
	if syncCtx.Err() != nil && ctx.Err() == nil {
		return false // cancelled by a removal: the next step kills
	}
	if l.cfg.Prober != nil {
		l.cfg.Prober.Sync(p, st)
	}
	if l.status != nil && isTerminal(l.status.Synced(p, st, res)) {
		w.finish("", "")
	}
	next := l.cfg.ResyncPeriod
	if res.RetryAfter > 0 && res.RetryAfter < next {
		next = res.RetryAfter
	}
	if deadline > 0 && deadline < next {
		next = deadline
	}
	l.queue.Replace(w.uid, next)
	if l.cfg.OnPodSync != nil {
		op := "sync"
		switch {
		case !w.synced:
			op = "create"
		case updated:
			op = "update"
		}
		l.cfg.OnPodSync(op, l.clock.Since(start))
	}
	w.synced = true
	w.log.Debug("synced pod", zap.Duration("took", l.clock.Since(start)), zap.Duration("next", next), zap.Error(res.Err))
	return false
}

// effectiveGrace is grace, or the pod's own grace period when grace < 0.
func effectiveGrace(grace int64, p *v1.Pod) int64 {
	if grace >= 0 {
		return grace
	}
	if p != nil && p.Spec.TerminationGracePeriodSeconds != nil {
		return *p.Spec.TerminationGracePeriodSeconds
	}
	return v1.DefaultTerminationGracePeriodSeconds
}

// blocked handles a pod the run chain refuses: its containers are
// stopped (not removed), its status shows why, and it is judged again at
// the next resync or update.
func (w *worker) blocked(syncCtx context.Context, p *v1.Pod, st *pod.RuntimeStatus, r admit.Result) bool {
	l := w.loop
	if w.blockedBy != r.Reason+r.Message {
		w.log.Warn("pod may not run here; kept Pending", zap.String("reason", r.Reason), zap.String("message", r.Message))
		w.blockedBy = r.Reason + r.Message
	}
	if l.cfg.Prober != nil {
		l.cfg.Prober.RemovePod(w.uid) // nothing of it runs
	}
	if st.Running() {
		if err := l.rt.StopPod(syncCtx, p, st, -1); err != nil {
			if syncCtx.Err() == nil {
				w.log.Error("stop a pod the run chain refuses", zap.Error(err))
				l.queue.Enqueue(w.uid, l.cfg.ErrorRetry)
			}
			return false // else a removal or shutdown came: the next step acts on it
		}
	}
	if l.status != nil {
		l.status.Blocked(p, st, r.Reason, r.Message)
	}
	l.queue.Replace(w.uid, l.cfg.ResyncPeriod)
	return false
}
