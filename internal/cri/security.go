package cri

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// SpecConfig holds the node settings that the translation of a pod's
// spec into CRI configs reads (the kubelet's clusterDomain,
// seccompDefault and seccomp profile root).
type SpecConfig struct {
	// ClusterDomain is the cluster's DNS domain: a pod with a
	// spec.subdomain finds <hostname>.<subdomain>.<namespace>.svc.<domain>
	// in its /etc/hosts. Default "cluster.local".
	ClusterDomain string
	// SeccompProfileRoot holds the Localhost seccomp profiles: a
	// localhostProfile is a path beneath it. Default <RootDir>/seccomp.
	SeccompProfileRoot string
	// SeccompDefault makes RuntimeDefault the seccomp profile of a
	// container whose pod and container set none (the kubelet's
	// --seccomp-default); without it such a container runs Unconfined.
	SeccompDefault bool
	// NodeHostsFile is the node's hosts file, which host-network pods get
	// a copy of. Default /etc/hosts.
	NodeHostsFile string
}

func (s SpecConfig) withDefaults(rootDir string) SpecConfig {
	if s.ClusterDomain == "" {
		s.ClusterDomain = "cluster.local"
	}
	if s.SeccompProfileRoot == "" {
		s.SeccompProfileRoot = filepath.Join(rootDir, "seccomp")
	}
	if s.NodeHostsFile == "" {
		s.NodeHostsFile = "/etc/hosts"
	}
	return s
}

// applySecurityProfiles completes a container's CRI security context with
// what securityContext leaves out: the seccomp and AppArmor profiles and
// the /proc paths masked or read-only (kuberuntime's
// determineEffectiveSecurityContext). An invalid profile is an error, a
// CreateContainerConfigError for the caller.
func (r *Runtime) applySecurityProfiles(p *v1.Pod, c *v1.Container, sc *runtimeapi.LinuxContainerSecurityContext) error {
	seccomp, err := seccompProfile(p, c, r.cfg.SeccompProfileRoot, r.cfg.SeccompDefault)
	if err != nil {
		return err
	}
	sc.Seccomp = seccomp
	sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(p, c)
	if err != nil {
		return err
	}
	sc.MaskedPaths, sc.ReadonlyPaths = procPaths(c)
	return nil
}

// seccompProfile is the container's seccomp profile: the container's
// field, else the pod's, else RuntimeDefault with seccompDefault and
// Unconfined without (kuberuntime's getSeccompProfile). A Localhost
// profile is a file beneath root.
func seccompProfile(p *v1.Pod, c *v1.Container, root string, seccompDefault bool) (*runtimeapi.SecurityProfile, error) {
	var sp *v1.SeccompProfile
	switch {
	case c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil:
		sp = c.SecurityContext.SeccompProfile
	case p.Spec.SecurityContext != nil && p.Spec.SecurityContext.SeccompProfile != nil:
		sp = p.Spec.SecurityContext.SeccompProfile
	case seccompDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	default:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch sp.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile == nil || *sp.LocalhostProfile == "" {
			return nil, errors.New("seccompProfile: localhostProfile must be set if type is Localhost")
		}
		// The API refuses ".." elements; a manifest is checked here too,
		// so that a profile is never read from outside the root.
		rel := filepath.Clean(*sp.LocalhostProfile)
		if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("seccompProfile: localhostProfile %q must be a relative path beneath %s", *sp.LocalhostProfile, root)
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(root, rel)}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// The deprecated AppArmor annotations, still honoured for static pods
// (the kubelet's apparmor.GetProfile).
const (
	annotationAppArmorPrefix    = "container.apparmor.security.beta.kubernetes.io/"
	appArmorRuntimeDefault      = "runtime/default"
	appArmorUnconfined          = "unconfined"
	appArmorLocalhostNamePrefix = "localhost/"
)

// appArmorProfile is the container's AppArmor profile: the container's
// field, else the deprecated per-container annotation, else the pod's
// field; nil when none is set, which leaves the runtime's default. The
// string is the same profile in the deprecated CRI form, for older
// runtimes (kuberuntime's getAppArmorProfile).
func appArmorProfile(p *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, string, error) {
	var ap *v1.AppArmorProfile
	switch {
	case c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil:
		ap = c.SecurityContext.AppArmorProfile
	case appArmorFromAnnotation(p.Annotations[annotationAppArmorPrefix+c.Name]) != nil:
		ap = appArmorFromAnnotation(p.Annotations[annotationAppArmorPrefix+c.Name])
	case p.Spec.SecurityContext != nil && p.Spec.SecurityContext.AppArmorProfile != nil:
		ap = p.Spec.SecurityContext.AppArmorProfile
	default:
		return nil, "", nil
	}
	switch ap.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, appArmorRuntimeDefault, nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, appArmorUnconfined, nil
	case v1.AppArmorProfileTypeLocalhost:
		if ap.LocalhostProfile == nil || strings.TrimSpace(*ap.LocalhostProfile) == "" {
			return nil, "", errors.New("appArmorProfile: localhostProfile must be set if type is Localhost")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *ap.LocalhostProfile},
			appArmorLocalhostNamePrefix + *ap.LocalhostProfile, nil
	}
	return nil, "", fmt.Errorf("appArmorProfile: unknown type %q", ap.Type)
}

// appArmorFromAnnotation reads a deprecated AppArmor annotation's value;
// nil when absent or invalid.
func appArmorFromAnnotation(v string) *v1.AppArmorProfile {
	switch {
	case v == appArmorRuntimeDefault:
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
	case v == appArmorUnconfined:
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
	case strings.HasPrefix(v, appArmorLocalhostNamePrefix):
		name := strings.TrimPrefix(v, appArmorLocalhostNamePrefix)
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	}
	return nil
}

// defaultReadonlyPaths are read-only in a container unless its procMount
// is Unmasked (the kubelet's securitycontext list, kept in sync with
// moby's).
var defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// defaultMaskedPaths are hidden in a container unless its procMount is
// Unmasked: the kubelet's list, with the thermal_throttle directory of
// each CPU the node has.
var defaultMaskedPaths = sync.OnceValue(func() []string {
	paths := []string{
		"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap",
	}
	thermal, _ := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*/thermal_throttle")
	return append(paths, thermal...)
})

// procPaths are the container's masked and read-only paths. The kubelet
// always sends them: containerd's CRI plugin starts from empty lists
// (containerd#5029), so a container given none would see /proc and /sys
// unmasked. procMount Unmasked gives empty lists.
func procPaths(c *v1.Container) (masked, readonly []string) {
	if sc := c.SecurityContext; sc != nil && sc.ProcMount != nil && *sc.ProcMount == v1.UnmaskedProcMount {
		return []string{}, []string{}
	}
	return append([]string(nil), defaultMaskedPaths()...), append([]string(nil), defaultReadonlyPaths...)
}
