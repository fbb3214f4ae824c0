package podsource

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// applyAPIDefaults sets the core/v1 defaults the API server would give a
// pod created through it (k8s.io/kubernetes/pkg/apis/core/v1/defaults.go
// and the generated SetObjectDefaults_Pod), so that a pod read from a file
// is the pod the kubelet would run. Defaulting is idempotent: a defaulted
// pod is left unchanged, which keeps static pod UIDs stable.
//
// Left out: defaults that only exist for objects the agent refuses
// (ephemeral containers) or never reads (PodTemplates, Services, PVs).
func applyAPIDefaults(p *v1.Pod) {
	s := &p.Spec

	// SetDefaults_Pod: requests default to limits, per container and at
	// the pod level, so a pod giving only limits is admitted (and
	// accounted) by what it may use.
	for i := range s.InitContainers {
		defaultRequestsFromLimits(&s.InitContainers[i].Resources)
	}
	for i := range s.Containers {
		defaultRequestsFromLimits(&s.Containers[i].Resources)
	}
	if s.EnableServiceLinks == nil {
		t := v1.DefaultEnableServiceLinks
		s.EnableServiceLinks = &t
	}
	if s.HostNetwork {
		defaultHostNetworkPorts(s.InitContainers)
		defaultHostNetworkPorts(s.Containers)
	}
	if s.Resources != nil {
		defaultPodRequests(p)
	}

	// SetDefaults_PodSpec.
	if s.DNSPolicy == "" {
		s.DNSPolicy = v1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = v1.RestartPolicyAlways
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &v1.PodSecurityContext{}
	}
	if s.TerminationGracePeriodSeconds == nil {
		g := int64(v1.DefaultTerminationGracePeriodSeconds)
		s.TerminationGracePeriodSeconds = &g
	}
	if s.SchedulerName == "" {
		s.SchedulerName = v1.DefaultSchedulerName
	}

	// The generated per-field defaulters.
	for i := range s.Volumes {
		defaultVolume(&s.Volumes[i])
	}
	for i := range s.InitContainers {
		defaultContainer(&s.InitContainers[i])
	}
	for i := range s.Containers {
		defaultContainer(&s.Containers[i])
	}
	if s.Resources != nil {
		roundUpResourceList(s.Resources.Limits)
		roundUpResourceList(s.Resources.Requests)
	}
	roundUpResourceList(s.Overhead)
}

// defaultRequestsFromLimits gives every resource with a limit but no
// request a request equal to its limit.
func defaultRequestsFromLimits(r *v1.ResourceRequirements) {
	if r.Limits == nil {
		return
	}
	if r.Requests == nil {
		r.Requests = v1.ResourceList{}
	}
	for name, limit := range r.Limits {
		if _, ok := r.Requests[name]; !ok {
			r.Requests[name] = limit.DeepCopy()
		}
	}
}

// defaultHostNetworkPorts sets hostPort = containerPort where a pod on the
// host network left it unset: that is the port the container binds.
func defaultHostNetworkPorts(cs []v1.Container) {
	for i := range cs {
		for j := range cs[i].Ports {
			if cs[i].Ports[j].HostPort == 0 {
				cs[i].Ports[j].HostPort = cs[i].Ports[j].ContainerPort
			}
		}
	}
}

// defaultPodRequests fills pod-level requests when pod-level limits are
// set: from the containers' aggregated requests where containers ask for
// the resource, else from the pod-level limit.
func defaultPodRequests(p *v1.Pod) {
	res := p.Spec.Resources
	if len(res.Limits) == 0 {
		return
	}
	reqs := res.Requests
	if reqs == nil {
		reqs = v1.ResourceList{}
	}
	for name, q := range resourcehelper.AggregateContainerRequests(p, resourcehelper.PodResourcesOptions{}) {
		if _, ok := reqs[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) && overcommitAllowed(name) {
			reqs[name] = q.DeepCopy()
		}
	}
	for name, limit := range res.Limits {
		if _, ok := reqs[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
			reqs[name] = limit.DeepCopy()
		}
	}
	if len(reqs) > 0 {
		res.Requests = reqs
	}
}

func defaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil {
			defaultFieldSelector(vf.FieldRef)
		}
	}
	roundUpResourceList(c.Resources.Limits)
	roundUpResourceList(c.Resources.Requests)
	defaultProbe(c.LivenessProbe)
	defaultProbe(c.ReadinessProbe)
	defaultProbe(c.StartupProbe)
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			defaultHTTPGet(l.PostStart.HTTPGet)
		}
		if l.PreStop != nil {
			defaultHTTPGet(l.PreStop.HTTPGet)
		}
	}
}

// defaultPullPolicy is Always for ":latest" or an untagged, undigested
// reference, IfNotPresent otherwise.
func defaultPullPolicy(image string) v1.PullPolicy {
	if strings.Contains(image, "@") {
		return v1.PullIfNotPresent
	}
	last := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(last, ":")
	if i < 0 || last[i+1:] == "latest" {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// defaultProbe: timeout 1s, period 10s, success 1, failure 3 (0 means
// unset, as in the API).
func defaultProbe(pr *v1.Probe) {
	if pr == nil {
		return
	}
	if pr.TimeoutSeconds == 0 {
		pr.TimeoutSeconds = 1
	}
	if pr.PeriodSeconds == 0 {
		pr.PeriodSeconds = 10
	}
	if pr.SuccessThreshold == 0 {
		pr.SuccessThreshold = 1
	}
	if pr.FailureThreshold == 0 {
		pr.FailureThreshold = 3
	}
	defaultHTTPGet(pr.HTTPGet)
	if pr.GRPC != nil && pr.GRPC.Service == nil {
		svc := ""
		pr.GRPC.Service = &svc
	}
}

func defaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

func defaultFieldSelector(f *v1.ObjectFieldSelector) {
	if f.APIVersion == "" {
		f.APIVersion = "v1"
	}
}

// defaultVolume: a volume naming no source is an emptyDir; file modes
// 0644; hostPath type "" (no check); token projections last an hour.
func defaultVolume(vol *v1.Volume) {
	src := &vol.VolumeSource
	if len(volumeSources(src)) == 0 {
		src.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	mode := func(m **int32, def int32) {
		if *m == nil {
			d := def
			*m = &d
		}
	}
	if hp := src.HostPath; hp != nil && hp.Type == nil {
		t := v1.HostPathUnset
		hp.Type = &t
	}
	if s := src.Secret; s != nil {
		mode(&s.DefaultMode, v1.SecretVolumeSourceDefaultMode)
	}
	if c := src.ConfigMap; c != nil {
		mode(&c.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode)
	}
	if d := src.DownwardAPI; d != nil {
		mode(&d.DefaultMode, v1.DownwardAPIVolumeSourceDefaultMode)
		for i := range d.Items {
			if d.Items[i].FieldRef != nil {
				defaultFieldSelector(d.Items[i].FieldRef)
			}
		}
	}
	if pr := src.Projected; pr != nil {
		mode(&pr.DefaultMode, v1.ProjectedVolumeSourceDefaultMode)
		for i := range pr.Sources {
			ps := &pr.Sources[i]
			if ps.DownwardAPI != nil {
				for j := range ps.DownwardAPI.Items {
					if ps.DownwardAPI.Items[j].FieldRef != nil {
						defaultFieldSelector(ps.DownwardAPI.Items[j].FieldRef)
					}
				}
			}
			if t := ps.ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				e := int64(3600)
				t.ExpirationSeconds = &e
			}
		}
	}
	if is := src.ISCSI; is != nil && is.ISCSIInterface == "" {
		is.ISCSIInterface = "default"
	}
	if r := src.RBD; r != nil {
		if r.RBDPool == "" {
			r.RBDPool = "rbd"
		}
		if r.RadosUser == "" {
			r.RadosUser = "admin"
		}
		if r.Keyring == "" {
			r.Keyring = "/etc/ceph/keyring"
		}
	}
	if a := src.AzureDisk; a != nil {
		if a.CachingMode == nil {
			m := v1.AzureDataDiskCachingReadWrite
			a.CachingMode = &m
		}
		if a.Kind == nil {
			k := v1.AzureSharedBlobDisk
			a.Kind = &k
		}
		if a.FSType == nil {
			f := "ext4"
			a.FSType = &f
		}
		if a.ReadOnly == nil {
			ro := false
			a.ReadOnly = &ro
		}
	}
	if sio := src.ScaleIO; sio != nil {
		if sio.StorageMode == "" {
			sio.StorageMode = "ThinProvisioned"
		}
		if sio.FSType == "" {
			sio.FSType = "xfs"
		}
	}
	if im := src.Image; im != nil && im.PullPolicy == "" {
		im.PullPolicy = defaultPullPolicy(im.Reference)
	}
}

// roundUpResourceList rounds every quantity up to milli precision, as the
// API server stores them (SetDefaults_ResourceList).
func roundUpResourceList(l v1.ResourceList) {
	for name, q := range l {
		q.RoundUp(resource.Milli)
		l[name] = q
	}
}
