package kubeapi

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// watchIdle is how long a watched object may go unread before its watch
// ends: pods read their objects at every sync (at least every
// --sync-frequency), so an object no pod reads any more stops being
// watched within this.
const watchIdle = 5 * time.Minute

// watchedObjects keeps a watch on each ConfigMap and Secret a pod reads,
// as the kubelet's watch-based manager
// (configMapAndSecretChangeDetectionStrategy: Watch): one informer per
// object, field-selected by name (what the Node authorizer allows a node
// for objects its pods reference). A read is answered from the watch's
// cache once it has synced (before, the caller GETs); a change sends the
// object's namespace on changes, so that the pods there sync (and
// re-render their volumes) in seconds instead of at their next resync.
type watchedObjects struct {
	cs      kubernetes.Interface
	clock   clock.PassiveClock
	changes chan string

	mu      sync.Mutex
	ctx     context.Context // set by start; nil: no watches yet (or no more)
	watches map[string]*objectWatch
	// running counts the informers' goroutines, waited for by stop.
	running sync.WaitGroup
}

type objectWatch struct {
	store    cache.Store
	synced   cache.InformerSynced
	stop     context.CancelFunc
	lastRead time.Time
}

func newWatchedObjects(cs kubernetes.Interface, c clock.PassiveClock) *watchedObjects {
	return &watchedObjects{cs: cs, clock: c, watches: map[string]*objectWatch{}, changes: make(chan string, 64)}
}

// start lets watches run until ctx ends.
func (w *watchedObjects) start(ctx context.Context) {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
}

// read returns the watched object (a *v1.ConfigMap or *v1.Secret), a
// NotFound error when the watch knows it does not exist, or ok false when
// the watch has not synced yet (or watches have not started): the caller
// GETs it then. The first read of an object starts its watch.
func (w *watchedObjects) read(kind, ns, name string) (obj any, ok bool, err error) {
	key := kind + "/" + ns + "/" + name
	w.mu.Lock()
	ow, found := w.watches[key]
	if !found {
		if w.ctx == nil {
			w.mu.Unlock()
			return nil, false, nil
		}
		ow = w.startWatchLocked(kind, ns, name)
		w.watches[key] = ow
	}
	ow.lastRead = w.clock.Now()
	w.mu.Unlock()
	if !ow.synced() {
		return nil, false, nil
	}
	item, exists, err := ow.store.GetByKey(ns + "/" + name)
	switch {
	case err != nil:
		return nil, false, nil
	case !exists:
		res := v1.Resource("configmaps")
		if kind == "secret" {
			res = v1.Resource("secrets")
		}
		return nil, true, apierrors.NewNotFound(res, name)
	}
	return item, true, nil
}

// startWatchLocked starts the informer of one object. w.mu is held.
func (w *watchedObjects) startWatchLocked(kind, ns, name string) *objectWatch {
	ctx, cancel := context.WithCancel(w.ctx)
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var lw *cache.ListWatch
	var obj runtime.Object
	if kind == "secret" {
		c := w.cs.CoreV1().Secrets(ns)
		lw = &cache.ListWatch{
			ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { o.FieldSelector = sel; return c.List(ctx, o) },
			WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { o.FieldSelector = sel; return c.Watch(ctx, o) },
		}
		obj = &v1.Secret{}
	} else {
		c := w.cs.CoreV1().ConfigMaps(ns)
		lw = &cache.ListWatch{
			ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { o.FieldSelector = sel; return c.List(ctx, o) },
			WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { o.FieldSelector = sel; return c.Watch(ctx, o) },
		}
		obj = &v1.ConfigMap{}
	}
	// The client says whether it supports watch-list (a fake does not).
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, w.cs), obj, 0, cache.Indexers{})
	changed := func() {
		select {
		case w.changes <- ns:
		default: // full: the pods' periodic resync catches up
		}
	}
	inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{ //nolint:errcheck // only fails on a stopped informer
		AddFunc: func(_ any, initial bool) {
			if !initial {
				changed() // a missing object a pod waits for was created
			}
		},
		UpdateFunc: func(o, n any) {
			om, err1 := meta.Accessor(o)
			nm, err2 := meta.Accessor(n)
			if err1 == nil && err2 == nil && om.GetResourceVersion() == nm.GetResourceVersion() {
				return // a re-list, not a change
			}
			changed()
		},
		DeleteFunc: func(any) { changed() },
	})
	w.running.Go(func() { inf.Run(ctx.Done()) })
	return &objectWatch{store: inf.GetStore(), synced: inf.HasSynced, stop: cancel}
}

// prune ends the watches of objects no pod read for watchIdle.
func (w *watchedObjects) prune() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, ow := range w.watches {
		if w.clock.Since(ow.lastRead) > watchIdle {
			ow.stop()
			delete(w.watches, key)
		}
	}
}

// stop ends every watch (no new one starts) and waits for their
// informers to return.
func (w *watchedObjects) stop() {
	w.mu.Lock()
	w.ctx = nil
	for key, ow := range w.watches {
		ow.stop()
		delete(w.watches, key)
	}
	w.mu.Unlock()
	w.running.Wait()
}

// count is the number of objects watched.
func (w *watchedObjects) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches)
}
