package pod

import v1 "k8s.io/api/core/v1"

// IsSidecar reports an init container with restartPolicy Always: it keeps
// running beside the app containers.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}
