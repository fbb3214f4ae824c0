package stats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/logs"
)

// Runtime is the CRI subset the provider reads.
type Runtime interface {
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ListContainerStats(ctx context.Context, in *runtimeapi.ListContainerStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainerStatsResponse, error)
	ListPodSandboxStats(ctx context.Context, in *runtimeapi.ListPodSandboxStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error)
	ImageFsInfo(ctx context.Context, in *runtimeapi.ImageFsInfoRequest, opts ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error)
}

// Config is what a Provider reads; New checks the required fields.
type Config struct {
	NodeName string  // required
	Runtime  Runtime // required
	// Selector is the labels that mark the agent's own sandboxes and
	// containers (others on the same runtime are not its pods); Owns, if
	// set, is also asked of each one's labels (an agent that adopted the
	// kubelet's pods lists all, Selector nil).
	Selector map[string]string
	Owns     func(labels map[string]string) bool
	// Volumes, if set, gives the pods' volumes: each pod's volumeStats and
	// its local ephemeral volumes in its ephemeral storage.
	Volumes    *Volumes
	Host       Host          // the node's figures
	PodLogsDir string        // the containers' logs figures; "": none
	Timeout    time.Duration // of each CRI call (default 2m)
	Clock      clock.PassiveClock
	Logger     *zap.Logger // required
}

// Provider answers the summary.
type Provider struct {
	cfg Config
	log *zap.Logger

	mu          sync.Mutex
	nodeCPU     cpuRate            // the node's
	ctrCPU      map[string]cpuRate // per container, for runtimes that give no rate
	noPodStats  bool               // the runtime does not implement ListPodSandboxStats
	podStatsErr string             // the last ListPodSandboxStats error logged

	vols volumeCache
}

type cpuSample struct {
	at    time.Time
	total uint64 // core-nanoseconds
}

// minRateWindow is the least time a rate is measured over: every caller
// (metrics-server, Prometheus, kubectl) shares the baseline, and a rate
// over a few milliseconds of 10 ms jiffies is noise.
const minRateWindow = time.Second

// cpuRate turns cumulative CPU samples into a rate.
type cpuRate struct {
	base cpuSample
	last *uint64 // the rate last computed
}

// next is the rate at cur: over the time since the baseline, which cur
// then replaces, once that is at least minRateWindow; else the last rate.
// An older sample (a concurrent request's) never moves the baseline
// back; a counter that went down starts afresh.
func (r *cpuRate) next(cur cpuSample) *uint64 {
	switch {
	case !r.base.at.IsZero() && !cur.at.After(r.base.at):
		// older than the baseline: a concurrent request's
	case r.base.at.IsZero() || cur.total < r.base.total:
		r.base, r.last = cur, nil
	case cur.at.Sub(r.base.at) >= minRateWindow:
		v := uint64(float64(cur.total-r.base.total) / cur.at.Sub(r.base.at).Seconds())
		r.base, r.last = cur, &v
	}
	return r.last
}

// New returns a Provider.
func New(cfg Config) (*Provider, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("stats: no node name")
	case cfg.Runtime == nil:
		return nil, errors.New("stats: no runtime")
	case cfg.Logger == nil:
		return nil, errors.New("stats: no logger")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Volumes != nil && cfg.Volumes.Period <= 0 {
		cfg.Volumes.Period = time.Minute
	}
	return &Provider{cfg: cfg, log: cfg.Logger.Named("stats"), ctrCPU: map[string]cpuRate{}}, nil
}

// pod is one ready sandbox and what runs in it.
type pod struct {
	sandbox    *runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

// Summary is the node's summary. With onlyCPUAndMemory (the kubelet's
// only_cpu_and_memory=true) file systems, network, logs and processes
// are left out. A node figure that cannot be read is left out and logged;
// a failed CRI call fails the summary.
func (p *Provider) Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error) {
	now := p.cfg.Clock.Now()
	pods, err := p.pods(ctx)
	if err != nil {
		return nil, err
	}
	ctrStats, err := p.containerStats(ctx)
	if err != nil {
		return nil, err
	}
	sbStats := p.sandboxStats(ctx)
	var imageFs *statsapi.FsStats
	if !onlyCPUAndMemory {
		imageFs = p.imageFs(ctx, now)
	}

	s := &statsapi.Summary{Node: p.node(onlyCPUAndMemory, imageFs)}
	seen := map[string]bool{}
	for _, pd := range pods {
		s.Pods = append(s.Pods, p.podStats(ctx, pd, ctrStats, sbStats[pd.sandbox.Id], now, onlyCPUAndMemory, imageFs, seen))
	}
	if !onlyCPUAndMemory {
		keep := make(map[string]bool, len(pods))
		for _, pd := range pods {
			keep[pd.sandbox.GetMetadata().GetUid()] = true
		}
		p.forgetVolumes(keep)
	}
	p.mu.Lock()
	for id := range p.ctrCPU {
		if !seen[id] {
			delete(p.ctrCPU, id)
		}
	}
	p.mu.Unlock()
	slices.SortFunc(s.Pods, func(a, b statsapi.PodStats) int {
		return cmp.Or(cmp.Compare(a.PodRef.Namespace, b.PodRef.Namespace), cmp.Compare(a.PodRef.Name, b.PodRef.Name))
	})
	return s, nil
}

func (p *Provider) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.cfg.Timeout)
}

// pods lists the agent's ready sandboxes with their running containers;
// of a pod with several ready sandboxes, the newest.
func (p *Provider) pods(ctx context.Context) ([]*pod, error) {
	cctx, cancel := p.callCtx(ctx)
	defer cancel()
	sbs, err := p.cfg.Runtime.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: p.cfg.Selector,
	}})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", err)
	}
	ctrs, err := p.cfg.Runtime.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: p.cfg.Selector,
	}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	byUID := map[string]*pod{}
	bySandbox := map[string]*pod{}
	for _, sb := range sbs.Items {
		if !p.owns(sb.GetLabels()) {
			continue
		}
		uid := sb.GetMetadata().GetUid()
		if cur, ok := byUID[uid]; ok && cur.sandbox.CreatedAt >= sb.CreatedAt {
			continue
		}
		pd := &pod{sandbox: sb}
		byUID[uid] = pd
	}
	for _, pd := range byUID {
		bySandbox[pd.sandbox.Id] = pd
	}
	for _, c := range ctrs.Containers {
		if pd, ok := bySandbox[c.PodSandboxId]; ok && p.owns(c.GetLabels()) {
			pd.containers = append(pd.containers, c)
		}
	}
	out := make([]*pod, 0, len(bySandbox))
	for _, pd := range bySandbox {
		out = append(out, pd)
	}
	return out, nil
}

func (p *Provider) containerStats(ctx context.Context) (map[string]*runtimeapi.ContainerStats, error) {
	cctx, cancel := p.callCtx(ctx)
	defer cancel()
	resp, err := p.cfg.Runtime.ListContainerStats(cctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{LabelSelector: p.cfg.Selector}})
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	out := make(map[string]*runtimeapi.ContainerStats, len(resp.Stats))
	for _, s := range resp.Stats {
		if p.owns(s.GetAttributes().GetLabels()) {
			out[s.GetAttributes().GetId()] = s
		}
	}
	return out, nil
}

// owns reports labels as the agent's (Owns; the Selector was the
// runtime's filter).
func (p *Provider) owns(labels map[string]string) bool {
	return p.cfg.Owns == nil || p.cfg.Owns(labels)
}

// sandboxStats is the runtime's pod-level figures by sandbox ID, or none
// when it cannot give them (then pods are summed from their containers).
func (p *Provider) sandboxStats(ctx context.Context) map[string]*runtimeapi.PodSandboxStats {
	p.mu.Lock()
	skip := p.noPodStats
	p.mu.Unlock()
	if skip {
		return nil
	}
	cctx, cancel := p.callCtx(ctx)
	defer cancel()
	resp, err := p.cfg.Runtime.ListPodSandboxStats(cctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{LabelSelector: p.cfg.Selector}})
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if grpcstatus.Code(err) == codes.Unimplemented {
			p.noPodStats = true
			p.log.Info("the runtime has no pod-level stats (ListPodSandboxStats); pods' CPU and memory are their containers' sum, with no network figures")
		} else if msg := err.Error(); msg != p.podStatsErr {
			p.podStatsErr = msg
			p.log.Warn("pod-level stats (ListPodSandboxStats) failed; pods' CPU and memory are their containers' sum, with no network figures", zap.Error(err))
		}
		return nil
	}
	p.podStatsErr = ""
	out := make(map[string]*runtimeapi.PodSandboxStats, len(resp.Stats))
	for _, s := range resp.Stats {
		out[s.GetAttributes().GetId()] = s
	}
	return out
}

func (p *Provider) imageFs(ctx context.Context, now time.Time) *statsapi.FsStats {
	cctx, cancel := p.callCtx(ctx)
	defer cancel()
	info, err := p.cfg.Runtime.ImageFsInfo(cctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || len(info.GetImageFilesystems()) == 0 {
		p.log.Debug("image file system", zap.Error(err))
		return nil
	}
	u := info.ImageFilesystems[0]
	fs, err := Statfs(u.GetFsId().GetMountpoint(), now)
	if err != nil {
		fs = &statsapi.FsStats{Time: metav1.NewTime(now)}
	}
	fs.UsedBytes = value(u.UsedBytes)
	fs.InodesUsed = value(u.InodesUsed)
	return fs
}

func (p *Provider) podStats(ctx context.Context, pd *pod, ctrStats map[string]*runtimeapi.ContainerStats, sb *runtimeapi.PodSandboxStats, now time.Time,
	onlyCPUAndMemory bool, imageFs *statsapi.FsStats, seen map[string]bool) statsapi.PodStats {
	md := pd.sandbox.GetMetadata()
	ps := statsapi.PodStats{
		PodRef:    statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
		StartTime: metav1.NewTime(time.Unix(0, pd.sandbox.CreatedAt)),
	}
	var sum summed
	for _, c := range pd.containers {
		seen[c.Id] = true
		cs := statsapi.ContainerStats{Name: c.GetMetadata().GetName(), StartTime: metav1.NewTime(time.Unix(0, c.CreatedAt))}
		if st, ok := ctrStats[c.Id]; ok {
			cs.CPU = p.containerCPU(c.Id, st.Cpu, now)
			cs.Memory = memory(st.Memory, now)
			if !onlyCPUAndMemory {
				cs.Rootfs = rootfs(st.WritableLayer, imageFs, now)
			}
		}
		if !onlyCPUAndMemory {
			cs.Logs = p.logs(ps.PodRef, cs.Name, now)
		}
		sum.add(&cs)
		ps.Containers = append(ps.Containers, cs)
	}
	slices.SortFunc(ps.Containers, func(a, b statsapi.ContainerStats) int { return cmp.Compare(a.Name, b.Name) })
	if lx := sb.GetLinux(); lx != nil && lx.Cpu != nil && lx.Memory != nil {
		ps.CPU = cpu(lx.Cpu, now)
		ps.Memory = memory(lx.Memory, now)
		if !onlyCPUAndMemory {
			ps.Network = network(lx.Network, now)
			if n := lx.GetProcess().GetProcessCount(); n != nil {
				ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: &n.Value}
			}
		}
	} else {
		ps.CPU, ps.Memory = sum.cpu(now), sum.memory(now)
	}
	if !onlyCPUAndMemory {
		if vols, ok := p.volumeStats(ctx, md.GetUid(), now); ok {
			ps.VolumeStats = vols.stats
			sum.volumes, sum.inodes = vols.ephemeral, sum.inodes+vols.inodes
			sum.hasFs = sum.hasFs || vols.ephemeral > 0
		}
		ps.EphemeralStorage = sum.ephemeral(now, imageFs)
	}
	return ps
}

// containerCPU is the runtime's figures, with the rate computed from the
// previous request's when the runtime gives none.
func (p *Provider) containerCPU(id string, c *runtimeapi.CpuUsage, now time.Time) *statsapi.CPUStats {
	out := cpu(c, now)
	if out == nil || out.UsageCoreNanoSeconds == nil {
		return out
	}
	if out.UsageNanoCores != nil {
		return out
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.ctrCPU[id]
	out.UsageNanoCores = r.next(cpuSample{at: out.Time.Time, total: *out.UsageCoreNanoSeconds})
	p.ctrCPU[id] = r
	return out
}

func (p *Provider) logs(ref statsapi.PodReference, container string, now time.Time) *statsapi.FsStats {
	if p.cfg.PodLogsDir == "" {
		return nil
	}
	d, err := logs.OpenContainerDir(p.cfg.PodLogsDir, logs.ContainerRef{Namespace: ref.Namespace, Pod: ref.Name, UID: ref.UID, Container: container})
	if err != nil {
		return nil
	}
	defer d.Close()
	used, inodes, err := d.Usage()
	if err != nil {
		return nil
	}
	fs := &statsapi.FsStats{Time: metav1.NewTime(now)}
	if st, err := d.Statfs(); err == nil {
		fs = fsStats(st, now)
	}
	fs.UsedBytes, fs.InodesUsed = &used, &inodes
	return fs
}

// summed adds up a pod's containers, for the pod's figures when the
// runtime gives none, and for its ephemeral storage.
type summed struct {
	cpuTotal, cpuRate, memWS, memUsage, memRSS, faults, majFaults uint64
	hasCPU, hasRate, hasMem                                       bool
	rootfs, logs, volumes, inodes                                 uint64
	hasFs                                                         bool
}

func (s *summed) add(c *statsapi.ContainerStats) {
	if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
		s.hasCPU = true
		s.cpuTotal += *c.CPU.UsageCoreNanoSeconds
		if c.CPU.UsageNanoCores != nil {
			s.hasRate = true
			s.cpuRate += *c.CPU.UsageNanoCores
		}
	}
	if m := c.Memory; m != nil && m.WorkingSetBytes != nil {
		s.hasMem = true
		s.memWS += *m.WorkingSetBytes
		s.memUsage += deref(m.UsageBytes)
		s.memRSS += deref(m.RSSBytes)
		s.faults += deref(m.PageFaults)
		s.majFaults += deref(m.MajorPageFaults)
	}
	if c.Rootfs != nil {
		s.hasFs = true
		s.rootfs += deref(c.Rootfs.UsedBytes)
		s.inodes += deref(c.Rootfs.InodesUsed)
	}
	if c.Logs != nil {
		s.hasFs = true
		s.logs += deref(c.Logs.UsedBytes)
		s.inodes += deref(c.Logs.InodesUsed)
	}
}

func (s *summed) cpu(now time.Time) *statsapi.CPUStats {
	if !s.hasCPU {
		return nil
	}
	out := &statsapi.CPUStats{Time: metav1.NewTime(now), UsageCoreNanoSeconds: ptr(s.cpuTotal)}
	if s.hasRate {
		out.UsageNanoCores = ptr(s.cpuRate)
	}
	return out
}

func (s *summed) memory(now time.Time) *statsapi.MemoryStats {
	if !s.hasMem {
		return nil
	}
	return &statsapi.MemoryStats{Time: metav1.NewTime(now), WorkingSetBytes: ptr(s.memWS), UsageBytes: ptr(s.memUsage),
		RSSBytes: ptr(s.memRSS), PageFaults: ptr(s.faults), MajorPageFaults: ptr(s.majFaults)}
}

// ephemeral is the pod's ephemeral storage as the kubelet counts it:
// the containers' writable layers and logs and the pod's local ephemeral
// volumes (a disk emptyDir, a configMap).
func (s *summed) ephemeral(now time.Time, imageFs *statsapi.FsStats) *statsapi.FsStats {
	if !s.hasFs {
		return nil
	}
	out := &statsapi.FsStats{Time: metav1.NewTime(now), UsedBytes: ptr(s.rootfs + s.logs + s.volumes), InodesUsed: ptr(s.inodes)}
	if imageFs != nil {
		out.AvailableBytes, out.CapacityBytes, out.InodesFree, out.Inodes = imageFs.AvailableBytes, imageFs.CapacityBytes, imageFs.InodesFree, imageFs.Inodes
	}
	return out
}

func cpu(c *runtimeapi.CpuUsage, now time.Time) *statsapi.CPUStats {
	if c == nil || c.UsageCoreNanoSeconds == nil {
		return nil
	}
	return &statsapi.CPUStats{Time: stamp(c.Timestamp, now), UsageCoreNanoSeconds: value(c.UsageCoreNanoSeconds), UsageNanoCores: value(c.UsageNanoCores)}
}

func memory(m *runtimeapi.MemoryUsage, now time.Time) *statsapi.MemoryStats {
	if m == nil || m.WorkingSetBytes == nil {
		return nil
	}
	out := &statsapi.MemoryStats{Time: stamp(m.Timestamp, now), WorkingSetBytes: value(m.WorkingSetBytes), UsageBytes: value(m.UsageBytes),
		RSSBytes: value(m.RssBytes), PageFaults: value(m.PageFaults), MajorPageFaults: value(m.MajorPageFaults)}
	if m.AvailableBytes != nil && m.AvailableBytes.Value > 0 { // 0: no limit
		out.AvailableBytes = value(m.AvailableBytes)
	}
	return out
}

func rootfs(w *runtimeapi.FilesystemUsage, imageFs *statsapi.FsStats, now time.Time) *statsapi.FsStats {
	if w == nil {
		return nil
	}
	out := &statsapi.FsStats{Time: stamp(w.Timestamp, now), UsedBytes: value(w.UsedBytes), InodesUsed: value(w.InodesUsed)}
	if imageFs != nil {
		out.AvailableBytes, out.CapacityBytes, out.InodesFree, out.Inodes = imageFs.AvailableBytes, imageFs.CapacityBytes, imageFs.InodesFree, imageFs.Inodes
	}
	return out
}

func network(n *runtimeapi.NetworkUsage, now time.Time) *statsapi.NetworkStats {
	if n == nil {
		return nil
	}
	iface := func(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
		return statsapi.InterfaceStats{Name: i.GetName(), RxBytes: value(i.RxBytes), RxErrors: value(i.RxErrors), TxBytes: value(i.TxBytes), TxErrors: value(i.TxErrors)}
	}
	out := &statsapi.NetworkStats{Time: stamp(n.Timestamp, now)}
	if n.DefaultInterface != nil {
		out.InterfaceStats = iface(n.DefaultInterface)
	}
	for _, i := range n.Interfaces {
		out.Interfaces = append(out.Interfaces, iface(i))
	}
	return out
}

// stamp is a CRI timestamp (ns), or now when the runtime gave none.
func stamp(ns int64, now time.Time) metav1.Time {
	if ns <= 0 {
		return metav1.NewTime(now)
	}
	return metav1.NewTime(time.Unix(0, ns))
}

func value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return ptr(v.Value)
}

func ptr(v uint64) *uint64 { return &v }

func deref(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}
