package status

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Compute builds the pod's status as the kubelet would report it
// (kubelet_pods.go generateAPIPodStatus and getPhase). runtimeName
// prefixes container IDs ("containerd://…"); probes, when set, gives the
// startup and readiness verdicts (without, a running container is started
// and ready unless it has such a probe).
func Compute(p *v1.Pod, st *pod.RuntimeStatus, res pod.SyncResult, runtimeName string, probes pod.ProbeResults) v1.PodStatus {
	out := v1.PodStatus{QOSClass: qosClass(p)}
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
	sidecarsReady := true
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		cs := containerStatus(p, c, st, true, res, runtimeName, sb, probes)
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
			sidecarsReady = sidecarsReady && cs.Ready
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
	allReady := sidecarsReady
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		cs := containerStatus(p, c, st, false, res, runtimeName, sb, probes)
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
		if !cs.Ready {
			allReady = false
		}
		out.ContainerStatuses = append(out.ContainerStatuses, cs)
	}

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

	cond := func(t v1.PodConditionType, ok bool, reason string) {
		c := v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason}
		if ok {
			c.Status, c.Reason = v1.ConditionTrue, ""
		}
		out.Conditions = append(out.Conditions, c)
	}
	cond(v1.PodReadyToStartContainers, sandboxReady, "")
	cond(v1.PodInitialized, initsDone, "ContainersNotInitialized")
	ready := allReady && initsDone && out.Phase == v1.PodRunning
	notReady := "ContainersNotReady"
	if out.Phase == v1.PodSucceeded || out.Phase == v1.PodFailed {
		notReady = "PodCompleted"
	}
	cond(v1.ContainersReady, ready, notReady)
	cond(v1.PodReady, ready, notReady)
	cond(v1.PodScheduled, true, "")
	if res.SandboxError != "" {
		out.Message = "FailedCreatePodSandBox: " + res.SandboxError
	}
	return out
}

// containerStatus reports the newest instance of one container; when it
// has exited and will be restarted, the instance shows as Waiting with the
// exit as its last termination state.
func containerStatus(p *v1.Pod, c *v1.Container, st *pod.RuntimeStatus, init bool, res pod.SyncResult, runtimeName string, sb *pod.Sandbox, probes pod.ProbeResults) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	var latest, previous *pod.Container
	if st != nil {
		for _, rc := range st.Containers {
			if rc.Name != c.Name || rc.Init != init {
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
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
		return cs
	}
	cs.ContainerID = runtimeName + "://" + latest.ID
	cs.ImageID = latest.ImageRef
	cs.RestartCount = int32(latest.RestartCount)
	if previous != nil && previous.State == pod.ContainerExited {
		cs.LastTerminationState.Terminated = terminated(previous, runtimeName)
	}
	switch latest.State {
	case pod.ContainerRunning:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(latest.StartedAt)}
		started := passed(probes, p, latest, c.StartupProbe, pod.Startup)
		cs.Started = &started
		// Plain init containers are never ready; sidecars and app
		// containers once started and their readiness probe passes.
		cs.Ready = (!init || pod.IsSidecar(c)) && started && sb != nil && sb.ID == latest.SandboxID &&
			passed(probes, p, latest, c.ReadinessProbe, pod.Readiness)
	case pod.ContainerExited:
		term := terminated(latest, runtimeName)
		if hasWaiting {
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			cs.LastTerminationState.Terminated = term
		} else {
			cs.State.Terminated = term
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

// qosClass is the pod's QoS class (pkg/apis/core/v1/helper/qos).
func qosClass(p *v1.Pod) v1.PodQOSClass {
	requests, limits := v1.ResourceList{}, v1.ResourceList{}
	guaranteed := true
	any := false
	for _, c := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		for n, q := range c.Resources.Requests {
			if n == v1.ResourceCPU || n == v1.ResourceMemory {
				any = any || !q.IsZero()
				requests[n] = q
			}
		}
		for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			lim, ok := c.Resources.Limits[n]
			if !ok || lim.IsZero() {
				guaranteed = false
				continue
			}
			any = any || !lim.IsZero()
			limits[n] = lim
			if req, ok := c.Resources.Requests[n]; ok && req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
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
		if !c.Init && c.SandboxID == sb.ID {
			return true
		}
	}
	return false
}
