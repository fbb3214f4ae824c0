package podsource

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a defaulted static pod with the rules of the API
// server's pod validation (k8s.io/kubernetes/pkg/apis/core/validation,
// ValidatePodCreate with the options of a current cluster), ported rule by
// rule because that module cannot be imported cleanly outside the
// Kubernetes tree, plus the few things a static pod may not use. Field
// paths and messages follow the API server's, so an operator can search
// for them.
//
// Validate never modifies the pod, and reports every problem it finds in
// a stable order (spec fields in a fixed order, map keys sorted).
//
// Deliberately not ported: rules that depend on objects the agent never
// sees (PriorityClasses, RuntimeClasses, quota), update-only rules, and
// feature-gated fields the agent does not implement (they are refused
// where they would silently not work, e.g. per-container restart rules).
func Validate(p *v1.Pod) field.ErrorList {
	errs := validateMeta(p)
	return append(errs, validateSpec(p)...)
}

// validateMeta checks metadata: the full static pod name (name-<node>)
// is a DNS subdomain, namespace, labels, annotations and the annotations
// the API server reads on pods.
var uidRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

func validateMeta(p *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	if p.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), "name or generateName is required"))
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(p.Name, false) {
			errs = append(errs, field.Invalid(meta.Child("name"), p.Name, msg))
		}
	}
	for _, msg := range apivalidation.ValidateNamespaceName(p.Namespace, false) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), p.Namespace, msg))
	}
	// The UID names the pod's directories (<root>/pods/<uid>, the log
	// directory): a manifest that pins one must not be able to point
	// them anywhere else. The API server generates UUIDs; accept those and
	// other plain tokens.
	if p.UID != "" && !uidRE.MatchString(string(p.UID)) {
		errs = append(errs, field.Invalid(meta.Child("uid"), p.UID,
			"must be 1-64 letters, digits, '-' or '_', starting with a letter or digit"))
	}
	errs = append(errs, metavalidation.ValidateLabels(p.Labels, meta.Child("labels"))...)
	ann := meta.Child("annotations")
	errs = append(errs, apivalidation.ValidateAnnotations(p.Annotations, ann)...)
	for _, k := range sortedKeys(p.Annotations) {
		v := p.Annotations[k]
		switch {
		case k == "controller.kubernetes.io/pod-deletion-cost":
			if _, err := strconv.ParseInt(v, 10, 32); err != nil {
				errs = append(errs, field.Invalid(ann.Key(k), v, "must be a 32bit integer"))
			}
		case k == v1.SeccompPodAnnotationKey || strings.HasPrefix(k, v1.SeccompContainerAnnotationKeyPrefix):
			errs = append(errs, validateSeccompAnnotation(v, ann.Key(k))...)
		case strings.HasPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix):
			name := strings.TrimPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix)
			if !hasContainer(&p.Spec, name) {
				errs = append(errs, field.Invalid(ann.Key(k), name, "container not found"))
			}
			if v != "" && v != v1.DeprecatedAppArmorBetaProfileRuntimeDefault && v != v1.DeprecatedAppArmorBetaProfileNameUnconfined &&
				!strings.HasPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix) {
				errs = append(errs, field.Invalid(ann.Key(k), v, fmt.Sprintf("invalid AppArmor profile name: %q", v)))
			}
		}
	}
	return errs
}

func validateSeccompAnnotation(v string, fp *field.Path) field.ErrorList {
	switch {
	case v == v1.SeccompProfileRuntimeDefault, v == v1.DeprecatedSeccompProfileDockerDefault, v == v1.SeccompProfileNameUnconfined:
		return nil
	case strings.HasPrefix(v, v1.SeccompLocalhostProfileNamePrefix):
		return validateLocalDescendingPath(strings.TrimPrefix(v, v1.SeccompLocalhostProfileNamePrefix), fp)
	}
	return field.ErrorList{field.Invalid(fp, v, "must be a valid seccomp profile")}
}

func hasContainer(s *v1.PodSpec, name string) bool {
	for _, cs := range [][]v1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return true
			}
		}
	}
	return false
}

// specContext is what container validation needs to know of the pod.
type specContext struct {
	volumes       map[string]*v1.Volume
	grace         *int64
	hostUsers     bool
	restartPolicy v1.RestartPolicy
	claims        sets.Set[string]
	names         sets.Set[string] // container names seen so far
}

func validateSpec(p *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	s := &p.Spec
	spec := field.NewPath("spec")

	switch s.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	case "":
		errs = append(errs, field.Required(spec.Child("restartPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), s.RestartPolicy,
			[]v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever}))
	}
	switch g := s.TerminationGracePeriodSeconds; {
	case g == nil:
		errs = append(errs, field.Required(spec.Child("terminationGracePeriodSeconds"), ""))
	case *g < 0:
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, apivalidation.IsNegativeErrorMsg))
	}

	vols, vErrs := validateVolumes(s.Volumes, spec.Child("volumes"))
	errs = append(errs, vErrs...)
	claims, cErrs := validatePodResourceClaims(s.ResourceClaims, spec.Child("resourceClaims"))
	errs = append(errs, cErrs...)

	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	sc := &specContext{
		volumes:       vols,
		grace:         s.TerminationGracePeriodSeconds,
		hostUsers:     s.HostUsers == nil || *s.HostUsers,
		restartPolicy: s.RestartPolicy,
		claims:        claims,
		names:         sets.New[string](),
	}
	for i := range s.InitContainers {
		fp := spec.Child("initContainers").Index(i)
		errs = append(errs, validateContainer(&s.InitContainers[i], fp, sc, true)...)
		// Init containers run one by one: only ports within one conflict.
		errs = append(errs, hostPortConflicts(s.InitContainers[i:i+1], spec.Child("initContainers"), i)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainer(&s.Containers[i], spec.Child("containers").Index(i), sc, false)...)
	}
	errs = append(errs, hostPortConflicts(s.Containers, spec.Child("containers"), 0)...)
	if len(s.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ephemeralContainers"),
			"static pods cannot have ephemeral containers: they are only added to a running pod through the API server"))
	}

	errs = append(errs, validatePodLevelResources(p, spec.Child("resources"))...)
	errs = append(errs, validateHostNetworkPorts(s, spec)...)
	errs = append(errs, validateDNS(s, spec)...)
	errs = append(errs, metavalidation.ValidateLabels(s.NodeSelector, spec.Child("nodeSelector"))...)
	errs = append(errs, validatePodSecurityContext(s, spec)...)
	errs = append(errs, validateAffinity(s.Affinity, spec.Child("affinity"))...)
	for i, g := range s.ReadinessGates {
		errs = append(errs, qualifiedName(string(g.ConditionType), spec.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	if len(s.SchedulingGates) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("schedulingGates"),
			"static pods are bound to their node and cannot wait for scheduling gates"))
	}
	errs = append(errs, validateTopologySpreadConstraints(s.TopologySpreadConstraints, spec.Child("topologySpreadConstraints"))...)
	if s.ServiceAccountName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(s.ServiceAccountName, false) {
			errs = append(errs, field.Invalid(spec.Child("serviceAccountName"), s.ServiceAccountName, msg))
		}
	}
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > math.MaxInt32) {
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if s.Hostname != "" {
		errs = append(errs, dnsLabel(s.Hostname, spec.Child("hostname"))...)
	}
	if s.Subdomain != "" {
		errs = append(errs, dnsLabel(s.Subdomain, spec.Child("subdomain"))...)
	}
	if h := s.HostnameOverride; h != nil {
		errs = append(errs, dnsSubdomain(*h, spec.Child("hostnameOverride"))...)
		if len(*h) > 64 {
			errs = append(errs, field.TooLong(spec.Child("hostnameOverride"), "", 64))
		}
		if s.SetHostnameAsFQDN != nil && *s.SetHostnameAsFQDN {
			errs = append(errs, field.Invalid(spec.Child("hostnameOverride"), *h, "cannot be set when setHostnameAsFQDN is true"))
		}
	}
	errs = append(errs, validateTolerations(s.Tolerations, spec.Child("tolerations"))...)
	for i, a := range s.HostAliases {
		fp := spec.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIP(fp.Child("ip"), a.IP)...)
		for j, h := range a.Hostnames {
			errs = append(errs, dnsSubdomain(h, fp.Child("hostnames").Index(j))...)
		}
	}
	if s.PriorityClassName != "" {
		errs = append(errs, dnsSubdomain(s.PriorityClassName, spec.Child("priorityClassName"))...)
	}
	if s.RuntimeClassName != nil {
		errs = append(errs, dnsSubdomain(*s.RuntimeClassName, spec.Child("runtimeClassName"))...)
	}
	if pp := s.PreemptionPolicy; pp != nil {
		switch *pp {
		case v1.PreemptLowerPriority, v1.PreemptNever:
		case "":
			errs = append(errs, field.Required(spec.Child("preemptionPolicy"), ""))
		default:
			errs = append(errs, field.NotSupported(spec.Child("preemptionPolicy"), *pp, []v1.PreemptionPolicy{v1.PreemptLowerPriority, v1.PreemptNever}))
		}
	}
	for _, name := range sortedResourceNames(s.Overhead) {
		fp := spec.Child("overhead").Key(string(name))
		errs = append(errs, validateContainerResourceName(name, fp)...)
		errs = append(errs, validateQuantity(name, s.Overhead[name], fp)...)
	}
	errs = append(errs, validateOS(s, spec)...)
	return errs
}

// validateHostNetworkPorts: on the host network a container binds its
// containerPort on the host, so hostPort (defaulted to it) must match.
func validateHostNetworkPorts(s *v1.PodSpec, spec *field.Path) field.ErrorList {
	if !s.HostNetwork {
		return nil
	}
	var errs field.ErrorList
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
		for i, c := range list.cs {
			for j, port := range c.Ports {
				if port.HostPort != port.ContainerPort {
					errs = append(errs, field.Invalid(spec.Child(list.name).Index(i).Child("ports").Index(j).Child("hostPort"),
						port.HostPort, "must match `containerPort` when `hostNetwork` is true"))
				}
			}
		}
	}
	return errs
}

// hostPortConflicts reports a (protocol, hostIP, hostPort) used twice among
// containers; first is the index of cs[0] in its list.
func hostPortConflicts(cs []v1.Container, fp *field.Path, first int) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range cs {
		for j, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			k := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(k) {
				errs = append(errs, field.Duplicate(fp.Index(first+i).Child("ports").Index(j).Child("hostPort"), k))
			}
			seen.Insert(k)
		}
	}
	return errs
}

const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

func validateDNS(s *v1.PodSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	policies := []v1.DNSPolicy{v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone}
	switch s.DNSPolicy {
	case v1.DNSClusterFirstWithHostNet, v1.DNSClusterFirst, v1.DNSDefault, v1.DNSNone:
	case "":
		errs = append(errs, field.Required(spec.Child("dnsPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(spec.Child("dnsPolicy"), s.DNSPolicy, policies))
	}
	fp := spec.Child("dnsConfig")
	cfg := s.DNSConfig
	if s.DNSPolicy == v1.DNSNone {
		if cfg == nil {
			return append(errs, field.Required(fp, "must provide `dnsConfig` when `dnsPolicy` is None"))
		}
		if len(cfg.Nameservers) == 0 {
			return append(errs, field.Required(fp.Child("nameservers"), "must provide at least one DNS nameserver when `dnsPolicy` is None"))
		}
	}
	if cfg == nil {
		return errs
	}
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(fp.Child("nameservers"), cfg.Nameservers,
			fmt.Sprintf("must not have more than %d nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(fp.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(fp.Child("searches"), cfg.Searches,
			fmt.Sprintf("must not have more than %d search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(fp.Child("searches"), cfg.Searches,
			fmt.Sprintf("must not have more than %d characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, search := range cfg.Searches {
		if search == "." {
			continue // the root domain (relaxed DNS search validation, GA)
		}
		search = strings.TrimSuffix(search, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(search) {
			errs = append(errs, field.Invalid(fp.Child("searches").Index(i), search, msg))
		}
	}
	for i, o := range cfg.Options {
		if o.Name == "" {
			errs = append(errs, field.Required(fp.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

func validateOS(s *v1.PodSpec, spec *field.Path) field.ErrorList {
	if s.OS == nil {
		return nil
	}
	fp := spec.Child("os", "name")
	switch s.OS.Name {
	case v1.Linux:
	case v1.Windows:
		return nil
	case "":
		return field.ErrorList{field.Required(fp, "")}
	default:
		return field.ErrorList{field.NotSupported(fp, s.OS.Name, []v1.OSName{v1.Linux, v1.Windows})}
	}
	var errs field.ErrorList
	if s.SecurityContext != nil && s.SecurityContext.WindowsOptions != nil {
		errs = append(errs, field.Forbidden(spec.Child("securityContext", "windowsOptions"), "windows options cannot be set for a linux pod"))
	}
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
		for i, c := range list.cs {
			if c.SecurityContext != nil && c.SecurityContext.WindowsOptions != nil {
				errs = append(errs, field.Forbidden(spec.Child(list.name).Index(i).Child("securityContext", "windowsOptions"),
					"windows options cannot be set for a linux pod"))
			}
		}
	}
	return errs
}

func validatePodResourceClaims(claims []v1.PodResourceClaim, fp *field.Path) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, c := range claims {
		cp := fp.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(cp.Child("name"), ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		default:
			errs = append(errs, dnsLabel(c.Name, cp.Child("name"))...)
			names.Insert(c.Name)
		}
		switch {
		case c.ResourceClaimName != nil && c.ResourceClaimTemplateName != nil:
			errs = append(errs, field.Invalid(cp, c.Name, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
		case c.ResourceClaimName == nil && c.ResourceClaimTemplateName == nil:
			errs = append(errs, field.Invalid(cp, c.Name, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		case c.ResourceClaimName != nil:
			errs = append(errs, dnsSubdomain(*c.ResourceClaimName, cp.Child("resourceClaimName"))...)
		default:
			errs = append(errs, dnsSubdomain(*c.ResourceClaimTemplateName, cp.Child("resourceClaimTemplateName"))...)
		}
	}
	return names, errs
}

func dnsLabel(v string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(fp, v, msg))
	}
	return errs
}

func dnsSubdomain(v string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(fp, v, msg))
	}
	return errs
}

func qualifiedName(v string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(fp, v, msg))
	}
	return errs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sortedResourceNames(l v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}
