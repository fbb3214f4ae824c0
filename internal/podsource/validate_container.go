package podsource

import (
	"fmt"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
)

// maxTerminationMessagePathLen bounds terminationMessagePath (PATH_MAX).
const maxTerminationMessagePathLen = 4096

// validateContainer checks one init (init == true) or regular container.
func validateContainer(c *v1.Container, fp *field.Path, sc *specContext, init bool) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(fp.Child("name"), ""))
	} else {
		errs = append(errs, dnsLabel(c.Name, fp.Child("name"))...)
	}
	if sc.names.Has(c.Name) {
		errs = append(errs, field.Duplicate(fp.Child("name"), c.Name))
	} else if c.Name != "" {
		sc.names.Insert(c.Name)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(fp.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(fp.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	switch c.ImagePullPolicy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	case "":
		errs = append(errs, field.Required(fp.Child("imagePullPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(fp.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever}))
	}
	switch c.TerminationMessagePolicy {
	case v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(fp.Child("terminationMessagePolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(fp.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]v1.TerminationMessagePolicy{v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError}))
	}
	// The API server leaves terminationMessagePath to the runtime; the
	// agent bind-mounts a file there, so it must be an absolute path.
	switch tmp := c.TerminationMessagePath; {
	case tmp == "":
		errs = append(errs, field.Required(fp.Child("terminationMessagePath"), ""))
	case len(tmp) > maxTerminationMessagePathLen:
		errs = append(errs, field.TooLong(fp.Child("terminationMessagePath"), "", maxTerminationMessagePathLen))
	case !path.IsAbs(tmp):
		errs = append(errs, field.Invalid(fp.Child("terminationMessagePath"), tmp, "must be an absolute path"))
	}
	errs = append(errs, validatePorts(c.Ports, fp.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, fp.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fp.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c, sc.volumes, fp.Child("volumeMounts"))...)
	errs = append(errs, validateVolumeDevices(c, sc.volumes, fp.Child("volumeDevices"))...)
	errs = append(errs, validateResources(&c.Resources, fp.Child("resources"), validateContainerResourceName)...)
	errs = append(errs, validateResourceClaimRefs(c.Resources.Claims, sc.claims, fp.Child("resources", "claims"))...)
	errs = append(errs, validateResizePolicy(c.ResizePolicy, sc.restartPolicy, fp.Child("resizePolicy"))...)
	errs = append(errs, validateSecurityContext(c.SecurityContext, sc.hostUsers, fp.Child("securityContext"))...)

	if len(c.RestartPolicyRules) > 0 {
		errs = append(errs, field.Forbidden(fp.Child("restartPolicyRules"), "per-container restart rules are not supported by this agent"))
	}
	sidecar := false
	if c.RestartPolicy != nil {
		if !init {
			errs = append(errs, field.Forbidden(fp.Child("restartPolicy"), "may not be set for non-init containers"))
		} else if *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(fp.Child("restartPolicy"), *c.RestartPolicy,
				[]v1.ContainerRestartPolicy{v1.ContainerRestartPolicyAlways}))
		} else {
			sidecar = true
		}
	}
	if init && !sidecar {
		for _, f := range []struct {
			name string
			set  bool
		}{{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil}} {
			if f.set {
				errs = append(errs, field.Forbidden(fp.Child(f.name), "may not be set for init containers without restartPolicy=Always"))
			}
		}
		return errs
	}
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			errs = append(errs, validateHandler(lifecycleHandler(l.PostStart), sc.grace, fp.Child("lifecycle", "postStart"))...)
		}
		if l.PreStop != nil {
			errs = append(errs, validateHandler(lifecycleHandler(l.PreStop), sc.grace, fp.Child("lifecycle", "preStop"))...)
		}
	}
	errs = append(errs, validateProbe(c.LivenessProbe, sc.grace, fp.Child("livenessProbe"), true)...)
	errs = append(errs, validateProbe(c.ReadinessProbe, sc.grace, fp.Child("readinessProbe"), false)...)
	errs = append(errs, validateProbe(c.StartupProbe, sc.grace, fp.Child("startupProbe"), true)...)
	return errs
}

func validatePorts(ports []v1.ContainerPort, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		pp := fp.Index(i)
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.HostIP != "" {
			errs = append(errs, validation.IsValidIP(pp.Child("hostIP"), port.HostIP)...)
		}
		if port.Name != "" {
			msgs := validation.IsValidPortName(port.Name)
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if len(msgs) == 0 && names.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			names.Insert(port.Name)
		}
		switch port.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		case "":
			errs = append(errs, field.Required(pp.Child("protocol"), ""))
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []v1.Protocol{v1.ProtocolSCTP, v1.ProtocolTCP, v1.ProtocolUDP}))
		}
	}
	return errs
}

// envFieldPaths are the pod fields an env var may read (downward API).
var envFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
	"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")

// volumeFieldPaths are the pod fields a downwardAPI volume may project.
var volumeFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.labels", "metadata.annotations", "metadata.uid")

var resourceFieldPaths = sets.New("limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage")

func validateEnv(env []v1.EnvVar, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		ep := fp.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(ep.Child("name"), e.Name, msg))
			}
		}
		vf := e.ValueFrom
		if vf == nil {
			continue
		}
		vp := ep.Child("valueFrom")
		n := 0
		if vf.FieldRef != nil {
			n++
			errs = append(errs, validateFieldSelector(vf.FieldRef, envFieldPaths, vp.Child("fieldRef"))...)
		}
		if vf.ResourceFieldRef != nil {
			n++
			errs = append(errs, validateResourceFieldSelector(vf.ResourceFieldRef, false, vp.Child("resourceFieldRef"))...)
		}
		if vf.ConfigMapKeyRef != nil {
			n++
			errs = append(errs, validateKeySelector(vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key, vp.Child("configMapKeyRef"))...)
		}
		if vf.SecretKeyRef != nil {
			n++
			errs = append(errs, validateKeySelector(vf.SecretKeyRef.Name, vf.SecretKeyRef.Key, vp.Child("secretKeyRef"))...)
		}
		if vf.FileKeyRef != nil {
			n++
		}
		switch {
		case n == 0:
			errs = append(errs, field.Invalid(vp, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
		case e.Value != "":
			errs = append(errs, field.Invalid(vp, "", "may not be specified when `value` is not empty"))
		case n > 1:
			errs = append(errs, field.Invalid(vp, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateEnvFrom(from []v1.EnvFromSource, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range from {
		ip := fp.Index(i)
		if f.Prefix != "" {
			for _, msg := range validation.IsEnvVarName(f.Prefix) {
				errs = append(errs, field.Invalid(ip.Child("prefix"), f.Prefix, msg))
			}
		}
		n := 0
		if f.ConfigMapRef != nil {
			n++
			errs = append(errs, validateRefName(f.ConfigMapRef.Name, ip.Child("configMapRef", "name"))...)
		}
		if f.SecretRef != nil {
			n++
			errs = append(errs, validateRefName(f.SecretRef.Name, ip.Child("secretRef", "name"))...)
		}
		if n == 0 {
			errs = append(errs, field.Invalid(ip, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			errs = append(errs, field.Invalid(ip, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateRefName(name string, fp *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fp, "")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, true) {
		errs = append(errs, field.Invalid(fp, name, msg))
	}
	return errs
}

func validateKeySelector(name, key string, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(fp.Child("name"), name, msg))
	}
	if key == "" {
		return append(errs, field.Required(fp.Child("key"), ""))
	}
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(fp.Child("key"), key, msg))
	}
	return errs
}

// validateFieldSelector checks a downward API fieldRef: apiVersion v1 (the
// default) and one of allowed, or a subscripted label or annotation.
func validateFieldSelector(fs *v1.ObjectFieldSelector, allowed sets.Set[string], fp *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(fp.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(fp.Child("fieldPath"), "")}
	}
	if fs.APIVersion != "v1" {
		return field.ErrorList{field.Invalid(fp.Child("fieldPath"), fs.FieldPath,
			fmt.Sprintf("error converting fieldPath: unsupported version %q", fs.APIVersion))}
	}
	if base, sub, ok := splitSubscript(fs.FieldPath); ok {
		switch base {
		case "metadata.annotations":
			return qualifiedName(strings.ToLower(sub), fp)
		case "metadata.labels":
			return qualifiedName(sub, fp)
		}
		return field.ErrorList{field.Invalid(fp, base, "does not support subscript")}
	}
	if !allowed.Has(fs.FieldPath) {
		return field.ErrorList{field.NotSupported(fp.Child("fieldPath"), fs.FieldPath, sets.List(allowed))}
	}
	return nil
}

// splitSubscript splits "metadata.labels['key']".
func splitSubscript(p string) (base, sub string, ok bool) {
	if !strings.HasSuffix(p, "']") {
		return p, "", false
	}
	s := strings.TrimSuffix(p, "']")
	i := strings.Index(s, "['")
	if i < 0 {
		return p, "", false
	}
	if sub = s[i+2:]; sub == "" {
		return p, "", false
	}
	return s[:i], sub, true
}

func validateResourceFieldSelector(rf *v1.ResourceFieldSelector, volume bool, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case volume && rf.ContainerName == "":
		errs = append(errs, field.Required(fp.Child("containerName"), ""))
	case rf.Resource == "":
		errs = append(errs, field.Required(fp.Child("resource"), ""))
	case !resourceFieldPaths.Has(rf.Resource) && !strings.HasPrefix(rf.Resource, "requests.hugepages-") &&
		!strings.HasPrefix(rf.Resource, "limits.hugepages-"):
		errs = append(errs, field.NotSupported(fp.Child("resource"), rf.Resource, sets.List(resourceFieldPaths)))
	}
	if rf.Divisor.IsZero() {
		return errs
	}
	d := rf.Divisor.String()
	if strings.HasSuffix(rf.Resource, ".cpu") {
		if d != "1m" && d != "1" {
			errs = append(errs, field.Invalid(fp.Child("divisor"), rf.Resource, "only divisor's values 1m and 1 are supported with the cpu resource"))
		}
	} else if !sets.New("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei").Has(d) {
		errs = append(errs, field.Invalid(fp.Child("divisor"), rf.Resource,
			"only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with this resource"))
	}
	return errs
}

// validateResources checks requests and limits: resource names, values
// >= 0 (integers for extended resources), request <= limit (== for
// resources that cannot be overcommitted: hugepages, extended resources),
// hugepages in whole pages and only beside cpu or memory.
func validateResources(r *v1.ResourceRequirements, fp *field.Path, nameFn func(v1.ResourceName, *field.Path) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := fp.Child("limits"), fp.Child("requests")
	cpuOrMemory, hugePages := false, false
	for _, name := range sortedResourceNames(r.Limits) {
		q, p := r.Limits[name], limPath.Key(string(name))
		errs = append(errs, nameFn(name, p)...)
		errs = append(errs, validateQuantity(name, q, p)...)
		if isHugePages(name) {
			hugePages = true
			errs = append(errs, validateHugePages(name, q, p)...)
		}
		cpuOrMemory = cpuOrMemory || name == v1.ResourceCPU || name == v1.ResourceMemory
	}
	for _, name := range sortedResourceNames(r.Requests) {
		q, p := r.Requests[name], reqPath.Key(string(name))
		errs = append(errs, nameFn(name, p)...)
		errs = append(errs, validateQuantity(name, q, p)...)
		if limit, ok := r.Limits[name]; ok {
			if !overcommitAllowed(name) && q.Cmp(limit) != 0 {
				errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			} else if q.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		} else if !overcommitAllowed(name) {
			errs = append(errs, field.Required(limPath.Key(string(name)), "Limit must be set for non overcommitable resources"))
		}
		if isHugePages(name) {
			hugePages = true
			errs = append(errs, validateHugePages(name, q, p)...)
		}
		cpuOrMemory = cpuOrMemory || name == v1.ResourceCPU || name == v1.ResourceMemory
	}
	if hugePages && !cpuOrMemory {
		errs = append(errs, field.Forbidden(fp, "HugePages require cpu or memory"))
	}
	return errs
}

// validateQuantity: >= 0, and a whole number for extended resources.
func validateQuantity(name v1.ResourceName, q resource.Quantity, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(fp, q.String(), apivalidation.IsNegativeErrorMsg))
	}
	if isExtendedResource(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(fp, q.String(), "must be an integer"))
	}
	return errs
}

// validateHugePages: the amount is a positive whole multiple of the page
// size named by the resource (hugepages-2Mi: multiples of 2Mi).
func validateHugePages(name v1.ResourceName, q resource.Quantity, fp *field.Path) field.ErrorList {
	size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), v1.ResourceHugePagesPrefix))
	if err == nil && size.Sign() > 0 && size.MilliValue()%1000 == 0 && size.Value() > 0 && q.Value()%size.Value() == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(fp, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name))}
}

// validateContainerResourceName: cpu, memory, ephemeral-storage,
// hugepages-<size>, or a qualified extended resource name (example.com/gpu).
func validateContainerResourceName(name v1.ResourceName, fp *field.Path) field.ErrorList {
	s := string(name)
	if msgs := validation.IsQualifiedName(s); len(msgs) > 0 {
		var errs field.ErrorList
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(fp, s, msg))
		}
		return errs
	}
	if !strings.Contains(s, "/") {
		switch {
		case name == v1.ResourceCPU, name == v1.ResourceMemory, name == v1.ResourceEphemeralStorage, isHugePages(name):
			return nil
		}
		return field.ErrorList{field.Invalid(fp, s, "must be a standard resource for containers")}
	}
	if !isNativeResource(name) && !isExtendedResource(name) {
		return field.ErrorList{field.Invalid(fp, s, "doesn't follow extended resource name standard")}
	}
	return nil
}

func isHugePages(name v1.ResourceName) bool {
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// isNativeResource: no domain, or a kubernetes.io one.
func isNativeResource(name v1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), v1.ResourceDefaultNamespacePrefix)
}

// isExtendedResource: a device-plugin or operator resource (example.com/gpu).
func isExtendedResource(name v1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// overcommitAllowed: request may be below limit (not hugepages or
// extended resources).
func overcommitAllowed(name v1.ResourceName) bool {
	return isNativeResource(name) && !isHugePages(name)
}

func validateResourceClaimRefs(claims []v1.ResourceClaim, podClaims sets.Set[string], fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range claims {
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(fp.Index(i), ""))
			continue
		case !podClaims.Has(c.Name):
			e := field.NotFound(fp.Index(i), c.Name)
			e.Detail = "must be one of the names in pod.spec.resourceClaims"
			errs = append(errs, e)
		}
		key := c.Name + "/" + c.Request
		if seen.Has(key) {
			errs = append(errs, field.Duplicate(fp.Index(i), key))
		}
		seen.Insert(key)
	}
	return errs
}

func validateResizePolicy(policies []v1.ContainerResizePolicy, podPolicy v1.RestartPolicy, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[v1.ResourceName]()
	for i, p := range policies {
		if seen.Has(p.ResourceName) {
			errs = append(errs, field.Duplicate(fp.Index(i), p.ResourceName))
		}
		seen.Insert(p.ResourceName)
		switch p.ResourceName {
		case v1.ResourceCPU, v1.ResourceMemory:
		case "":
			errs = append(errs, field.Required(fp.Index(i).Child("resourceName"), ""))
		default:
			errs = append(errs, field.NotSupported(fp.Index(i).Child("resourceName"), p.ResourceName, []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}))
		}
		switch p.RestartPolicy {
		case v1.NotRequired, v1.RestartContainer:
		case "":
			errs = append(errs, field.Required(fp.Index(i).Child("restartPolicy"), ""))
		default:
			errs = append(errs, field.NotSupported(fp.Index(i).Child("restartPolicy"), p.RestartPolicy,
				[]v1.ResourceResizeRestartPolicy{v1.NotRequired, v1.RestartContainer}))
		}
		if podPolicy == v1.RestartPolicyNever && p.RestartPolicy == v1.RestartContainer {
			errs = append(errs, field.Invalid(fp.Index(i).Child("restartPolicy"), p.RestartPolicy, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
		}
	}
	return errs
}

// handler is the common shape of probe and lifecycle handlers.
type handler struct {
	exec      *v1.ExecAction
	httpGet   *v1.HTTPGetAction
	tcpSocket *v1.TCPSocketAction
	grpc      *v1.GRPCAction
	sleep     *v1.SleepAction
}

func lifecycleHandler(h *v1.LifecycleHandler) handler {
	return handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep}
}

// validateHandler: exactly one kind, each well formed. A sleep may not
// outlast the pod's grace period.
func validateHandler(h handler, grace *int64, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	one := func(set bool, name string, check func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n++; n > 1 {
			errs = append(errs, field.Forbidden(fp.Child(name), "may not specify more than 1 handler type"))
			return
		}
		errs = append(errs, check(fp.Child(name))...)
	}
	one(h.exec != nil, "exec", func(p *field.Path) field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	one(h.httpGet != nil, "httpGet", func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if h.httpGet.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		errs = append(errs, validatePortNumOrName(h.httpGet.Port, p.Child("port"))...)
		if h.httpGet.Scheme != v1.URISchemeHTTP && h.httpGet.Scheme != v1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(p.Child("scheme"), h.httpGet.Scheme, []v1.URIScheme{v1.URISchemeHTTP, v1.URISchemeHTTPS}))
		}
		for _, hdr := range h.httpGet.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(hdr.Name) {
				errs = append(errs, field.Invalid(p.Child("httpHeaders"), hdr.Name, msg))
			}
		}
		return errs
	})
	one(h.tcpSocket != nil, "tcpSocket", func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(h.tcpSocket.Port, p.Child("port"))
	})
	one(h.grpc != nil, "grpc", func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(intstr.FromInt32(h.grpc.Port), p.Child("port"))
	})
	one(h.sleep != nil, "sleep", func(p *field.Path) field.ErrorList {
		if grace != nil && (h.sleep.Seconds < 0 || h.sleep.Seconds > *grace) {
			return field.ErrorList{field.Invalid(p.Child("seconds"), h.sleep.Seconds,
				fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *grace))}
		}
		return nil
	})
	if n == 0 {
		errs = append(errs, field.Required(fp, "must specify a handler type"))
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, fp *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(int(port.IntVal)) {
			errs = append(errs, field.Invalid(fp, port.IntVal, msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(fp, port.StrVal, msg))
		}
	default:
		errs = append(errs, field.Invalid(fp, port.String(), "must be a port number or name"))
	}
	return errs
}

// validateProbe: one handler, non-negative initial delay, the other
// durations and thresholds at least 1 (they are defaulted when unset),
// successThreshold 1 for liveness and startup probes, a positive probe
// grace period and none on readiness probes.
func validateProbe(pr *v1.Probe, grace *int64, fp *field.Path, livenessOrStartup bool) field.ErrorList {
	if pr == nil {
		return nil
	}
	h := handler{exec: pr.Exec, httpGet: pr.HTTPGet, tcpSocket: pr.TCPSocket, grpc: pr.GRPC}
	errs := validateHandler(h, grace, fp)
	if pr.InitialDelaySeconds < 0 {
		errs = append(errs, field.Invalid(fp.Child("initialDelaySeconds"), pr.InitialDelaySeconds, apivalidation.IsNegativeErrorMsg))
	}
	for _, f := range []struct {
		name string
		v    int32
	}{{"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold}} {
		if f.v < 1 {
			errs = append(errs, field.Invalid(fp.Child(f.name), f.v, "must be greater than or equal to 1"))
		}
	}
	if livenessOrStartup && pr.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(fp.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		if !livenessOrStartup {
			errs = append(errs, field.Invalid(fp.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
		} else if *g <= 0 {
			errs = append(errs, field.Invalid(fp.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	return errs
}

// validatePodLevelResources checks spec.resources: only the resources
// that can be set for a whole pod, values as for containers, and the
// containers' aggregated requests and each container's limits within the
// pod's.
func validatePodLevelResources(p *v1.Pod, fp *field.Path) field.ErrorList {
	r := p.Spec.Resources
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if len(r.Claims) > 0 {
		errs = append(errs, field.Forbidden(fp.Child("claims"), "claims cannot be set for Resources at pod-level"))
	}
	errs = append(errs, validateResources(r, fp, validatePodResourceName)...)
	agg := resourcehelper.AggregateContainerRequests(p, resourcehelper.PodResourcesOptions{})
	for _, name := range sortedResourceNames(agg) {
		podReq, ok := r.Requests[name]
		if ctrReq := agg[name]; ok && ctrReq.Cmp(podReq) > 0 {
			errs = append(errs, field.Invalid(fp.Child("requests").Key(string(name)), podReq.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container requests of %s", ctrReq.String())))
		}
	}
	for i, c := range p.Spec.Containers {
		for _, name := range sortedResourceNames(c.Resources.Limits) {
			if podLim, ok := r.Limits[name]; ok {
				if ctrLim := c.Resources.Limits[name]; ctrLim.Cmp(podLim) > 0 {
					errs = append(errs, field.Invalid(field.NewPath("spec", "containers").Index(i).Child("resources", "limits").Key(string(name)),
						ctrLim.String(), fmt.Sprintf("must be less than or equal to pod limits of %s", podLim.String())))
				}
			}
		}
	}
	return errs
}

func validatePodResourceName(name v1.ResourceName, fp *field.Path) field.ErrorList {
	if msgs := validation.IsQualifiedName(string(name)); len(msgs) > 0 {
		var errs field.ErrorList
		for _, msg := range msgs {
			errs = append(errs, field.Invalid(fp, string(name), msg))
		}
		return errs
	}
	if !resourcehelper.IsSupportedPodLevelResource(name) {
		return field.ErrorList{field.NotSupported(fp, name, []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, "hugepages-<size>"})}
	}
	return nil
}
