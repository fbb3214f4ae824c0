package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-helpers/apimachinery/lease"
	"k8s.io/utils/clock"
)

// Config wires a Manager.
type Config struct {
	Client kubernetes.Interface
	Name   string
	// Labels are put on the Node at registration (and added when
	// missing later); the well-known ones come from the caller.
	Labels map[string]string
	Taints []v1.Taint
	// Register creates the Node when it does not exist (--register-node).
	Register bool
	NodeIP   string
	Hostname string
	// Capacity and Allocatable are the node's resources.
	Capacity, Allocatable v1.ResourceList
	// VolumesInUse, if set, are the attachable volumes mounted on the
	// node (status.volumesInUse): the attach/detach controller detaches
	// none of them.
	VolumesInUse func() []v1.UniqueVolumeName
	// Extended, if set, gives resources that come and go (device
	// plugins'), added to Capacity and Allocatable; a change is posted
	// within a second.
	Extended func() (capacity, allocatable v1.ResourceList)
	// RuntimeVersion is "<runtime>://<version>"; AgentVersion is reported
	// as kubeletVersion.
	RuntimeVersion, AgentVersion string
	// Port is the node server's port, published as daemonEndpoints.
	Port int32
	// Health checks (nil error: healthy): the runtime, its network, the
	// PLEG. They make the Ready condition and its message.
	RuntimeHealth, NetworkHealth, PLEGHealth func() error
	// ShutdownHealth, if set, is the graceful shutdown's state: an error
	// ("node is shutting down") makes the node NotReady with it.
	ShutdownHealth func() error
	// Pressure, if set, tells the eviction manager's pressure conditions
	// (MemoryPressure, DiskPressure, PIDPressure).
	Pressure func(v1.NodeConditionType) bool
	// Images lists the images the runtime holds.
	Images func(ctx context.Context) ([]v1.ContainerImage, error)
	// RuntimeFeatures, if set, reads what the runtime can do, reported as
	// status.features and status.runtimeHandlers (kept as they were when
	// it fails).
	RuntimeFeatures func(ctx context.Context) (v1.NodeFeatures, []v1.NodeRuntimeHandler, error)
	// UpdateFrequency is how often the status is computed and posted when
	// it changed (10s); ReportFrequency how often it is posted anyway
	// (5m). Health changes are noticed within a second.
	UpdateFrequency, ReportFrequency time.Duration
	// LeaseDuration is the Lease's duration in seconds (40); it is renewed
	// every quarter of it.
	LeaseDuration int32
	// OnPodCIDRs receives the Node's spec.podCIDRs when they are first
	// seen or change.
	OnPodCIDRs func([]string)
	// OnRegistered, if set, is called when the Node is first seen (or
	// seen with a new UID: registered again), with that UID: mirror
	// pods need it; and with "" when the Node is deleted (no mirror pod
	// may be owned by the gone UID).
	OnRegistered func(uid types.UID)
	Recorder     record.EventRecorder
	Clock        clock.WithTicker
	Logger       *zap.Logger
}

// Manager keeps the node's Node object, status and Lease.
type Manager struct {
	cfg  Config
	log  *zap.Logger
	ref  *v1.ObjectReference
	info v1.NodeSystemInfo

	mu       sync.Mutex
	uid      types.UID
	podCIDRs []string
	lastAt   time.Time
	ready    *bool // the Ready condition last posted, for NodeReady/NodeNotReady events
	register chan struct{}
}

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Client == nil || cfg.Name == "" || cfg.Clock == nil || cfg.Logger == nil || cfg.Recorder == nil {
		return nil, errors.New("node: Client, Name, Clock, Recorder and Logger are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.UpdateFrequency, 10*time.Second)
	def(&cfg.ReportFrequency, 5*time.Minute)
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 40
	}
	for _, h := range []*func() error{&cfg.RuntimeHealth, &cfg.NetworkHealth, &cfg.PLEGHealth} {
		if *h == nil {
			*h = func() error { return nil }
		}
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.Named("node"), info: systemInfo(cfg.RuntimeVersion, cfg.AgentVersion),
		register: make(chan struct{}, 1)}
	// Node events are about the Node by name (its UID is the name, as
	// the kubelet does).
	m.ref = &v1.ObjectReference{Kind: "Node", Name: cfg.Name, UID: types.UID(cfg.Name)}
	return m, nil
}

// UID is the registered Node's UID ("" until registered).
func (m *Manager) UID() types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.uid
}

// Run registers the node, keeps its status and Lease, and registers it
// again when it is deleted, until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	m.cfg.Recorder.Eventf(m.ref, v1.EventTypeNormal, "Starting", "Starting nodeagent.")
	if err := m.registerWithRetry(ctx); err != nil {
		return nil // ctx ended
	}
	f := informers.NewSharedInformerFactoryWithOptions(m.cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", m.cfg.Name).String()
	}))
	inf := f.Core().V1().Nodes().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { m.observe(o) },
		UpdateFunc: func(_, o any) { m.observe(o) },
		DeleteFunc: func(any) {
			m.log.Warn("Node object deleted; registering it again")
			m.mu.Lock()
			m.uid = ""
			m.mu.Unlock()
			if m.cfg.OnRegistered != nil {
				m.cfg.OnRegistered("")
			}
			select {
			case m.register <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	renew := time.Duration(m.cfg.LeaseDuration) * time.Second / 4
	lc := lease.NewController(m.cfg.Clock, m.cfg.Client, m.cfg.Name, m.cfg.LeaseDuration, nil, renew,
		m.cfg.Name, "kube-node-lease", m.ownLease)
	go lc.Run(ctx)

	m.updateStatus(ctx, true)
	tick := m.cfg.Clock.NewTicker(time.Second)
	defer tick.Stop()
	last := m.cfg.Clock.Now()
	var lastHealth string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.register:
			if err := m.registerWithRetry(ctx); err != nil {
				return nil
			}
			m.updateStatus(ctx, true)
			last = m.cfg.Clock.Now()
		case <-tick.C():
			h := m.healthKey()
			if h != lastHealth || m.cfg.Clock.Since(last) >= m.cfg.UpdateFrequency {
				lastHealth = h
				m.updateStatus(ctx, false)
				last = m.cfg.Clock.Now()
			}
		}
	}
}

func (m *Manager) healthKey() string {
	s := ""
	for _, h := range []func() error{m.cfg.RuntimeHealth, m.cfg.NetworkHealth, m.cfg.PLEGHealth, m.cfg.ShutdownHealth} {
		if h == nil {
			continue
		}
		if err := h(); err != nil {
			s += err.Error()
		}
		s += "|"
	}
	if m.cfg.Extended != nil {
		capacity, allocatable := m.cfg.Extended()
		s += resourcesKey(capacity) + "|" + resourcesKey(allocatable)
	}
	if m.cfg.VolumesInUse != nil {
		s += fmt.Sprint(m.cfg.VolumesInUse())
	}
	return s
}

// resourcesKey is l printed in name order.
func resourcesKey(l v1.ResourceList) string {
	names := make([]string, 0, len(l))
	for k := range l {
		names = append(names, string(k))
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		q := l[v1.ResourceName(n)]
		b.WriteString(n + "=" + q.String() + ",")
	}
	return b.String()
}

// ownLease makes the Node the Lease's owner, so it goes with the Node.
func (m *Manager) ownLease(l *coordinationv1.Lease) error {
	uid := m.UID()
	if uid == "" {
		return errors.New("node not registered yet")
	}
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: m.cfg.Name, UID: uid}}
	return nil
}

func (m *Manager) observe(o any) {
	n, ok := o.(*v1.Node)
	if !ok {
		return
	}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	m.mu.Lock()
	registered := m.uid != n.UID && n.UID != ""
	m.uid = n.UID
	changed := strings.Join(cidrs, ",") != strings.Join(m.podCIDRs, ",")
	m.podCIDRs = cidrs
	m.mu.Unlock()
	if registered && m.cfg.OnRegistered != nil {
		m.cfg.OnRegistered(n.UID)
	}
	if changed && len(cidrs) > 0 && m.cfg.OnPodCIDRs != nil {
		m.cfg.OnPodCIDRs(cidrs)
	}
}

func (m *Manager) registerWithRetry(ctx context.Context) error {
	wait := 100 * time.Millisecond
	for {
		err := m.registerOnce(ctx)
		if err == nil {
			return nil
		}
		m.log.Warn("register node failed; retrying", zap.Duration("wait", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.cfg.Clock.After(wait):
		}
		wait = min(wait*2, 7*time.Second)
	}
}

func (m *Manager) registerOnce(ctx context.Context) error {
	nodes := m.cfg.Client.CoreV1().Nodes()
	if m.cfg.Register {
		n := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: m.cfg.Name, Labels: m.cfg.Labels,
				Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
			Spec: v1.NodeSpec{Taints: m.cfg.Taints},
		}
		created, err := nodes.Create(ctx, n, metav1.CreateOptions{})
		if err == nil {
			m.log.Info("node registered", zap.String("node", m.cfg.Name), zap.String("uid", string(created.UID)))
			m.cfg.Recorder.Eventf(m.ref, v1.EventTypeNormal, "RegisteredNode", "Node %s registered", m.cfg.Name)
			m.observe(created)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	cur, err := nodes.Get(ctx, m.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	// An existing Node (an earlier run, or made by someone else): add
	// the labels it lacks.
	var missing map[string]string
	for k, v := range m.cfg.Labels {
		if cur.Labels[k] != v {
			if missing == nil {
				missing = map[string]string{}
			}
			missing[k] = v
		}
	}
	if missing != nil {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": missing}})
		if cur, err = nodes.Patch(ctx, m.cfg.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("update node labels: %w", err)
		}
	}
	m.log.Info("node already registered", zap.String("node", m.cfg.Name), zap.String("uid", string(cur.UID)))
	m.observe(cur)
	return nil
}

// updateStatus posts the node's status when it changed, when ReportFrequency
// passed since the last post, or when force is set.
func (m *Manager) updateStatus(ctx context.Context, force bool) {
	if m.UID() == "" {
		return
	}
	cur, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.Name, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		select {
		case m.register <- struct{}{}:
		default:
		}
		return
	}
	if err != nil {
		m.log.Warn("read node for its status", zap.Error(err))
		return
	}
	now := metav1.NewTime(m.cfg.Clock.Now())
	st := m.status(ctx, cur.Status, now)
	// Changed is judged against what the API shows, not against what was
	// last sent: a condition the node lifecycle controller set (Unknown,
	// after an outage) is corrected at once.
	changed := !statusEqual(cur.Status, st)
	m.mu.Lock()
	due := m.cfg.Clock.Since(m.lastAt) >= m.cfg.ReportFrequency
	m.mu.Unlock()
	if !changed && !due && !force {
		return
	}
	oldJSON, err := json.Marshal(v1.Node{Status: cur.Status})
	if err != nil {
		return
	}
	newJSON, err := json.Marshal(v1.Node{Status: st})
	if err != nil {
		return
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Node{})
	if err != nil {
		m.log.Warn("node status patch", zap.Error(err))
		return
	}
	if _, err := m.cfg.Client.CoreV1().Nodes().Patch(ctx, m.cfg.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		m.log.Warn("post node status failed; retrying at the next tick", zap.Error(err))
		return
	}
	ready := findCond(st.Conditions, v1.NodeReady).Status == v1.ConditionTrue
	m.mu.Lock()
	m.lastAt = m.cfg.Clock.Now()
	prev := m.ready
	m.ready = &ready
	m.mu.Unlock()
	if prev == nil || *prev != ready {
		reason := "NodeReady"
		if !ready {
			reason = "NodeNotReady"
		}
		m.cfg.Recorder.Eventf(m.ref, v1.EventTypeNormal, reason, "Node %s status is now: %s", m.cfg.Name, reason)
		m.log.Info("node status", zap.Bool("ready", ready), zap.String("message", findCond(st.Conditions, v1.NodeReady).Message))
	}
}

// status builds the node's status as the kubelet does; condition
// transition times are kept from old when the condition's status did not
// change, and every condition carries now as its heartbeat.
func (m *Manager) status(ctx context.Context, old v1.NodeStatus, now metav1.Time) v1.NodeStatus {
	// What others own (conditions such as NetworkUnavailable or a
	// problem detector's, volumesAttached, …) is kept as the API has it.
	st := *old.DeepCopy()
	st.Capacity = m.cfg.Capacity.DeepCopy()
	st.Allocatable = m.cfg.Allocatable.DeepCopy()
	if m.cfg.VolumesInUse != nil {
		st.VolumesInUse = m.cfg.VolumesInUse()
	}
	if m.cfg.Extended != nil {
		capacity, allocatable := m.cfg.Extended()
		for k, q := range capacity {
			st.Capacity[k] = q
		}
		for k, q := range allocatable {
			st.Allocatable[k] = q
		}
	}
	st.NodeInfo = m.info
	st.DaemonEndpoints = v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: m.cfg.Port}}
	st.Addresses = nil
	if m.cfg.NodeIP != "" {
		st.Addresses = append(st.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: m.cfg.NodeIP})
	}
	if m.cfg.Hostname != "" {
		st.Addresses = append(st.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: m.cfg.Hostname})
	}
	if m.cfg.Images != nil {
		if imgs, err := m.cfg.Images(ctx); err == nil {
			st.Images = imgs
		}
	}
	if m.cfg.RuntimeFeatures != nil {
		if f, handlers, err := m.cfg.RuntimeFeatures(ctx); err == nil {
			st.Features, st.RuntimeHandlers = &f, handlers
		}
	}
	var notReady []string
	if err := m.cfg.RuntimeHealth(); err != nil {
		notReady = append(notReady, "container runtime not ready: "+err.Error())
	}
	if err := m.cfg.NetworkHealth(); err != nil {
		notReady = append(notReady, "container runtime network not ready: "+err.Error())
	}
	if err := m.cfg.PLEGHealth(); err != nil {
		notReady = append(notReady, "PLEG is not healthy: "+err.Error())
	}
	if m.cfg.ShutdownHealth != nil {
		if err := m.cfg.ShutdownHealth(); err != nil {
			notReady = append(notReady, err.Error())
		}
	}
	cond := func(t v1.NodeConditionType, s v1.ConditionStatus, reason, msg string) {
		c := v1.NodeCondition{Type: t, Status: s, Reason: reason, Message: msg, LastHeartbeatTime: now, LastTransitionTime: now}
		for i := range st.Conditions {
			if o := &st.Conditions[i]; o.Type == t {
				if o.Status == s {
					c.LastTransitionTime = o.LastTransitionTime
				}
				*o = c
				return
			}
		}
		st.Conditions = append(st.Conditions, c)
	}
	pressure := func(t v1.NodeConditionType) bool { return m.cfg.Pressure != nil && m.cfg.Pressure(t) }
	if pressure(v1.NodeMemoryPressure) {
		cond(v1.NodeMemoryPressure, v1.ConditionTrue, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available")
	} else {
		cond(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available")
	}
	if pressure(v1.NodeDiskPressure) {
		cond(v1.NodeDiskPressure, v1.ConditionTrue, "KubeletHasDiskPressure", "kubelet has disk pressure")
	} else {
		cond(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
	}
	if pressure(v1.NodePIDPressure) {
		cond(v1.NodePIDPressure, v1.ConditionTrue, "KubeletHasInsufficientPID", "kubelet has insufficient PID available")
	} else {
		cond(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available")
	}
	if len(notReady) == 0 {
		cond(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	} else {
		cond(v1.NodeReady, v1.ConditionFalse, "KubeletNotReady", strings.Join(notReady, ", "))
	}
	return st
}

func findCond(cs []v1.NodeCondition, t v1.NodeConditionType) v1.NodeCondition {
	for _, c := range cs {
		if c.Type == t {
			return c
		}
	}
	return v1.NodeCondition{}
}

// statusEqual compares two statuses but for the conditions' heartbeat
// times.
func statusEqual(a, b v1.NodeStatus) bool {
	strip := func(s v1.NodeStatus) []byte {
		s = *s.DeepCopy()
		for i := range s.Conditions {
			s.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		body, _ := json.Marshal(s)
		return body
	}
	return string(strip(a)) == string(strip(b))
}

// maxImages is how many images the node status lists (the kubelet's
// default --node-status-max-images).
const maxImages = 50

// LargestImages is the node status's image list: images with a name,
// largest first, at most maxImages.
func LargestImages(imgs []v1.ContainerImage) []v1.ContainerImage {
	out := make([]v1.ContainerImage, 0, len(imgs))
	for _, img := range imgs {
		if len(img.Names) > 0 {
			out = append(out, img)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].SizeBytes > out[j].SizeBytes })
	if len(out) > maxImages {
		out = out[:maxImages]
	}
	return out
}

// systemInfo reads the host's identity for nodeInfo.
func systemInfo(runtimeVersion, agentVersion string) v1.NodeSystemInfo {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	var uts syscall.Utsname
	kernel := ""
	if syscall.Uname(&uts) == nil {
		kernel = cstr(uts.Release[:])
	}
	osImage := "Linux"
	for _, line := range strings.Split(read("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			osImage = strings.Trim(v, `"`)
		}
	}
	return v1.NodeSystemInfo{
		MachineID:               read("/etc/machine-id"),
		SystemUUID:              strings.ToLower(read("/sys/class/dmi/id/product_uuid")),
		BootID:                  read("/proc/sys/kernel/random/boot_id"),
		KernelVersion:           kernel,
		OSImage:                 osImage,
		ContainerRuntimeVersion: runtimeVersion,
		KubeletVersion:          agentVersion,
		OperatingSystem:         "linux",
		Architecture:            runtime.GOARCH,
	}
}

func cstr(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
