package status

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Compute builds the pod's status as the kubelet would report it
// (kubelet_pods.go generateAPIPodStatus and getPhase). runtimeName
// prefixes container IDs ("containerd://…"); probes, when set, gives the
// startup and readiness verdicts (without, a running container is started
// and ready unless it has such a probe).
//
// The conditions are the kubelet's (pkg/kubelet/status/generate.go), in
// the order PodReadyToStartContainers, Initialized, ContainersReady,
// Ready, PodScheduled. Ready reads the pod's readiness-gate conditions
// from p.Status.Conditions; Compute does not emit them (their owners do).
// A hostNetwork pod gets no pod IP here: the Manager, which knows the
// node's IP, fills it in. Ephemeral containers are reported in
// ephemeralContainerStatuses and count for nothing else: not the phase,
// not initialisation, not readiness.
func Compute(p *v1.Pod, st *pod.RuntimeStatus, res pod.SyncResult, runtimeName string, probes pod.ProbeResults) v1.PodStatus {
	return compute(p, st, res, runtimeName, probes, nil)
}

// Resizes is what the status reads of in-place resize: the allocation
// manager's allocations, its records of what was applied to running
// containers, and its PodResizePending and PodResizeInProgress
// conditions. Safe for concurrent use.
type Resizes interface {
	// Allocated is the resources allocated to a pod's app container or
	// sidecar; false when it has none.
	Allocated(uid types.UID, container string) (v1.ResourceRequirements, bool)
	// Actuated is the record of a running instance's last in-place
	// resize; false when there is none for that instance.
	Actuated(uid types.UID, container, id string) (pod.Actuated, bool)
	// Conditions are the pod's resize conditions that are set.
	Conditions(uid types.UID) []v1.PodCondition
}

// compute is Compute with, when rz is set, the resize fields the kubelet
// reports: each resizable container's allocatedResources and resources
// (resizeStatus), and the pod's resize conditions after its others.
func compute(p *v1.Pod, st *pod.RuntimeStatus, res pod.SyncResult, runtimeName string, probes pod.ProbeResults, rz Resizes) v1.PodStatus {
	out := v1.PodStatus{QOSClass: pod.QOSClass(p)}
	sb := st.LatestSandbox()
	sandboxReady := sb != nil && sb.State == runtimeapi.PodSandboxState_SANDBOX_READY
	if sandboxReady && sb.IP != "" {
		out.PodIP = sb.IP
		for _, ip := range sb.IPs {
			out.PodIPs = append(out.PodIPs, v1.PodIP{IP: ip})
		}
	}
	if p.Spec.HostNetwork {
		out.PodIP, out.PodIPs = "", nil
	}
	// The pod started with its first sandbox, which survives an agent
	// restart (the kubelet keeps it in the API server).
	if st != nil && len(st.Sandboxes) > 0 {
		if first := st.Sandboxes[len(st.Sandboxes)-1].CreatedAt; !first.IsZero() {
			out.StartTime = &metav1.Time{Time: first}
		}
	}

	initsDone := true
	initFailed := false
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		cs := containerStatus(p, c, st, true, res, runtimeName, sb, probes, rz)
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "" {
			cs.State.Waiting.Reason = "PodInitializing"
		}
		if pod.IsSidecar(c) {
			// A sidecar initialises the pod once started; it then counts
			// as a container of the pod for readiness.
			if cs.Started == nil || !*cs.Started {
				if !appStarted(p, st) {
					initsDone = false
				}
			}
		} else {
			if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
				initsDone = initsDone && appStarted(p, st)
			}
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && p.Spec.RestartPolicy == v1.RestartPolicyNever {
				initFailed = true
			}
		}
		out.InitContainerStatuses = append(out.InitContainerStatuses, cs)
	}

	var running, waiting, stopped, succeeded int
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		cs := containerStatus(p, c, st, false, res, runtimeName, sb, probes, rz)
		if cs.State.Waiting != nil && cs.State.Waiting.Reason == "" {
			cs.State.Waiting.Reason = "ContainerCreating"
			if !initsDone {
				cs.State.Waiting.Reason = "PodInitializing"
			}
		}
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
		out.ContainerStatuses = append(out.ContainerStatuses, cs)
	}

	for i := range p.Spec.EphemeralContainers {
		out.EphemeralContainerStatuses = append(out.EphemeralContainerStatuses,
			ephemeralStatus(&p.Spec.EphemeralContainers[i], st, res, runtimeName, initsDone))
	}
	// By name, as the kubelet sorts them.
	sort.Slice(out.EphemeralContainerStatuses, func(i, j int) bool {
		return out.EphemeralContainerStatuses[i].Name < out.EphemeralContainerStatuses[j].Name
	})

	switch {
	case initFailed:
		out.Phase = v1.PodFailed
	case !initsDone:
		out.Phase = v1.PodPending
	case waiting > 0:
		out.Phase = v1.PodPending
	case running > 0:
		out.Phase = v1.PodRunning
	case stopped > 0:
		switch {
		case p.Spec.RestartPolicy == v1.RestartPolicyAlways:
			out.Phase = v1.PodRunning
		case stopped == succeeded:
			out.Phase = v1.PodSucceeded
		case p.Spec.RestartPolicy == v1.RestartPolicyNever:
			out.Phase = v1.PodFailed
		default:
			out.Phase = v1.PodRunning
		}
	default:
		out.Phase = v1.PodPending
	}

	out.Conditions = conditions(p, st, out)
	if rz != nil {
		out.Conditions = append(out.Conditions, rz.Conditions(p.UID)...)
	}
	if res.SandboxError != "" {
		out.Message = "FailedCreatePodSandBox: " + res.SandboxError
	}
	return out
}

// containerStatus reports the newest instance of one container; when it
// has exited and will be restarted, the instance shows as Waiting with the
// exit as its last termination state.
func containerStatus(p *v1.Pod, c *v1.Container, st *pod.RuntimeStatus, init bool, res pod.SyncResult, runtimeName string, sb *pod.Sandbox, probes pod.ProbeResults, rz Resizes) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	var latest, previous *pod.Container
	if st != nil {
		for _, rc := range st.Containers {
			if rc.Name != c.Name || rc.Init != init || rc.Ephemeral {
				continue
			}
			if latest == nil {
				latest = rc
			} else if previous == nil {
				previous = rc
				break
			}
		}
	}
	w, hasWaiting := res.Waiting[c.Name]
	if latest == nil {
		// Not started, as the prober manager marks every status.
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		cs.Started = new(bool)
		return cs
	}
	cs.ContainerID = runtimeName + "://" + latest.ID
	cs.ImageID = latest.ImageRef
	cs.RestartCount = int32(latest.RestartCount)
	resizeStatus(&cs, p.UID, c, init, latest, rz)
	if previous != nil && previous.State == pod.ContainerExited {
		cs.LastTerminationState.Terminated = terminated(previous, runtimeName)
	}
	switch latest.State {
	case pod.ContainerRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(latest.StartedAt)}
		started := passed(probes, p, latest, c.StartupProbe, pod.Startup)
		cs.Started = &started
		// A running plain init container is not ready (it is once it
		// completed); sidecars and app containers are once started and
		// their readiness probe passed.
		cs.Ready = (!init || pod.IsSidecar(c)) && started && sb != nil && sb.ID == latest.SandboxID &&
			passed(probes, p, latest, c.ReadinessProbe, pod.Readiness)
	case pod.ContainerExited:
		term := terminated(latest, runtimeName)
		if hasWaiting {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			cs.LastTerminationState.Terminated = term
		} else {
			cs.State.Terminated = term
			// A plain init container is ready once it completed (the
			// prober manager's UpdatePodStatus).
			cs.Ready = init && !pod.IsSidecar(c) && term.ExitCode == 0
		}
	default:
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
	}
	if cs.Started == nil {
		f := false
		cs.Started = &f
	}
	return cs
}

// resizeStatus sets a container status's allocatedResources and
// resources as the kubelet's convertToAPIContainerStatuses does for an
// app container or sidecar with an allocation and an instance: the
// allocated requests, and the resources in effect — as allocated, but
// for a running instance the cpu and memory requests and limits it runs
// with (its last in-place resize as recorded, else those it was created
// with). The kubelet reads those of a running instance from the
// runtime's status where the runtime reports them; the agent reports
// what it applied, which its own resize decisions go by too.
func resizeStatus(cs *v1.ContainerStatus, uid types.UID, c *v1.Container, init bool, latest *pod.Container, rz Resizes) {
	if rz == nil || (init && !pod.IsSidecar(c)) {
		return
	}
	alloc, ok := rz.Allocated(uid, c.Name)
	if !ok {
		return
	}
	cs.AllocatedResources = alloc.Requests.DeepCopy()
	res := alloc.DeepCopy()
	if latest.State == pod.ContainerRunning {
		applied := latest.Resources
		if a, ok := rz.Actuated(uid, c.Name, latest.ID); ok {
			applied = &a.Resources
		}
		if applied != nil {
			*res = pod.WithCPUMemory(*res, *applied)
		}
	}
	cs.Resources = res
}

// ephemeralStatus reports an ephemeral container as the kubelet does
// (convertToAPIContainerStatuses over the ephemeral containers): its one
// instance's state — it is never restarted, so no restart count and no
// last state — with its container and image IDs; never ready, and no
// started (the prober manager sets that on the others only). Until it has
// an instance it is waiting, with why its start failed if it did.
func ephemeralStatus(ec *v1.EphemeralContainer, st *pod.RuntimeStatus, res pod.SyncResult, runtimeName string, initsDone bool) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: ec.Name, Image: ec.Image}
	c := st.LatestEphemeral(ec.Name)
	if c == nil {
		w := res.Waiting[ec.Name]
		if w.Reason == "" {
			w.Reason = "ContainerCreating"
			if !initsDone {
				w.Reason = "PodInitializing"
			}
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		return cs
	}
	cs.ContainerID = runtimeName + "://" + c.ID
	cs.ImageID = c.ImageRef
	switch c.State {
	case pod.ContainerRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}
	case pod.ContainerExited:
		cs.State.Terminated = terminated(c, runtimeName)
	default: // created, not (yet) started; or unknown
		cs.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return cs
}

func terminated(c *pod.Container, runtimeName string) *v1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = "Completed"
		if c.ExitCode != 0 {
			reason = "Error"
		}
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    c.ExitCode,
		Reason:      reason,
		Message:     strings.TrimSpace(c.Message),
		StartedAt:   metav1.NewTime(c.StartedAt),
		FinishedAt:  metav1.NewTime(c.FinishedAt),
		ContainerID: runtimeName + "://" + c.ID,
	}
}

// passed reports whether a running instance passed a probe: true without
// one, else its verdict is success.
func passed(probes pod.ProbeResults, p *v1.Pod, c *pod.Container, spec *v1.Probe, kind pod.ProbeKind) bool {
	if spec == nil {
		return true
	}
	return probes != nil && probes.ProbeResult(p.UID, c.ID, kind) == pod.ProbeSuccess
}

// appStarted reports whether an app container has an instance in the
// newest sandbox: the pod was initialised there, whatever became of its
// init containers' instances since.
func appStarted(p *v1.Pod, st *pod.RuntimeStatus) bool {
	sb := st.LatestSandbox()
	if sb == nil {
		return false
	}
	for _, c := range st.Containers {
		if !c.Init && !c.Ephemeral && c.SandboxID == sb.ID {
			return true
		}
	}
	return false
}

// Condition reasons and messages, as the kubelet's
// (pkg/kubelet/status/generate.go, pkg/kubelet/types/constants.go).
const (
	reasonPodCompleted             = "PodCompleted"
	reasonPodFailed                = "PodFailed"
	reasonContainersNotReady       = "ContainersNotReady"
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	reasonUnknownContainerStatuses = "UnknownContainerStatuses"
	reasonSandboxNotReady          = "PodSandboxNotReady"

	msgNoSandbox       = "no pod sandbox exists"
	msgSandboxNotReady = "pod sandbox is not ready"
	msgSandboxNoIP     = "pod sandbox has no IP address"
)

// ownedConditions are the condition types the node sets; any other in
// p.Status.Conditions belongs to someone else (readiness gates, the
// scheduler, the disruption controller).
var ownedConditions = map[v1.PodConditionType]bool{
	v1.PodReadyToStartContainers: true, v1.PodInitialized: true, v1.ContainersReady: true,
	v1.PodReady: true, v1.PodScheduled: true,
	v1.PodResizePending: true, v1.PodResizeInProgress: true,
}

// isResizeCondition reports the resize conditions, whose times the
// allocation manager keeps.
func isResizeCondition(t v1.PodConditionType) bool {
	return t == v1.PodResizePending || t == v1.PodResizeInProgress
}

// conditions are the node's conditions of a pod whose container statuses
// and phase s holds, as generateAPIPodStatus sets them, each observing the
// pod's generation.
func conditions(p *v1.Pod, st *pod.RuntimeStatus, s v1.PodStatus) []v1.PodCondition {
	all := append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...)
	toStart := readyToStartCondition(p, st)
	initialized := initializedCondition(p, all, s.Phase)
	containersReady := containersReadyCondition(p, all, s.Phase)
	// The readiness gates see the conditions the kubelet holds when it
	// generates Ready: the others' and the two generated before it.
	var others []v1.PodCondition
	for _, c := range p.Status.Conditions {
		if !ownedConditions[c.Type] {
			others = append(others, c)
		}
	}
	ready := readyCondition(p, append(others, toStart, initialized), containersReady)
	out := []v1.PodCondition{toStart, initialized, containersReady, ready, {Type: v1.PodScheduled, Status: v1.ConditionTrue}}
	for i := range out {
		out[i].ObservedGeneration = p.Generation
	}
	return out
}

// readyToStartCondition is True when the pod has a sandbox it can start
// containers in: one ready sandbox, the newest, with an IP unless the pod
// uses the host's network (GeneratePodReadyToStartContainersCondition
// over kuberuntime's PodSandboxChanged). Two ready sandboxes at once, or
// a changed network namespace mode, which the kubelet also reports, are
// not told apart here.
func readyToStartCondition(p *v1.Pod, st *pod.RuntimeStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse, Reason: reasonSandboxNotReady}
	switch sb := st.LatestSandbox(); {
	case sb == nil:
		c.Message = msgNoSandbox
	case sb.State != runtimeapi.PodSandboxState_SANDBOX_READY:
		c.Message = msgSandboxNotReady
	case !p.Spec.HostNetwork && sb.IP == "":
		c.Message = msgSandboxNoIP
	default:
		c = v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	}
	return c
}

// initializedCondition: every init container done — a plain one ready
// (completed), a sidecar started — or a regular container started
// already; PodCompleted once the pod Succeeded
// (GeneratePodInitializedCondition).
func initializedCondition(p *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	if statuses == nil && len(p.Spec.InitContainers) > 0 {
		c.Status, c.Reason = v1.ConditionFalse, reasonUnknownContainerStatuses
		return c
	}
	byName := statusesByName(statuses)
	var unknown, incomplete []string
	for i := range p.Spec.InitContainers {
		ic := &p.Spec.InitContainers[i]
		cs, ok := byName[ic.Name]
		switch {
		case !ok:
			unknown = append(unknown, ic.Name)
		case pod.IsSidecar(ic) && (cs.Started == nil || !*cs.Started):
			incomplete = append(incomplete, ic.Name)
		case !pod.IsSidecar(ic) && !cs.Ready:
			incomplete = append(incomplete, ic.Name)
		}
	}
	switch {
	case phase == v1.PodSucceeded && len(unknown) == 0:
		c.Reason = reasonPodCompleted
	case regularStarted(p, byName):
	case len(unknown) > 0 || len(incomplete) > 0:
		c.Status, c.Reason = v1.ConditionFalse, reasonContainersNotInitialized
		c.Message = namesMessage("incomplete", unknown, incomplete)
	}
	return c
}

// containersReadyCondition: every sidecar and regular container ready;
// PodCompleted or PodFailed once the pod is over
// (GenerateContainersReadyCondition).
func containersReadyCondition(p *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	c := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	if statuses == nil {
		c.Reason = reasonUnknownContainerStatuses
		return c
	}
	byName := statusesByName(statuses)
	var unknown, unready []string
	check := func(name string) {
		if cs, ok := byName[name]; !ok {
			unknown = append(unknown, name)
		} else if !cs.Ready {
			unready = append(unready, name)
		}
	}
	for i := range p.Spec.InitContainers {
		if pod.IsSidecar(&p.Spec.InitContainers[i]) {
			check(p.Spec.InitContainers[i].Name)
		}
	}
	for i := range p.Spec.Containers {
		check(p.Spec.Containers[i].Name)
	}
	switch {
	case phase == v1.PodSucceeded && len(unknown) == 0:
		c.Reason = reasonPodCompleted
	case phase == v1.PodFailed:
		c.Reason = reasonPodFailed
	case len(unknown) > 0 || len(unready) > 0:
		c.Reason, c.Message = reasonContainersNotReady, namesMessage("unready", unknown, unready)
	default:
		c.Status = v1.ConditionTrue
	}
	return c
}

// readyCondition is containersReady's verdict as Ready, then the
// readiness gates': each gate's condition, looked up in conds, must exist
// and be True (GeneratePodReadyCondition).
func readyCondition(p *v1.Pod, conds []v1.PodCondition, containersReady v1.PodCondition) v1.PodCondition {
	c := containersReady
	c.Type = v1.PodReady
	if c.Status != v1.ConditionTrue {
		return c
	}
	var msgs []string
	for _, g := range p.Spec.ReadinessGates {
		gc := findCondition(conds, g.ConditionType)
		switch {
		case gc == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case gc.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), gc.Status))
		}
	}
	if len(msgs) > 0 {
		c.Status, c.Reason, c.Message = v1.ConditionFalse, reasonReadinessGatesNotReady, strings.Join(msgs, ", ")
	}
	return c
}

// finishedConditions makes the conditions of s — its phase made terminal,
// its containers all terminated (terminal) — those the kubelet generates
// for it: Initialized True (PodCompleted when Succeeded), ContainersReady
// and Ready False with PodCompleted or PodFailed. Call it again after
// changing the phase.
func finishedConditions(s *v1.PodStatus) {
	reason := reasonPodFailed
	if s.Phase == v1.PodSucceeded {
		reason = reasonPodCompleted
	}
	for i := range s.Conditions {
		switch c := &s.Conditions[i]; c.Type {
		case v1.PodInitialized:
			c.Status, c.Reason, c.Message = v1.ConditionTrue, "", ""
			if s.Phase == v1.PodSucceeded {
				c.Reason = reasonPodCompleted
			}
		case v1.PodReady, v1.ContainersReady:
			c.Status, c.Reason, c.Message = v1.ConditionFalse, reason, ""
		}
	}
}

// hasReadySandbox reports whether Compute saw a ready sandbox when it made
// s: PodReadyToStartContainers True, or False only for want of an IP.
func hasReadySandbox(s v1.PodStatus) bool {
	c := findCondition(s.Conditions, v1.PodReadyToStartContainers)
	return c != nil && (c.Status == v1.ConditionTrue || c.Message == msgSandboxNoIP)
}

// namesMessage lists the containers of unknown status, then the others
// ("containers with unknown status: [a], containers with <what> status:
// [b c]").
func namesMessage(what string, unknown, others []string) string {
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(others) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %s", what, others))
	}
	return strings.Join(msgs, ", ")
}

// regularStarted reports whether a regular container is running or has
// terminated: the pod was initialised (HasAnyRegularContainerStarted).
func regularStarted(p *v1.Pod, byName map[string]*v1.ContainerStatus) bool {
	for i := range p.Spec.Containers {
		if cs, ok := byName[p.Spec.Containers[i].Name]; ok && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

func statusesByName(statuses []v1.ContainerStatus) map[string]*v1.ContainerStatus {
	m := make(map[string]*v1.ContainerStatus, len(statuses))
	for i := range statuses {
		m[statuses[i].Name] = &statuses[i]
	}
	return m
}

func findCondition(conds []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
