package admit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// AppArmorHost tells whether the node enforces AppArmor, as the kubelet
// checks it: <sysfs>/kernel/security/apparmor exists and
// <sysfs>/module/apparmor/parameters/enabled starts with "Y". sysfs is
// "/sys" on a real node.
func AppArmorHost(sysfs string) error {
	if _, err := os.Stat(filepath.Join(sysfs, "kernel", "security", "apparmor")); err != nil {
		return errors.New("AppArmor is not enabled on the host")
	}
	b, err := os.ReadFile(filepath.Join(sysfs, "module", "apparmor", "parameters", "enabled"))
	if err != nil || len(b) < 2 || b[0] != 'Y' {
		return errors.New("AppArmor is not enabled on the host")
	}
	return nil
}

// The deprecated per-container AppArmor annotation and its values.
const (
	appArmorAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"
	appArmorUnconfined       = "unconfined"
	appArmorLocalhostPrefix  = "localhost/"
)

// AppArmor refuses a pod that asks for an AppArmor profile other than
// Unconfined (pod or container field, or the deprecated annotation) when
// host, the result of AppArmorHost, says the node cannot enforce one; and
// a Localhost profile without a name (the kubelet's AppArmor admit
// handler and validator).
func AppArmor(host error) Handler {
	return HandlerFunc{N: "AppArmor", F: func(a *Attributes) Result {
		if !appArmorRequired(a.Pod) {
			return Result{Admit: true}
		}
		if host != nil {
			return Result{Reason: "AppArmor", Message: fmt.Sprintf("Cannot enforce AppArmor: %v", host)}
		}
		if err := appArmorNames(a.Pod); err != nil {
			return Result{Reason: "AppArmor", Message: fmt.Sprintf("Cannot enforce AppArmor: %v", err)}
		}
		return Result{Admit: true}
	}}
}

// appArmorRequired: the pod asks for a profile that is not Unconfined.
func appArmorRequired(p *v1.Pod) bool {
	confined := func(ap *v1.AppArmorProfile) bool { return ap != nil && ap.Type != v1.AppArmorProfileTypeUnconfined }
	if sc := p.Spec.SecurityContext; sc != nil && confined(sc.AppArmorProfile) {
		return true
	}
	for _, c := range allContainers(p) {
		if c.SecurityContext != nil && confined(c.SecurityContext.AppArmorProfile) {
			return true
		}
	}
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, appArmorAnnotationPrefix) && v != appArmorUnconfined {
			return true
		}
	}
	return false
}

// appArmorNames checks that every Localhost profile has a name.
func appArmorNames(p *v1.Pod) error {
	check := func(ap *v1.AppArmorProfile) error {
		if ap != nil && ap.Type == v1.AppArmorProfileTypeLocalhost && (ap.LocalhostProfile == nil || strings.TrimSpace(*ap.LocalhostProfile) == "") {
			return errors.New("invalid empty AppArmor profile name")
		}
		return nil
	}
	if sc := p.Spec.SecurityContext; sc != nil {
		if err := check(sc.AppArmorProfile); err != nil {
			return err
		}
	}
	for _, c := range allContainers(p) {
		if c.SecurityContext != nil {
			if err := check(c.SecurityContext.AppArmorProfile); err != nil {
				return fmt.Errorf("container %q: %w", c.Name, err)
			}
		}
	}
	for k, v := range p.Annotations {
		if strings.HasPrefix(k, appArmorAnnotationPrefix) && strings.HasPrefix(v, appArmorLocalhostPrefix) &&
			strings.TrimSpace(strings.TrimPrefix(v, appArmorLocalhostPrefix)) == "" {
			return fmt.Errorf("annotation %s: invalid empty AppArmor profile name", k)
		}
	}
	return nil
}

// UserNamespaces refuses a pod with hostUsers: false. nodeagent does not
// allocate user namespace ID ranges, and it never runs such a pod with
// the host's users instead; runtime, from cri.UserNamespaces, says whether
// the container runtime would have supported them, and the message gives
// the runtime's reason when it would not have.
func UserNamespaces(runtime error) Handler {
	why := "nodeagent does not allocate user namespace ID ranges"
	if runtime != nil {
		why = runtime.Error()
	}
	return HandlerFunc{N: "UserNamespaces", F: func(a *Attributes) Result {
		if a.Pod.Spec.HostUsers == nil || *a.Pod.Spec.HostUsers {
			return Result{Admit: true}
		}
		return Result{Reason: "UserNamespacesNotSupported", Message: "Pod requests a user namespace (hostUsers: false), which this node cannot provide: " + why}
	}}
}

// allContainers lists init, regular and ephemeral containers.
func allContainers(p *v1.Pod) []v1.Container {
	out := append([]v1.Container(nil), p.Spec.InitContainers...)
	out = append(out, p.Spec.Containers...)
	for _, e := range p.Spec.EphemeralContainers {
		out = append(out, v1.Container(e.EphemeralContainerCommon))
	}
	return out
}

// SupplementalGroupsPolicy refuses a pod asking for
// supplementalGroupsPolicy: Strict when the runtime cannot apply it
// (supported reads the runtime's features; an error counts as no), as the
// kubelet since 1.33: never silently downgraded to Merge.
func SupplementalGroupsPolicy(supported func() (bool, error)) Handler {
	return HandlerFunc{N: "SupplementalGroupsPolicy", F: func(a *Attributes) Result {
		sc := a.Pod.Spec.SecurityContext
		if sc == nil || sc.SupplementalGroupsPolicy == nil || *sc.SupplementalGroupsPolicy != v1.SupplementalGroupsPolicyStrict {
			return Result{Admit: true}
		}
		if ok, err := supported(); ok && err == nil {
			return Result{Admit: true}
		}
		return Result{Reason: "SupplementalGroupsPolicyNotSupported", Message: "SupplementalGroupsPolicy=Strict is not supported in this node"}
	}}
}

// NodeShutdown refuses every pod while the node shuts down (shutting
// reads the graceful shutdown's state), as the kubelet's shutdown
// manager does.
func NodeShutdown(shutting func() error, reason, message string) Handler {
	return HandlerFunc{N: "NodeShutdown", F: func(*Attributes) Result {
		if shutting() != nil {
			return Result{Reason: reason, Message: message}
		}
		return Result{Admit: true}
	}}
}
