package kubeapi

import (
	"context"

	"encoding/json"
	"errors"
	"fmt"
	"go.uber.org/zap"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cri"
)

// Objects reads what pods need from the API server: ConfigMaps and
// Secrets (a watch per object a pod reads, as the kubelet's Watch change
// detection: reads come from its cache, a change is announced on
// Changes; until the watch has synced, a GET, each answer kept objectTTL
// so that the containers of one sync share it), service-account tokens
// (TokenRequest bound to the pod) and the services of the pods' namespaces
// (an informer). Under the Node authorizer a node may read only the
// objects its pods reference.
type Objects struct {
	cs       kubernetes.Interface
	clock    clock.WithTicker
	services corelisters.ServiceLister
	synced   func() bool
	factory  informers.SharedInformerFactory

	// checkpoint keeps the services last read, so that pods run from the
	// pod checkpoint (API server away at start) get their service
	// variables; saved is what it held at start (nil: none).
	checkpoint string
	saved      []*v1.Service
	poke       chan struct{}
	log        *zap.Logger
	started    time.Time

	mu    sync.Mutex
	cache map[string]cached
	// watched answers ConfigMap and Secret reads from a watch per object.
	watched *watchedObjects
}

type cached struct {
	obj any
	err error
	at  time.Time
}

// savedServicesAfter is how long after the start the checkpointed
// services stand in for an informer that has not synced (the pod source
// waits as long before it runs its checkpoint).
const savedServicesAfter = 5 * time.Second

// objectTTL is how long a ConfigMap or Secret read is reused.
const objectTTL = 2 * time.Second

// NewObjects returns an Objects; Start starts its service informer.
// checkpoint ("" for none) is where the services are kept between runs.
func NewObjects(cs kubernetes.Interface, c clock.WithTicker, checkpoint string, log *zap.Logger) *Objects {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(stripManagedFields))
	svc := f.Core().V1().Services()
	o := &Objects{cs: cs, clock: c, services: svc.Lister(), synced: svc.Informer().HasSynced, factory: f,
		cache: map[string]cached{}, checkpoint: checkpoint, poke: make(chan struct{}, 1), log: log.Named("objects"), started: c.Now(),
		watched: newWatchedObjects(cs, c)}
	if checkpoint != "" {
		var l v1.ServiceList
		body, err := os.ReadFile(checkpoint)
		if err == nil {
			err = json.Unmarshal(body, &l)
		}
		switch {
		case err == nil:
			o.saved = make([]*v1.Service, len(l.Items))
			for i := range l.Items {
				o.saved[i] = &l.Items[i]
			}
			o.log.Info("services of the last run loaded (used while the API server does not answer)", zap.Int("services", len(o.saved)))
		case !errors.Is(err, os.ErrNotExist):
			o.log.Warn("services checkpoint unusable", zap.Error(err))
		}
	}
	poke := func() {
		select {
		case o.poke <- struct{}{}:
		default:
		}
	}
	svc.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{ //nolint:errcheck // only fails on a stopped informer
		AddFunc: func(any) { poke() }, UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() },
	})
	return o
}

// Start starts the service informer and the watches of the objects pods
// read.
func (o *Objects) Start(ctx context.Context) {
	o.factory.Start(ctx.Done())
	o.watched.start(ctx)
}

// Run is the upkeep until ctx ends: the ConfigMap and Secret cache is
// pruned, the services checkpoint rewritten (at most once a second) when
// they change. It returns once the service informer and the ConfigMap
// and Secret watches have stopped too.
func (o *Objects) Run(ctx context.Context) {
	defer o.factory.Shutdown()
	defer o.watched.stop()
	t := o.clock.NewTicker(time.Second)
	defer t.Stop()
	var last []byte
	dirty := false
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-o.poke:
			dirty = true
			continue
		case <-t.C():
		}
		if dirty && o.synced() && o.checkpoint != "" {
			var err error
			last, err = o.saveServices(last)
			dirty = false
			if err != nil {
				o.log.Warn("checkpoint services", zap.Error(err))
			}
		}
		if n%60 == 0 {
			o.watched.prune()
			o.mu.Lock()
			for k, c := range o.cache {
				if o.clock.Since(c.at) > objectTTL {
					delete(o.cache, k)
				}
			}
			o.mu.Unlock()
		}
	}
}

// saveServices writes what the service variables need of every service.
func (o *Objects) saveServices(last []byte) ([]byte, error) {
	all, _ := o.services.List(labels.Everything())
	l := v1.ServiceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceList"}}
	for _, s := range all {
		l.Items = append(l.Items, v1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace},
			Spec: v1.ServiceSpec{ClusterIP: s.Spec.ClusterIP, Ports: s.Spec.Ports}})
	}
	sort.Slice(l.Items, func(i, j int) bool {
		return l.Items[i].Namespace+"/"+l.Items[i].Name < l.Items[j].Namespace+"/"+l.Items[j].Name
	})
	body, err := json.Marshal(&l)
	if err != nil || string(body) == string(last) {
		return last, err
	}
	if err := writeFileAtomic(o.checkpoint, body, 0o600); err != nil {
		return last, err
	}
	o.log.Debug("services checkpointed", zap.Int("services", len(l.Items)))
	return body, nil
}

func (o *Objects) get(ctx context.Context, key string, fetch func() (any, error)) (any, error) {
	o.mu.Lock()
	c, ok := o.cache[key]
	o.mu.Unlock()
	if ok && o.clock.Since(c.at) < objectTTL {
		return c.obj, c.err
	}
	obj, err := fetch()
	if ctx.Err() != nil {
		return nil, ctx.Err() // not cached
	}
	o.mu.Lock()
	o.cache[key] = cached{obj: obj, err: err, at: o.clock.Now()}
	o.mu.Unlock()
	return obj, err
}

// Changes receives the namespace of each watched ConfigMap or Secret that
// changed (or went): the pods there should sync. Dropped when not read
// in time; the pods' periodic resync catches up.
func (o *Objects) Changes() <-chan string { return o.watched.changes }

// ConfigMap implements cri.Objects: from its watch once synced, else a
// GET.
func (o *Objects) ConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	if obj, ok, err := o.watched.read("cm", ns, name); ok {
		if err != nil {
			return nil, err
		}
		return obj.(*v1.ConfigMap), nil
	}
	obj, err := o.get(ctx, "cm/"+ns+"/"+name, func() (any, error) {
		return o.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

// Secret implements cri.Objects: from its watch once synced, else a GET.
func (o *Objects) Secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	if obj, ok, err := o.watched.read("secret", ns, name); ok {
		if err != nil {
			return nil, err
		}
		return obj.(*v1.Secret), nil
	}
	obj, err := o.get(ctx, "secret/"+ns+"/"+name, func() (any, error) {
		return o.cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

// ServiceAccountToken implements cri.Objects: a TokenRequest for the
// pod's service account, bound to the pod.
func (o *Objects) ServiceAccountToken(ctx context.Context, p *v1.Pod, audience string, expirationSeconds int64) (string, time.Time, error) {
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &expirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := o.cs.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("request token for service account %s/%s: %w", p.Namespace, sa, err)
	}
	return tr.Status.Token, tr.Status.ExpirationTimestamp.Time, nil
}

// masterService is the API server's own service, whose variables every
// pod gets (the kubelet's masterServices).
const masterServiceNamespace, masterServiceName = metav1.NamespaceDefault, "kubernetes"

// ServiceEnv implements cri.Objects, as the kubelet's
// getServiceEnvVarMap: the services of ns (with enableServiceLinks) and
// the master service, each as NAME_SERVICE_HOST, NAME_SERVICE_PORT,
// NAME_SERVICE_PORT_<PORT> and the Docker-link variables.
func (o *Objects) ServiceEnv(ctx context.Context, ns string, enableServiceLinks bool) (map[string]string, error) {
	synced := o.synced()
	all, err := o.services.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	if !synced && o.saved != nil && o.clock.Since(o.started) >= savedServicesAfter {
		// The API server has not answered since the start: what it said
		// last, rather than pods waiting for it.
		all, synced = o.saved, true
	}
	chosen := map[string]*v1.Service{}
	for _, s := range all {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == v1.ClusterIPNone {
			continue
		}
		if s.Namespace == ns && enableServiceLinks {
			chosen[s.Name] = s
		}
	}
	for _, s := range all {
		if s.Namespace == masterServiceNamespace && s.Name == masterServiceName && s.Spec.ClusterIP != "" && s.Spec.ClusterIP != v1.ClusterIPNone {
			if _, ok := chosen[s.Name]; !ok {
				chosen[s.Name] = s
			}
		}
	}
	out := map[string]string{}
	for _, s := range chosen {
		serviceEnv(s, out)
	}
	if !synced {
		return out, fmt.Errorf("%w", cri.ErrServicesNotSynced)
	}
	return out, nil
}

func serviceEnv(s *v1.Service, out map[string]string) {
	name := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
	ip := s.Spec.ClusterIP
	out[name+"_SERVICE_HOST"] = ip
	for i, p := range s.Spec.Ports {
		port := strconv.Itoa(int(p.Port))
		if i == 0 {
			out[name+"_SERVICE_PORT"] = port
			proto := strings.ToLower(string(p.Protocol))
			out[name+"_PORT"] = proto + "://" + ip + ":" + port
		}
		if p.Name != "" {
			out[name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_"))] = port
		}
		prefix := name + "_PORT_" + port + "_" + strings.ToUpper(string(p.Protocol))
		out[prefix] = strings.ToLower(string(p.Protocol)) + "://" + ip + ":" + port
		out[prefix+"_PROTO"] = strings.ToLower(string(p.Protocol))
		out[prefix+"_PORT"] = port
		out[prefix+"_ADDR"] = ip
	}
}

var _ cri.Objects = (*Objects)(nil)
