package podsource

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks a defaulted pod with the rules of the API server's pod
// validation that matter to a node: names, labels, annotations, container
// names and images, ports, env names, volumes and mounts, restart policy,
// grace period and resources. It is an equivalent subset, not the whole of
// k8s.io/kubernetes/pkg/apis/core/validation, whose module cannot be
// imported cleanly outside the Kubernetes tree.
func Validate(p *v1.Pod) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	for _, msg := range apivalidation.NameIsDNSSubdomain(p.Name, false) {
		errs = append(errs, field.Invalid(meta.Child("name"), p.Name, msg))
	}
	for _, msg := range apivalidation.ValidateNamespaceName(p.Namespace, false) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), p.Namespace, msg))
	}
	errs = append(errs, metavalidation.ValidateLabels(p.Labels, meta.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(p.Annotations, meta.Child("annotations"))...)

	spec := field.NewPath("spec")
	switch p.Spec.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), p.Spec.RestartPolicy,
			[]string{string(v1.RestartPolicyAlways), string(v1.RestartPolicyOnFailure), string(v1.RestartPolicyNever)}))
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(spec.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	volumes := sets.New[string]()
	for i, v := range p.Spec.Volumes {
		fp := spec.Child("volumes").Index(i)
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(fp.Child("name"), v.Name, msg))
		}
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(fp.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
		if v.HostPath != nil && v.HostPath.Path == "" {
			errs = append(errs, field.Required(fp.Child("hostPath", "path"), ""))
		}
	}
	if len(p.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "a pod needs at least one container"))
	}
	names := sets.New[string]()
	for i := range p.Spec.InitContainers {
		errs = append(errs, validateContainer(&p.Spec.InitContainers[i], spec.Child("initContainers").Index(i), names, volumes)...)
	}
	for i := range p.Spec.Containers {
		errs = append(errs, validateContainer(&p.Spec.Containers[i], spec.Child("containers").Index(i), names, volumes)...)
	}
	return errs
}

func validateContainer(c *v1.Container, fp *field.Path, names, volumes sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(c.Name) {
		errs = append(errs, field.Invalid(fp.Child("name"), c.Name, msg))
	}
	if names.Has(c.Name) {
		errs = append(errs, field.Duplicate(fp.Child("name"), c.Name))
	}
	names.Insert(c.Name)
	if c.Image == "" {
		errs = append(errs, field.Required(fp.Child("image"), ""))
	}
	switch c.ImagePullPolicy {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	default:
		errs = append(errs, field.NotSupported(fp.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]string{string(v1.PullAlways), string(v1.PullIfNotPresent), string(v1.PullNever)}))
	}
	portNames := sets.New[string]()
	for i, port := range c.Ports {
		pp := fp.Child("ports").Index(i)
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			errs = append(errs, field.Invalid(pp.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		switch port.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, []string{"TCP", "UDP", "SCTP"}))
		}
	}
	for i, env := range c.Env {
		for _, msg := range validation.IsEnvVarName(env.Name) {
			errs = append(errs, field.Invalid(fp.Child("env").Index(i).Child("name"), env.Name, msg))
		}
	}
	for i, m := range c.VolumeMounts {
		mp := fp.Child("volumeMounts").Index(i)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mp.Child("mountPath"), ""))
		}
	}
	for name, limit := range c.Resources.Limits {
		if req, ok := c.Resources.Requests[name]; ok && req.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(fp.Child("resources", "requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		}
	}
	for name, q := range c.Resources.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(fp.Child("resources", "requests").Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}
