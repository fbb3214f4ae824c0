package cri

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// ListPods lists every sandbox and container the agent owns, grouped by
// pod UID, from two list calls: no per-container inspection, so exit codes
// and start times are missing. PLEG relists with it; housekeeping finds
// orphans with it.
func (r *Runtime) ListPods(ctx context.Context) ([]*pod.RuntimeStatus, error) {
	filter := map[string]string{LabelManaged: "true", LabelNode: r.cfg.NodeName}
	if r.cfg.AdoptKubeletPods {
		filter = nil // the kubelet's carry none of these labels: chosen below (owned)
	}
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	sbs, err := r.c.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: filter}})
	if err != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", translate(err))
	}
	cs, err := r.c.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: filter}})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", translate(err))
	}
	byUID := map[pod.UID]*pod.RuntimeStatus{}
	get := func(labels map[string]string) *pod.RuntimeStatus {
		uid := pod.UID(labels[LabelPodUID])
		st, ok := byUID[uid]
		if !ok {
			st = &pod.RuntimeStatus{UID: uid, Name: labels[LabelPodName], Namespace: labels[LabelPodNamespace]}
			byUID[uid] = st
		}
		return st
	}
	for _, sb := range sbs.Items {
		if !r.owned(sb.Labels) {
			continue
		}
		st := get(sb.Labels)
		st.Sandboxes = append(st.Sandboxes, sandboxFromList(sb))
	}
	for _, c := range cs.Containers {
		if !r.owned(c.Labels) {
			continue
		}
		st := get(c.Labels)
		st.Containers = append(st.Containers, containerFromList(c))
	}
	out := make([]*pod.RuntimeStatus, 0, len(byUID))
	for _, st := range byUID {
		sortStatus(st)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out, nil
}

// InspectPod completes a list-level view of one pod (from ListPods) with
// what only inspection gives — exit codes, reasons, times, the sandbox IP —
// reusing prev (the last inspected view) for every container whose state
// did not change and for an unchanged newest sandbox, so a relist costs one
// ContainerStatus per changed container.
func (r *Runtime) InspectPod(ctx context.Context, listed, prev *pod.RuntimeStatus) (*pod.RuntimeStatus, error) {
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	known := map[string]*pod.Container{}
	if prev != nil {
		for _, c := range prev.Containers {
			known[c.ID] = c
		}
	}
	st := &pod.RuntimeStatus{UID: listed.UID, Name: listed.Name, Namespace: listed.Namespace}
	for _, sb := range listed.Sandboxes {
		cp := *sb
		st.Sandboxes = append(st.Sandboxes, &cp)
	}
	for _, c := range listed.Containers {
		if old, ok := known[c.ID]; ok && old.State == c.State {
			st.Containers = append(st.Containers, old)
			continue
		}
		pc := *c
		resp, err := r.c.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ID})
		switch {
		case err == nil && resp.Status != nil:
			mergeContainerStatus(&pc, resp.Status)
			r.addTerminationMessage(listed, &pc, resp.Status)
		case errors.Is(translate(err), ErrNotFound):
			continue // removed between list and inspect
		case err != nil:
			return nil, fmt.Errorf("inspect container %s: %w", c.ID, translate(err))
		}
		st.Containers = append(st.Containers, &pc)
	}
	sortStatus(st)
	sb := st.LatestSandbox()
	if sb == nil || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return st, nil
	}
	if old := prev.LatestSandbox(); old != nil && old.ID == sb.ID && old.IP != "" {
		sb.IP, sb.IPs = old.IP, old.IPs
		return st, nil
	}
	resp, err := r.c.PodSandboxStatus(cctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.ID})
	if err != nil && !errors.Is(translate(err), ErrNotFound) {
		// Not cached as "no IP": the relist inspects the pod again.
		return nil, fmt.Errorf("inspect pod sandbox %s: %w", sb.ID, translate(err))
	}
	if err == nil {
		sb.IPs = sandboxIPs(resp.Status)
		if len(sb.IPs) > 0 {
			sb.IP = sb.IPs[0]
		}
	}
	return st, nil
}

// sandboxIPs is a sandbox's primary IP then its additional ones.
func sandboxIPs(s *runtimeapi.PodSandboxStatus) []string {
	if s == nil || s.Network == nil || s.Network.Ip == "" {
		return nil
	}
	ips := []string{s.Network.Ip}
	for _, ip := range s.Network.AdditionalIps {
		ips = append(ips, ip.Ip)
	}
	return ips
}

func sortStatus(st *pod.RuntimeStatus) {
	sort.SliceStable(st.Sandboxes, func(i, j int) bool {
		a, b := st.Sandboxes[i], st.Sandboxes[j]
		if a.Attempt != b.Attempt {
			return a.Attempt > b.Attempt
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
	sort.SliceStable(st.Containers, func(i, j int) bool {
		return st.Containers[i].CreatedAt.After(st.Containers[j].CreatedAt)
	})
}

// owned reports a sandbox's or container's labels as this agent's: made
// by it (its labels, its node), or by the kubelet when AdoptKubeletPods
// (a pod UID label and none of nodeagent's).
func (r *Runtime) owned(labels map[string]string) bool {
	return NewOwnership(r.cfg.NodeName, r.cfg.AdoptKubeletPods).Owns(labels)
}

// Ownership tells this agent's sandboxes and containers from others' on
// a shared runtime, for the readers beside the runtime (stats, log
// rotation, eviction's usage): Selector is the label filter of the
// runtime's list calls (nil: every item), Owns the check of each item's
// labels, the Runtime's own.
type Ownership struct {
	Selector map[string]string
	node     string
	adopt    bool
}

// NewOwnership is the ownership of the agent of node: its labels; with
// adoptKubelet also the kubelet's sandboxes and containers (a pod UID
// label, none of nodeagent's), which the runtime's filter cannot select,
// so the lists are whole and Owns decides.
func NewOwnership(node string, adoptKubelet bool) Ownership {
	o := Ownership{node: node, adopt: adoptKubelet}
	if !adoptKubelet {
		o.Selector = map[string]string{LabelManaged: "true", LabelNode: node}
	}
	return o
}

// Owns reports labels as the agent's.
func (o Ownership) Owns(labels map[string]string) bool {
	if labels[LabelManaged] == "true" {
		return labels[LabelNode] == o.node
	}
	return o.adopt && labels[LabelManaged] == "" && labels[LabelPodUID] != ""
}

func sandboxFromList(sb *runtimeapi.PodSandbox) *pod.Sandbox {
	s := &pod.Sandbox{
		ID:        sb.Id,
		State:     sb.State,
		CreatedAt: time.Unix(0, sb.CreatedAt),
		SpecHash:  sb.Annotations[AnnotationSpecHash],
	}
	if s.SpecHash == "" {
		// The kubelet's sandbox carries its static pod's annotations:
		// the config hash is its UID, as nodeagent's spec hash is.
		s.SpecHash = sb.Annotations[configHashAnnotation]
	}
	s.Kubelet, s.AdoptedFrom = sb.Labels[LabelManaged] == "", sb.Annotations[AnnotationAdopted]
	if s.Kubelet || s.AdoptedFrom != "" {
		s.PodLabels = map[string]string{}
		for k, v := range sb.Labels {
			if !strings.HasPrefix(k, "io.kubernetes.") && !strings.HasPrefix(k, "io.nodeagent.") {
				s.PodLabels[k] = v
			}
		}
	}

	if sb.Metadata != nil {
		s.Attempt = sb.Metadata.Attempt
	}
	return s
}

func containerFromList(c *runtimeapi.Container) *pod.Container {
	pc := &pod.Container{
		ID:        c.Id,
		SandboxID: c.PodSandboxId,
		Name:      c.Labels[LabelContainerName],
		State:     stateOf(c.State),
		CreatedAt: time.Unix(0, c.CreatedAt),
		Hash:      containerHash(c.Annotations),
		Init:      c.Annotations[AnnotationInit] == "true",
		Ephemeral: c.Annotations[AnnotationEphemeral] == "true",
		ImageRef:  c.ImageRef,
		Resources: parseResources(c.Annotations[AnnotationContainerResources]),
	}
	if c.Image != nil {
		pc.Image = c.Image.Image
	}
	pc.RestartCount, _ = strconv.Atoi(c.Annotations[AnnotationRestartCount])
	pc.GracePeriod, _ = strconv.ParseInt(c.Annotations[AnnotationPodTerminationGrace], 10, 64)
	return pc
}

func mergeContainerStatus(pc *pod.Container, s *runtimeapi.ContainerStatus) {
	pc.State = stateOf(s.State)
	pc.ExitCode = s.ExitCode
	pc.Reason = s.Reason
	pc.Message = s.Message
	if s.StartedAt > 0 {
		pc.StartedAt = time.Unix(0, s.StartedAt)
	}
	if s.FinishedAt > 0 {
		pc.FinishedAt = time.Unix(0, s.FinishedAt)
	}
	if s.Image != nil && pc.Image == "" {
		pc.Image = s.Image.Image
	}
	if s.ImageRef != "" {
		pc.ImageRef = s.ImageRef
	}
}

func stateOf(s runtimeapi.ContainerState) pod.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return pod.ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return pod.ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return pod.ContainerExited
	}
	return pod.ContainerUnknown
}

// WatchEvents follows the runtime's container event stream and calls
// notify for each event about this node's pods (or of unknown pod). It
// returns when the stream ends; a runtime without the stream gives an
// error wrapping errors.ErrUnsupported.
func (r *Runtime) WatchEvents(ctx context.Context, notify func()) error {
	stream, err := r.c.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return streamError(err)
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return streamError(err)
		}
		if sb := ev.PodSandboxStatus; sb != nil && sb.Labels[LabelNode] != r.cfg.NodeName {
			continue
		}
		notify()
	}
}

func streamError(err error) error {
	if s, ok := status.FromError(err); ok && s.Code() == codes.Unimplemented {
		return fmt.Errorf("container events: %w: %s", errors.ErrUnsupported, s.Message())
	}
	return fmt.Errorf("container events: %w", translate(err))
}
