package cri

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// actions is what one sync of a pod must do, decided by computeActions
// from the spec, the runtime status and the probes' verdicts alone (the
// kubelet's computePodActions, kuberuntime_manager.go).
//
//	no ready sandbox / spec hash changed ──> kill everything, new sandbox (attempt+1),
//	                                          first init container or all containers
//	ready sandbox, init container running ──> wait
//	ready sandbox, init container failed  ──> restart it (Always/OnFailure) or fail the pod (Never)
//	ready sandbox, init container exit 0  ──> next init container
//	sidecar (init, restartPolicy Always)  ──> next init container once it is started
//	                                          (startup probe passed); restarted whenever it exits
//	ready sandbox, inits done            ──> start missing / restartable containers,
//	                                          restart containers whose spec changed or
//	                                          whose liveness or startup probe failed;
//	                                          a running container whose allocated cpu or
//	                                          memory differ from what it runs with is
//	                                          resized in place, or restarted when its
//	                                          resizePolicy says RestartContainer for a
//	                                          changed resource (computePodResizeAction)
//	every app container done (not Always) ──> stop the sidecars, last first
//	ready sandbox, app containers not done ──> start each ephemeral container
//	                                          that has no instance, once: never
//	                                          restarted, even while the pod
//	                                          initialises (as the kubelet)
type actions struct {
	killPod       bool
	createSandbox bool
	sandboxID     string
	attempt       uint32
	// startInit are indexes into spec.initContainers, started in order:
	// the next init container, and sidecars to restart.
	startInit []int
	// initFailed: an init container failed under restartPolicy Never; the
	// pod is over.
	initFailed bool
	// start are indexes into spec.containers.
	start []int
	// startEphemeral are indexes into spec.ephemeralContainers, started
	// before the others (the kubelet's SyncPod order).
	startEphemeral []int
	// kill are running containers to stop, in order, before their
	// replacements start.
	kill []killInfo
	// stopSandbox: the pod is done (nothing runs or will run again); its
	// sandbox is stopped to free its IP and ports, its containers kept.
	stopSandbox bool
	// resize are running containers (app containers and sidecars) to
	// resize in place to their spec's (allocated) cpu and memory.
	resize []resizeInfo
	// resizePod: the pod cgroup follows a resize (containers resized in
	// place or restarted for their resize policy).
	resizePod bool
}

// resizeInfo is one running container to resize in place to spec's
// resources.
type resizeInfo struct {
	c    *pod.Container
	spec *v1.Container
}

// killInfo is one container to stop, why (the Killing event's message)
// and with which grace period (seconds).
type killInfo struct {
	c       *pod.Container
	message string
	grace   int64
}

func computeActions(p *v1.Pod, specHash string, st *pod.RuntimeStatus, probes pod.ProbeResults) actions {
	a := actions{}
	sb := st.LatestSandbox()
	ready := 0
	for _, s := range st.Sandboxes {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	hashChanged := sb != nil && specHash != "" && sb.SpecHash != specHash
	if sb == nil || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY || ready > 1 || hashChanged {
		a.killPod = st.Running()
		if sb != nil {
			a.attempt = sb.Attempt + 1
		}
		// A pod that must not restart and has already run its containers
		// is not given a new sandbox.
		if !hashChanged && sb != nil && p.Spec.RestartPolicy == v1.RestartPolicyNever && len(st.Containers) > 0 {
			return a
		}
		for i := range p.Spec.Containers {
			c := st.Latest(p.Spec.Containers[i].Name, false)
			if p.Spec.RestartPolicy == v1.RestartPolicyOnFailure && succeeded(c) {
				continue
			}
			a.start = append(a.start, i)
		}
		if len(a.start) == 0 && initsSucceeded(p, st) {
			// Initialised and nothing left to run: the pod is done, no
			// sandbox (the kubelet's computePodActions).
			return a
		}
		a.createSandbox = true
		if len(p.Spec.InitContainers) > 0 {
			a.start = nil
			a.startInit = []int{0}
		}
		return a
	}
	a.sandboxID = sb.ID
	a.attempt = sb.Attempt
	inSandbox := func(name string, init bool) *pod.Container {
		for _, c := range st.Containers {
			if c.Name == name && c.Init == init && !c.Ephemeral && c.SandboxID == sb.ID {
				return c
			}
		}
		return nil
	}
	// Once an app container ran in this sandbox the pod is initialised:
	// plain init containers do not run again, a sidecar's exit does not
	// hold anything back.
	initialised := false
	for i := range p.Spec.Containers {
		initialised = initialised || inSandbox(p.Spec.Containers[i].Name, false) != nil
	}
	done := appContainersDone(p, st, inSandbox)

	// Ephemeral containers (kubectl debug): each once, whatever became of
	// its instance (in this sandbox or an earlier one), and whatever the
	// init containers do; not in a pod whose app containers are over.
	// They are killed only with the pod (stopPod).
	if !done {
		for i := range p.Spec.EphemeralContainers {
			if st.LatestEphemeral(p.Spec.EphemeralContainers[i].Name) == nil {
				a.startEphemeral = append(a.startEphemeral, i)
			}
		}
	}

	// Init containers, strictly in order. Sidecars stay up beside what
	// follows them.
	inits := p.Spec.InitContainers
	last := -1 // the last init container this sandbox has an instance of
	for i := range inits {
		if inSandbox(inits[i].Name, true) != nil {
			last = i
		}
	}
	for i := range inits {
		spec := &inits[i]
		c := inSandbox(spec.Name, true)
		if pod.IsSidecar(spec) {
			if done {
				continue // stopped below, not restarted
			}
			switch {
			case c == nil:
				a.startInit = append(a.startInit, i)
				if !initialised {
					return a
				}
			case c.State == pod.ContainerRunning:
				if k, bad := unhealthy(p, spec, c, probes); bad {
					a.kill = append(a.kill, k)
					a.startInit = append(a.startInit, i)
					if !initialised {
						return a // the restarted sidecar must start first
					}
					continue
				}
				switch resize, restart := resizeOf(spec, c); {
				case restart:
					a.kill = append(a.kill, killInfo{c, fmt.Sprintf("Container %s resize requires restart", spec.Name), gracePeriod(p, c)})
					a.startInit = append(a.startInit, i)
					a.resizePod = true
					if !initialised {
						return a
					}
					continue
				case resize:
					a.resize = append(a.resize, resizeInfo{c: c, spec: spec})
					a.resizePod = true
				}
				if !initialised && !started(p, spec, c, probes) {
					return a // the next one waits until it is started
				}
			case c.State == pod.ContainerUnknown:
				a.kill = append(a.kill, killInfo{c, fmt.Sprintf("Container %s is in an unknown state, will be restarted", spec.Name), gracePeriod(p, c)})
				a.startInit = append(a.startInit, i)
				if !initialised {
					return a
				}
			default: // exited or never started: a sidecar always restarts
				a.startInit = append(a.startInit, i)
				if !initialised {
					return a
				}
			}
			continue
		}
		switch {
		case initialised || (c == nil && i < last):
			// Done before (its instance may have been collected).
		case c == nil:
			a.startInit = append(a.startInit, i)
			return a
		case c.State == pod.ContainerRunning:
			return a
		case c.State == pod.ContainerExited && c.ExitCode == 0:
		case c.State == pod.ContainerExited:
			if p.Spec.RestartPolicy == v1.RestartPolicyNever {
				a.initFailed = true
				a.killPod = st.Running()
				a.startEphemeral = nil
				return a
			}
			a.startInit = append(a.startInit, i)
			return a
		default: // created but never started, or unknown
			a.startInit = append(a.startInit, i)
			return a
		}
	}

	wanted := map[string]bool{}
	for i := range p.Spec.Containers {
		spec := &p.Spec.Containers[i]
		wanted[spec.Name] = true
		c := inSandbox(spec.Name, false)
		switch {
		case c == nil:
			// A container that succeeded in an earlier sandbox of an
			// OnFailure pod is done (the kubelet looks at all instances).
			if p.Spec.RestartPolicy == v1.RestartPolicyOnFailure && succeeded(st.Latest(spec.Name, false)) {
				continue
			}
			a.start = append(a.start, i)
		case c.State == pod.ContainerRunning:
			if c.Hash != HashContainer(spec) {
				a.kill = append(a.kill, killInfo{c, fmt.Sprintf("Container %s definition changed, will be restarted", spec.Name), gracePeriod(p, c)})
				a.start = append(a.start, i)
			} else if k, bad := unhealthy(p, spec, c, probes); bad {
				a.kill = append(a.kill, k)
				if p.Spec.RestartPolicy != v1.RestartPolicyNever {
					a.start = append(a.start, i)
				}
			} else if resize, restart := resizeOf(spec, c); restart {
				a.kill = append(a.kill, killInfo{c, fmt.Sprintf("Container %s resize requires restart", spec.Name), gracePeriod(p, c)})
				a.start = append(a.start, i)
				a.resizePod = true
			} else if resize {
				a.resize = append(a.resize, resizeInfo{c: c, spec: spec})
				a.resizePod = true
			}
		case c.State == pod.ContainerUnknown:
			// Maybe still running: stop it before starting another.
			a.kill = append(a.kill, killInfo{c, fmt.Sprintf("Container %s is in an unknown state, will be restarted", spec.Name), gracePeriod(p, c)})
			a.start = append(a.start, i)
		case shouldRestart(p.Spec.RestartPolicy, c):
			a.start = append(a.start, i)
		}
	}
	running := false
	for _, c := range st.Containers {
		if c.SandboxID == sb.ID && c.State == pod.ContainerRunning {
			running = true
			if !c.Init && !c.Ephemeral && !wanted[c.Name] {
				a.kill = append(a.kill, killInfo{c, fmt.Sprintf("Stopping container %s", c.Name), gracePeriod(p, c)})
			}
		}
	}
	if done {
		// The app containers are over for good: the sidecars go too, in
		// reverse order (the kubelet's termination order).
		for i := len(inits) - 1; i >= 0; i-- {
			if c := inSandbox(inits[i].Name, true); c != nil && pod.IsSidecar(&inits[i]) && c.State == pod.ContainerRunning {
				a.kill = append(a.kill, killInfo{c, fmt.Sprintf("Stopping container %s", c.Name), gracePeriod(p, c)})
			}
		}
	}
	a.stopSandbox = len(a.start) == 0 && len(a.startInit) == 0 && len(a.startEphemeral) == 0 && len(a.kill) == 0 && !running && p.Spec.RestartPolicy != v1.RestartPolicyAlways
	return a
}

// appContainersDone reports whether every app container of a pod that
// is not restartPolicy Always has finished for good in the sandbox (or,
// OnFailure, succeeded in an earlier one).
func appContainersDone(p *v1.Pod, st *pod.RuntimeStatus, inSandbox func(string, bool) *pod.Container) bool {
	if p.Spec.RestartPolicy == v1.RestartPolicyAlways || len(p.Spec.Containers) == 0 {
		return false
	}
	for i := range p.Spec.Containers {
		name := p.Spec.Containers[i].Name
		if p.Spec.RestartPolicy == v1.RestartPolicyOnFailure && succeeded(st.Latest(name, false)) {
			continue
		}
		c := inSandbox(name, false)
		if c == nil || c.State != pod.ContainerExited || shouldRestart(p.Spec.RestartPolicy, c) {
			return false
		}
	}
	return true
}

// started reports whether a running instance counts as started: it has
// no startup probe, or the probe passed.
func started(p *v1.Pod, spec *v1.Container, c *pod.Container, probes pod.ProbeResults) bool {
	return spec.StartupProbe == nil || (probes != nil && probes.ProbeResult(p.UID, c.ID, pod.Startup) == pod.ProbeSuccess)
}

// unhealthy reports a running instance whose startup or liveness probe
// failed: it is killed with the probe's grace period when it sets one.
func unhealthy(p *v1.Pod, spec *v1.Container, c *pod.Container, probes pod.ProbeResults) (killInfo, bool) {
	if probes == nil {
		return killInfo{}, false
	}
	for _, pr := range []struct {
		kind pod.ProbeKind
		spec *v1.Probe
		what string
	}{{pod.Startup, spec.StartupProbe, "startup"}, {pod.Liveness, spec.LivenessProbe, "liveness"}} {
		if pr.spec == nil || probes.ProbeResult(p.UID, c.ID, pr.kind) != pod.ProbeFailure {
			continue
		}
		grace := gracePeriod(p, c)
		if g := pr.spec.TerminationGracePeriodSeconds; g != nil {
			grace = *g
		}
		msg := fmt.Sprintf("Container %s failed %s probe", spec.Name, pr.what)
		if pod.IsSidecar(spec) || p.Spec.RestartPolicy != v1.RestartPolicyNever {
			msg += ", will be restarted"
		}
		return killInfo{c, msg, grace}, true
	}
	return killInfo{}, false
}

// initsSucceeded reports whether every init container's newest instance
// exited 0 (sidecars aside).
func initsSucceeded(p *v1.Pod, st *pod.RuntimeStatus) bool {
	for i := range p.Spec.InitContainers {
		if pod.IsSidecar(&p.Spec.InitContainers[i]) {
			continue
		}
		if !succeeded(st.Latest(p.Spec.InitContainers[i].Name, true)) {
			return false
		}
	}
	return true
}

func succeeded(c *pod.Container) bool {
	return c != nil && c.State == pod.ContainerExited && c.ExitCode == 0
}

// shouldRestart decides for a container that is not running.
func shouldRestart(policy v1.RestartPolicy, c *pod.Container) bool {
	if c.State != pod.ContainerExited {
		return true // created but not started: start it again
	}
	switch policy {
	case v1.RestartPolicyAlways:
		return true
	case v1.RestartPolicyOnFailure:
		return c.ExitCode != 0
	}
	return false
}

// Thresholds below which the kernel makes no difference, as the
// kubelet's (cm.MinShares, cm.MinMilliCPULimit): two cpu requests at or
// below 2m give the same shares, two limits at or below 10m the same
// quota.
const (
	minShareMilli = 2
	minLimitMilli = 10
)

// cpuMemValues are a container's cpu (millicores) and memory (bytes)
// requests and limits; 0 is none.
type cpuMemValues struct{ cpuReq, cpuLim, memReq, memLim int64 }

func valuesOf(r v1.ResourceRequirements) cpuMemValues {
	return cpuMemValues{
		cpuReq: r.Requests.Cpu().MilliValue(), cpuLim: r.Limits.Cpu().MilliValue(),
		memReq: r.Requests.Memory().Value(), memLim: r.Limits.Memory().Value(),
	}
}

// resizeOf compares a running instance's resources with its spec's (the
// allocated ones), as the kubelet's computePodResizeAction: resize when
// a cpu or memory request or limit differs, restart instead when the
// container's resizePolicy says RestartContainer for a resource that
// differs (NotRequired is the default). An instance whose resources are
// unknown (made by an agent that did not record them, and never resized
// since) runs its spec's: it was restarted on any change of it.
func resizeOf(spec *v1.Container, c *pod.Container) (resize, restart bool) {
	if c.Resources == nil {
		return false, false
	}
	want, have := valuesOf(spec.Resources), valuesOf(*c.Resources)
	if want.cpuReq <= minShareMilli && have.cpuReq <= minShareMilli {
		want.cpuReq = have.cpuReq
	}
	if want.cpuLim <= minLimitMilli && have.cpuLim <= minLimitMilli {
		want.cpuLim = have.cpuLim
	}
	for _, r := range []struct {
		name    v1.ResourceName
		changed bool
	}{
		{v1.ResourceCPU, want.cpuReq != have.cpuReq || want.cpuLim != have.cpuLim},
		{v1.ResourceMemory, want.memReq != have.memReq || want.memLim != have.memLim},
	} {
		if !r.changed {
			continue
		}
		resize = true
		for _, rp := range spec.ResizePolicy {
			if rp.ResourceName == r.name && rp.RestartPolicy == v1.RestartContainer {
				restart = true
			}
		}
	}
	return resize, restart
}
