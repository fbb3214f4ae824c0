package cri

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Allocations is the allocation manager as the runtime needs it (package
// allocation implements it; wired in main): the resources each pod's
// containers are allocated, and what was applied to running containers
// beyond their annotations. Called by pod workers concurrently, never
// twice at once for one pod.
type Allocations interface {
	// Resize decides p's resize when its spec asks for other resources
	// than those allocated (allocated, Deferred or Infeasible, as the
	// kubelet's handlePodResourcesResize) and returns p with the
	// allocated resources in its containers' specs: p itself when they
	// are the spec's. Called first in every sync, so a Deferred resize is
	// tried again at each.
	Resize(p *v1.Pod) *v1.Pod
	// Actuated is the record of container's running instance id; false
	// when there is none for that instance.
	Actuated(uid types.UID, container, id string) (pod.Actuated, bool)
	// SetActuated records what was applied to container's instance
	// a.ContainerID (checkpointed: it outlives an agent restart).
	SetActuated(uid types.UID, container string, a pod.Actuated) error
	// ResizeProgress reports, after a sync of p (its allocated view),
	// whether a running container still lacks its allocated resources
	// and the error that stopped the resize, if any: the
	// PodResizeInProgress condition and the ResizeCompleted and
	// ResizeError events are its.
	ResizeProgress(p *v1.Pod, inProgress bool, err error)
}

// specAllocations stands in when Config.Allocations is nil (standalone
// tests): every spec is allocated as it is, records live in memory.
type specAllocations struct {
	mu  sync.Mutex
	act map[types.UID]map[string]pod.Actuated
}

func (s *specAllocations) Resize(p *v1.Pod) *v1.Pod { return p }

func (s *specAllocations) Actuated(uid types.UID, container, id string) (pod.Actuated, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.act[uid][container]
	return a, ok && a.ContainerID == id
}

func (s *specAllocations) SetActuated(uid types.UID, container string, a pod.Actuated) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.act == nil {
		s.act = map[types.UID]map[string]pod.Actuated{}
	}
	if s.act[uid] == nil {
		s.act[uid] = map[string]pod.Actuated{}
	}
	s.act[uid][container] = a
	return nil
}

func (s *specAllocations) ResizeProgress(*v1.Pod, bool, error) {}

// resizableSpec is the spec of a container that may be resized, by the
// name and kind of a runtime instance: an app container, or a sidecar (a
// restartable init container); nil for any other.
func resizableSpec(p *v1.Pod, name string, init bool) *v1.Container {
	if init {
		for i := range p.Spec.InitContainers {
			if c := &p.Spec.InitContainers[i]; c.Name == name && pod.IsSidecar(c) {
				return c
			}
		}
		return nil
	}
	for i := range p.Spec.Containers {
		if c := &p.Spec.Containers[i]; c.Name == name {
			return c
		}
	}
	return nil
}

// adoptable reports a container made for spec by an agent before
// in-place resize (its hash of the whole spec) or by the kubelet (its
// hash of the name and image, as the kubelet itself judges its
// containers): kept as it runs, and recorded with nodeagent's hash.
func adoptable(hash string, spec *v1.Container) bool {
	return isLegacyHash(hash) && hash == legacyHash(spec) || isKubeletHash(hash) && hash == KubeletHash(spec)
}

// withActuated is st as the runtime acts on it: each running instance's
// resources and hash as the allocation manager's record says, over those
// of its annotations. A running instance an older agent made (its hash
// covers the whole spec) is adopted when that hash matches the spec: the
// spec's resources and new-style hash are recorded for it, so neither an
// agent upgrade nor a later resize restarts it. st itself is not changed
// (it is the PLEG's cache).
func (r *Runtime) withActuated(p *v1.Pod, st *pod.RuntimeStatus, log *zap.Logger) *pod.RuntimeStatus {
	if st == nil {
		return nil
	}
	out := *st
	out.Containers = make([]*pod.Container, len(st.Containers))
	for i, c := range st.Containers {
		out.Containers[i] = c
		if c.Ephemeral || c.State != pod.ContainerRunning {
			continue
		}
		rec, ok := r.alloc.Actuated(p.UID, c.Name, c.ID)
		if spec := containerSpec(p, c.Name, c.Init); !ok && spec != nil && adoptable(c.Hash, spec) {
			rec = pod.Actuated{ContainerID: c.ID, Resources: cpuMemory(spec.Resources), Hash: HashContainer(spec)}
			if err := r.alloc.SetActuated(p.UID, c.Name, rec); err != nil {
				log.Warn("record a container of an earlier agent or the kubelet; adopted again at the next sync", zap.String("container", c.Name), zap.Error(err))
			} else {
				log.Info("container of an earlier agent or the kubelet adopted", zap.String("container", c.Name), zap.String("containerID", c.ID))
			}
			ok = true
		}
		if !ok {
			if c.Resources == nil {
				continue
			}
			rec = pod.Actuated{ContainerID: c.ID, Resources: *c.Resources} // as created (its annotation)
		}
		cp := *c
		if rec.Hash != "" {
			cp.Hash = rec.Hash
		}
		cp.Resources = rec.Resources.DeepCopy()
		if spec := resizableSpec(p, c.Name, c.Init); spec != nil && !equalCPUMemory(spec.Resources, *cp.Resources) {
			if resize, _ := resizeOf(spec, &cp); !resize {
				// Equivalent values (cpu at or below the kernel's minimum
				// shares or quota): nothing to change, the resize is done,
				// as the kubelet marks it actuated.
				rec.Resources = cpuMemory(spec.Resources)
				if err := r.alloc.SetActuated(p.UID, c.Name, rec); err == nil {
					cp.Resources = rec.Resources.DeepCopy()
				}
			}
		}
		out.Containers[i] = &cp
	}
	return &out
}

// appliedPod is p with the resources its containers run with in sandbox
// sandboxID: for each app container and sidecar with a running instance
// there whose resources are known, their cpu and memory; p's for the
// others (they start with them). What the pod cgroup is made for.
func appliedPod(p *v1.Pod, st *pod.RuntimeStatus, sandboxID string) *v1.Pod {
	var out *v1.Pod
	for _, c := range st.Containers {
		if c.SandboxID != sandboxID || c.State != pod.ContainerRunning || c.Ephemeral || c.Resources == nil {
			continue
		}
		if spec := resizableSpec(p, c.Name, c.Init); spec == nil || equalCPUMemory(spec.Resources, *c.Resources) {
			continue
		}
		if out == nil {
			out = p.DeepCopy()
		}
		spec := resizableSpec(out, c.Name, c.Init)
		spec.Resources = pod.WithCPUMemory(spec.Resources, *c.Resources)
	}
	if out == nil {
		return p
	}
	return out
}

// maxPod is, container by container, the larger of a's and b's cpu and
// memory requests and limits (no limit being the largest): a pod cgroup
// made for it holds the containers of both, what a resize raises it to
// before the containers change.
func maxPod(a, b *v1.Pod) *v1.Pod {
	out := b.DeepCopy()
	for _, list := range []struct {
		cs   []v1.Container
		init bool
	}{{out.Spec.InitContainers, true}, {out.Spec.Containers, false}} {
		for i := range list.cs {
			c := &list.cs[i]
			if ac := containerSpec(a, c.Name, list.init); ac != nil {
				c.Resources = maxResources(ac.Resources, c.Resources)
			}
		}
	}
	return out
}

func maxResources(a, b v1.ResourceRequirements) v1.ResourceRequirements {
	out := *b.DeepCopy()
	for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if qa, ok := a.Requests[n]; ok {
			if qb, ok := out.Requests[n]; !ok || qa.Cmp(qb) > 0 {
				if out.Requests == nil {
					out.Requests = v1.ResourceList{}
				}
				out.Requests[n] = qa.DeepCopy()
			}
		}
		qa, aok := a.Limits[n]
		qb, bok := out.Limits[n]
		switch {
		case !bok:
		case !aok:
			delete(out.Limits, n) // unlimited in a
		case qa.Cmp(qb) > 0:
			out.Limits[n] = qa.DeepCopy()
		}
	}
	return out
}

func equalCPUMemory(a, b v1.ResourceRequirements) bool { return valuesOf(a) == valuesOf(b) }

// podMemoryLimit is the memory limit of p's pod cgroup, as package cm's
// PodResources sets it: the pod's summed limits when every container (or
// the pod) has one; 0 when none.
func podMemoryLimit(p *v1.Pod) int64 {
	limited := true
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Resources.Limits.Memory().IsZero() {
				limited = false
			}
		}
	}
	if resourcehelper.IsPodLevelResourcesSet(p) && !p.Spec.Resources.Limits.Memory().IsZero() {
		limited = true
	}
	if !limited {
		return 0
	}
	limits := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})
	return limits.Memory().Value()
}

func isUnimplemented(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.Unimplemented
}

// resize applies a's in-place resize of the allocated pod p, as the
// kubelet's doPodResizeAction: memory limit decreases are checked
// against the current usage first (none is applied when one is below
// it); the pod cgroup is raised to hold both the current and the new
// resources, the containers updated (UpdateContainerResources: cpu
// shares, quota and period, memory limit) and recorded, and the pod
// cgroup lowered to the new resources. The pod cgroup goes through the
// run chain's SandboxMutators (the pod cgroup phase's EnsurePod). An
// error stops the resize where it is; the next sync takes it up.
func (r *Runtime) resize(ctx context.Context, p *v1.Pod, st *pod.RuntimeStatus, a actions, sbCfg *runtimeapi.PodSandboxConfig, log *zap.Logger) error {
	if len(a.resize) == 0 && !a.resizePod {
		return nil
	}
	applied := appliedPod(p, st, a.sandboxID)
	if err := r.checkMemoryDecrease(ctx, p, applied, a); err != nil {
		return err
	}
	raise := maxPod(applied, p)
	if pod.QOSClass(raise) != pod.QOSClass(p) {
		raise = applied // the pod cgroup's place depends on the QoS class, which a resize keeps
	}
	if err := r.mutateSandbox(ctx, raise, proto.Clone(sbCfg).(*runtimeapi.PodSandboxConfig)); err != nil {
		return fmt.Errorf("raise the pod cgroup: %w", err)
	}
	for _, u := range a.resize {
		cctx, cancel := r.callCtx(ctx)
		_, err := r.c.UpdateContainerResources(cctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: u.c.ID, Linux: linuxResources(u.spec)})
		cancel()
		if err != nil {
			return fmt.Errorf("update resources of container %s: %w", u.spec.Name, translate(err))
		}
		prev, _ := r.alloc.Actuated(p.UID, u.spec.Name, u.c.ID)
		rec := pod.Actuated{ContainerID: u.c.ID, Resources: cpuMemory(u.spec.Resources), Hash: prev.Hash}
		if err := r.alloc.SetActuated(p.UID, u.spec.Name, rec); err != nil {
			// Applied but not recorded: the next sync applies it again
			// (the same values, harmless).
			log.Warn("record a container's resize", zap.String("container", u.spec.Name), zap.String("containerID", u.c.ID), zap.Error(err))
		}
		log.Info("container resized in place", zap.String("container", u.spec.Name), zap.String("containerID", u.c.ID),
			zap.String("cpuRequest", u.spec.Resources.Requests.Cpu().String()), zap.String("cpuLimit", u.spec.Resources.Limits.Cpu().String()),
			zap.String("memoryRequest", u.spec.Resources.Requests.Memory().String()), zap.String("memoryLimit", u.spec.Resources.Limits.Memory().String()))
	}
	if err := r.mutateSandbox(ctx, p, proto.Clone(sbCfg).(*runtimeapi.PodSandboxConfig)); err != nil {
		return fmt.Errorf("lower the pod cgroup: %w", err)
	}
	return nil
}

// checkMemoryDecrease refuses memory limits below the current usage, as
// the kubelet's validateMemoryResizeAction (best effort against an OOM
// kill): the pod cgroup's (PodSandboxStats; the containers' sum when the
// runtime does not report it) when its limit decreases or is set, each
// container's (ListContainerStats) when its limit decreases or is set.
func (r *Runtime) checkMemoryDecrease(ctx context.Context, p, applied *v1.Pod, a actions) error {
	type limit struct {
		name  string
		bytes int64
	}
	var decreasing []limit
	byID := map[string]limit{}
	for _, u := range a.resize {
		want, have := u.spec.Resources.Limits.Memory().Value(), u.c.Resources.Limits.Memory().Value()
		if want != 0 && (have == 0 || want < have) {
			l := limit{u.spec.Name, want}
			decreasing = append(decreasing, l)
			byID[u.c.ID] = l
		}
	}
	podWant, podHave := podMemoryLimit(p), podMemoryLimit(applied)
	podDecreasing := podWant != 0 && (podHave == 0 || podWant < podHave)
	if !podDecreasing && len(decreasing) == 0 {
		return nil
	}
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	usage := map[string]uint64{} // by container name
	var sum uint64
	stats, err := r.c.ListContainerStats(cctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: a.sandboxID}})
	if err != nil {
		return fmt.Errorf("cannot decrease memory limits: read the containers' memory usage: %w", translate(err))
	}
	for _, s := range stats.Stats {
		u := s.GetMemory().GetUsageBytes()
		if u == nil {
			continue
		}
		sum += u.Value
		if l, ok := byID[s.GetAttributes().GetId()]; ok {
			usage[l.name] = u.Value
		}
	}
	var errs []error
	if podDecreasing {
		resp, err := r.c.PodSandboxStats(cctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: a.sandboxID})
		podUsage, ok := sum, true
		switch {
		case err == nil && resp.GetStats().GetLinux().GetMemory().GetUsageBytes() != nil:
			podUsage = resp.GetStats().GetLinux().GetMemory().GetUsageBytes().GetValue()
		case err == nil:
			ok = false
		case !isUnimplemented(err):
			ok = false
		}
		if !ok {
			errs = append(errs, errors.New("missing pod memory usage"))
		} else if podUsage >= uint64(podWant) {
			errs = append(errs, fmt.Errorf("attempting to set pod memory limit (%d) below current usage (%d)", podWant, podUsage))
		}
	}
	for _, l := range decreasing {
		u, ok := usage[l.name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("missing container %q memory usage", l.name))
		case u >= uint64(l.bytes):
			errs = append(errs, fmt.Errorf("attempting to set container %q memory limit (%d) below current usage (%d)", l.name, l.bytes, u))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cannot decrease memory limits: %w", utilerrors.NewAggregate(errs))
	}
	return nil
}
