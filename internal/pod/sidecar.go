package pod

import v1 "k8s.io/api/core/v1"

// IsSidecar reports an init container with restartPolicy Always: it keeps
// running beside the app containers.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// LatestIsLastState reports whether the newest instance of the pod's
// container name has exited and waits for its restart: its status shows
// it as the container's lastState (the same container ID), so the
// kubelet's `logs --previous` reads that instance, not the one before.
func LatestIsLastState(p *v1.Pod, name string) bool {
	for _, list := range [][]v1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cs.Name != name {
				continue
			}
			t := cs.LastTerminationState.Terminated
			return cs.State.Waiting != nil && t != nil && cs.ContainerID != "" && t.ContainerID == cs.ContainerID
		}
	}
	return false
}
