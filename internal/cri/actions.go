package cri

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// actions is what one sync of a pod must do, decided by computeActions
// from the spec and the runtime status alone (the kubelet's
// computePodActions, kuberuntime_manager.go).
//
//	no ready sandbox / spec hash changed ──> kill everything, new sandbox (attempt+1),
//	                                          first init container or all containers
//	ready sandbox, init container running ──> wait
//	ready sandbox, init container failed  ──> restart it (Always/OnFailure) or fail the pod (Never)
//	ready sandbox, init container exit 0  ──> next init container
//	ready sandbox, inits done            ──> start missing / restartable containers,
//	                                          restart containers whose spec changed
type actions struct {
	killPod       bool
	createSandbox bool
	sandboxID     string
	attempt       uint32
	// nextInit is the index of the init container to start, -1 for none.
	nextInit int
	// initFailed: an init container failed under restartPolicy Never; the
	// pod is over.
	initFailed bool
	// start are indexes into spec.containers.
	start []int
	// kill are running containers to stop before their replacements start.
	kill []*pod.Container
	// stopSandbox: the pod is done (nothing runs or will run again); its
	// sandbox is stopped to free its IP and ports, its containers kept.
	stopSandbox bool
}

func computeActions(p *v1.Pod, specHash string, st *pod.RuntimeStatus) actions {
	a := actions{nextInit: -1}
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
			a.nextInit = 0
		}
		return a
	}
	a.sandboxID = sb.ID
	a.attempt = sb.Attempt
	inSandbox := func(name string, init bool) *pod.Container {
		for _, c := range st.Containers {
			if c.Name == name && c.Init == init && c.SandboxID == sb.ID {
				return c
			}
		}
		return nil
	}

	// Init containers, strictly in order.
	inits := p.Spec.InitContainers
	initsDone := len(inits) == 0
	for i := len(inits) - 1; i >= 0 && !initsDone; i-- {
		c := inSandbox(inits[i].Name, true)
		if c == nil {
			if i == 0 {
				a.nextInit = 0
				return a
			}
			continue
		}
		switch {
		case c.State == pod.ContainerRunning:
			return a
		case c.State == pod.ContainerExited && c.ExitCode == 0:
			if i == len(inits)-1 {
				initsDone = true
				break
			}
			a.nextInit = i + 1
			return a
		case c.State == pod.ContainerExited:
			if p.Spec.RestartPolicy == v1.RestartPolicyNever {
				a.initFailed = true
				a.killPod = st.Running()
				return a
			}
			a.nextInit = i
			return a
		default: // created but never started, or unknown
			a.nextInit = i
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
				a.kill = append(a.kill, c)
				a.start = append(a.start, i)
			}
		case c.State == pod.ContainerUnknown:
			// Maybe still running: stop it before starting another.
			a.kill = append(a.kill, c)
			a.start = append(a.start, i)
		case shouldRestart(p.Spec.RestartPolicy, c):
			a.start = append(a.start, i)
		}
	}
	running := false
	for _, c := range st.Containers {
		if c.SandboxID == sb.ID && c.State == pod.ContainerRunning {
			running = true
			if !c.Init && !wanted[c.Name] {
				a.kill = append(a.kill, c)
			}
		}
	}
	a.stopSandbox = len(a.start) == 0 && len(a.kill) == 0 && !running && p.Spec.RestartPolicy != v1.RestartPolicyAlways
	return a
}

// initsSucceeded reports whether every init container's newest instance
// exited 0.
func initsSucceeded(p *v1.Pod, st *pod.RuntimeStatus) bool {
	for i := range p.Spec.InitContainers {
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
