package podsource

import (
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-helpers/node/util/sysctl"
)

const (
	sysctlSegmentFmt = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
	sysctlMaxLength  = 253
)

// sysctlRegexp matches a sysctl name, dots or slashes between segments.
var sysctlRegexp = regexp.MustCompile("^(" + sysctlSegmentFmt + "[\\./])*" + sysctlSegmentFmt + "$")

// capabilityRegexp matches a capability name as the runtime takes it
// ("NET_ADMIN", "CAP_NET_ADMIN", "ALL"). Not an API server rule: an
// unknown character would only fail at container creation.
var capabilityRegexp = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

func validatePodSecurityContext(s *v1.PodSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	hostUsers := s.HostUsers == nil || *s.HostUsers
	if !hostUsers {
		for _, f := range []struct {
			name string
			set  bool
		}{{"hostNetwork", s.HostNetwork}, {"hostPID", s.HostPID}, {"hostIPC", s.HostIPC}} {
			if f.set {
				errs = append(errs, field.Forbidden(spec.Child(f.name), "when `hostUsers` is false"))
			}
		}
	}
	if s.ShareProcessNamespace != nil && *s.ShareProcessNamespace && s.HostPID {
		errs = append(errs, field.Invalid(spec.Child("shareProcessNamespace"), true, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	sc := s.SecurityContext
	if sc == nil {
		return errs
	}
	fp := spec.Child("securityContext")
	errs = append(errs, validateIDs(sc.RunAsUser, sc.RunAsGroup, fp)...)
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			errs = append(errs, field.Invalid(fp.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	for i, g := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(g) {
			errs = append(errs, field.Invalid(fp.Child("supplementalGroups").Index(i), g, msg))
		}
	}
	if p := sc.FSGroupChangePolicy; p != nil && *p != v1.FSGroupChangeOnRootMismatch && *p != v1.FSGroupChangeAlways {
		errs = append(errs, field.NotSupported(fp.Child("fsGroupChangePolicy"), *p,
			[]v1.PodFSGroupChangePolicy{v1.FSGroupChangeAlways, v1.FSGroupChangeOnRootMismatch}))
	}
	if p := sc.SupplementalGroupsPolicy; p != nil && *p != v1.SupplementalGroupsPolicyMerge && *p != v1.SupplementalGroupsPolicyStrict {
		errs = append(errs, field.NotSupported(fp.Child("supplementalGroupsPolicy"), *p,
			[]v1.SupplementalGroupsPolicy{v1.SupplementalGroupsPolicyMerge, v1.SupplementalGroupsPolicyStrict}))
	}
	if p := sc.SELinuxChangePolicy; p != nil && *p != v1.SELinuxChangePolicyRecursive && *p != v1.SELinuxChangePolicyMountOption {
		errs = append(errs, field.NotSupported(fp.Child("seLinuxChangePolicy"), *p,
			[]v1.PodSELinuxChangePolicy{v1.SELinuxChangePolicyMountOption, v1.SELinuxChangePolicyRecursive}))
	}
	errs = append(errs, validateSysctls(s, fp.Child("sysctls"))...)
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fp.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmorProfile(sc.AppArmorProfile, fp.Child("appArmorProfile"))...)
	return errs
}

// validateSysctls: well-formed names, each once, and no namespaced sysctl
// of a namespace the pod shares with the host.
func validateSysctls(s *v1.PodSpec, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, sc := range s.SecurityContext.Sysctls {
		np := fp.Index(i).Child("name")
		switch {
		case sc.Name == "":
			errs = append(errs, field.Required(np, ""))
		case len(sc.Name) > sysctlMaxLength || !sysctlRegexp.MatchString(sc.Name):
			errs = append(errs, field.Invalid(np, sc.Name,
				fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlRegexp)))
		case names.Has(sc.Name):
			errs = append(errs, field.Duplicate(np, sc.Name))
		}
		names.Insert(sc.Name)
		ns, _, _ := sysctl.GetNamespace(sc.Name)
		switch {
		case s.HostNetwork && ns == sysctl.NetNamespace:
			errs = append(errs, field.Invalid(np, sc.Name, "may not be specified when 'hostNetwork' is true"))
		case s.HostIPC && ns == sysctl.IPCNamespace:
			errs = append(errs, field.Invalid(np, sc.Name, "may not be specified when 'hostIPC' is true"))
		}
	}
	return errs
}

func validateIDs(user, group *int64, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if user != nil {
		for _, msg := range validation.IsValidUserID(*user) {
			errs = append(errs, field.Invalid(fp.Child("runAsUser"), *user, msg))
		}
	}
	if group != nil {
		for _, msg := range validation.IsValidGroupID(*group) {
			errs = append(errs, field.Invalid(fp.Child("runAsGroup"), *group, msg))
		}
	}
	return errs
}

// validateSecurityContext checks a container's security context.
func validateSecurityContext(sc *v1.SecurityContext, hostUsers bool, fp *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	errs := validateIDs(sc.RunAsUser, sc.RunAsGroup, fp)
	if pm := sc.ProcMount; pm != nil {
		switch *pm {
		case v1.DefaultProcMount:
		case v1.UnmaskedProcMount:
			if hostUsers {
				errs = append(errs, field.Invalid(fp.Child("procMount"), *pm, "`hostUsers` must be false to use `Unmasked`"))
			}
		default:
			errs = append(errs, field.NotSupported(fp.Child("procMount"), *pm, []v1.ProcMountType{v1.DefaultProcMount, v1.UnmaskedProcMount}))
		}
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fp.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmorProfile(sc.AppArmorProfile, fp.Child("appArmorProfile"))...)
	if caps := sc.Capabilities; caps != nil {
		for _, list := range []struct {
			name string
			caps []v1.Capability
		}{{"add", caps.Add}, {"drop", caps.Drop}} {
			for i, c := range list.caps {
				if !capabilityRegexp.MatchString(string(c)) {
					errs = append(errs, field.Invalid(fp.Child("capabilities", list.name).Index(i), c,
						"must be a capability name such as NET_ADMIN, CAP_NET_ADMIN or ALL"))
				}
			}
		}
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			errs = append(errs, field.Invalid(fp, "", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if name := strings.ToUpper(string(c)); name == "CAP_SYS_ADMIN" || name == "SYS_ADMIN" {
					errs = append(errs, field.Invalid(fp, "", "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return errs
}

func validateSeccompProfile(sp *v1.SeccompProfile, fp *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined:
	case "":
		errs = append(errs, field.Required(fp.Child("type"), "type is required when seccompProfile is set"))
	default:
		errs = append(errs, field.NotSupported(fp.Child("type"), sp.Type, []v1.SeccompProfileType{
			v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined}))
	}
	switch {
	case sp.Type == v1.SeccompProfileTypeLocalhost && sp.LocalhostProfile == nil:
		errs = append(errs, field.Required(fp.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
	case sp.Type == v1.SeccompProfileTypeLocalhost:
		errs = append(errs, validateLocalDescendingPath(*sp.LocalhostProfile, fp.Child("localhostProfile"))...)
	case sp.LocalhostProfile != nil:
		errs = append(errs, field.Invalid(fp.Child("localhostProfile"), *sp.LocalhostProfile, "can only be set when seccomp type is Localhost"))
	}
	return errs
}

func validateAppArmorProfile(ap *v1.AppArmorProfile, fp *field.Path) field.ErrorList {
	if ap == nil {
		return nil
	}
	var errs field.ErrorList
	switch ap.Type {
	case v1.AppArmorProfileTypeLocalhost:
		lp := ap.LocalhostProfile
		switch {
		case lp == nil || *lp == "":
			errs = append(errs, field.Required(fp.Child("localhostProfile"), "must be set when AppArmor type is Localhost"))
		case strings.TrimSpace(*lp) != *lp:
			errs = append(errs, field.Invalid(fp.Child("localhostProfile"), *lp, "must not be padded with whitespace"))
		case len(*lp) > 4095:
			errs = append(errs, field.TooLong(fp.Child("localhostProfile"), "", 4095))
		}
	case v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined:
		if ap.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(fp.Child("localhostProfile"), *ap.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case "":
		errs = append(errs, field.Required(fp.Child("type"), "type is required when appArmorProfile is set"))
	default:
		errs = append(errs, field.NotSupported(fp.Child("type"), ap.Type, []v1.AppArmorProfileType{
			v1.AppArmorProfileTypeLocalhost, v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined}))
	}
	return errs
}
