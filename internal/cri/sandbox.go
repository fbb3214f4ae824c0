package cri

import (
	"context"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// sandboxConfig builds the PodSandboxConfig the kubelet would send
// (kuberuntime_sandbox.go generatePodSandboxConfig).
func (r *Runtime) sandboxConfig(p *v1.Pod, specHash string, attempt uint32) *runtimeapi.PodSandboxConfig {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      p.Name,
			Namespace: p.Namespace,
			Uid:       string(p.UID),
			Attempt:   attempt,
		},
		Labels:       podLabels(p),
		Annotations:  podAnnotations(p, specHash),
		LogDirectory: r.PodLogDir(p),
	}
	if !p.Spec.HostNetwork {
		cfg.Hostname = podHostname(p)
	}
	for _, c := range p.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol:      protocol(port.Protocol),
				ContainerPort: port.ContainerPort,
				HostPort:      port.HostPort,
				HostIp:        port.HostIP,
			})
		}
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: namespaceOptions(p),
		Privileged:       anyPrivileged(p),
		// As the kubelet: the pause container runs RuntimeDefault, so a
		// pod-level profile may be stricter than unconfined.
		Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
	}
	if psc := p.Spec.SecurityContext; psc != nil {
		sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups = podIdentity(psc)
		sc.SupplementalGroupsPolicy = groupsPolicy(psc)
	}
	linux := &runtimeapi.LinuxPodSandboxConfig{SecurityContext: sc}
	if psc := p.Spec.SecurityContext; psc != nil && len(psc.Sysctls) > 0 {
		linux.Sysctls = map[string]string{}
		for _, s := range psc.Sysctls {
			linux.Sysctls[s.Name] = s.Value
		}
	}
	cfg.Linux = linux
	return cfg
}

// podHostname is spec.hostname or the pod name, cut to 63 characters
// without a trailing '-' or '.' (the kubelet's truncatePodHostnameIfNeeded).
func podHostname(p *v1.Pod) string {
	h := p.Name
	if p.Spec.Hostname != "" {
		h = p.Spec.Hostname
	}
	if len(h) <= 63 {
		return h
	}
	return strings.TrimRight(h[:63], "-.")
}

// podIdentity maps the pod-level user, group and supplemental groups:
// the fsGroup first, then the supplementalGroups, as the kubelet lists
// them (the fsGroup owns the pod's volumes, so its processes are in it).
func podIdentity(psc *v1.PodSecurityContext) (user, group *runtimeapi.Int64Value, groups []int64) {
	if psc.RunAsUser != nil {
		user = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		group = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	if psc.FSGroup != nil {
		groups = append(groups, *psc.FSGroup)
	}
	return user, group, append(groups, psc.SupplementalGroups...)
}

// groupsPolicy is the pod's supplementalGroupsPolicy for the runtime
// (Merge when unset); admission refuses Strict where the runtime cannot
// apply it.
func groupsPolicy(psc *v1.PodSecurityContext) runtimeapi.SupplementalGroupsPolicy {
	if psc != nil && psc.SupplementalGroupsPolicy != nil && *psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}

func namespaceOptions(p *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if p.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if p.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case p.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case p.Spec.ShareProcessNamespace != nil && *p.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// anyPrivileged reports a privileged init, app or ephemeral container
// (the kubelet's HasPrivilegedContainer): the sandbox is privileged too.
func anyPrivileged(p *v1.Pod) bool {
	privileged := func(sc *v1.SecurityContext) bool {
		return sc != nil && sc.Privileged != nil && *sc.Privileged
	}
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if privileged(c.SecurityContext) {
				return true
			}
		}
	}
	for _, c := range p.Spec.EphemeralContainers {
		if privileged(c.SecurityContext) {
			return true
		}
	}
	return false
}

func protocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// runSandbox creates the pod's log directory and its sandbox, with the
// runtime handler of the pod's RuntimeClass (kuberuntime_sandbox.go
// createPodSandbox). A handler the runtime does not know fails in
// RunPodSandbox, in the runtime's words.
func (r *Runtime) runSandbox(ctx context.Context, p *v1.Pod, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", fmt.Errorf("create pod log directory: %w", err)
	}
	handler, err := r.runtimeHandler(p)
	if err != nil {
		return "", err
	}
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	resp, err := r.c.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	if err != nil {
		return "", fmt.Errorf("run pod sandbox: %w", translate(err))
	}
	return resp.PodSandboxId, nil
}

// sandboxPodIPs is a sandbox's IPs as the runtime status has them,
// primary first.
func sandboxPodIPs(sb *pod.Sandbox) []string {
	if len(sb.IPs) == 0 && sb.IP != "" {
		return []string{sb.IP}
	}
	return sb.IPs
}

// primaryIP is the first of a pod's IPs, "" when it has none.
func primaryIP(ips []string) string {
	if len(ips) == 0 {
		return ""
	}
	return ips[0]
}
