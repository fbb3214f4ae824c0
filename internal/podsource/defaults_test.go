package podsource

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// rl builds a ResourceList from name/quantity pairs.
func rl(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// sameQuantities compares resource lists by value, not representation.
var sameQuantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func TestDefaultRequestsFromLimits(t *testing.T) {
	tests := []struct {
		name string
		in   v1.ResourceRequirements
		want v1.ResourceList // requests after defaulting
	}{
		{
			name: "limits only: requests equal limits",
			in:   v1.ResourceRequirements{Limits: rl("cpu", "100", "memory", "64Gi")},
			want: rl("cpu", "100", "memory", "64Gi"),
		},
		{
			name: "an explicit request is kept",
			in:   v1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "1Gi"), Requests: rl("cpu", "500m")},
			want: rl("cpu", "500m", "memory", "1Gi"),
		},
		{
			name: "extended resource and hugepages limits become requests",
			in:   v1.ResourceRequirements{Limits: rl("example.com/gpu", "1", "hugepages-2Mi", "4Mi", "memory", "1Gi")},
			want: rl("example.com/gpu", "1", "hugepages-2Mi", "4Mi", "memory", "1Gi"),
		},
		{
			name: "requests only: left alone",
			in:   v1.ResourceRequirements{Requests: rl("cpu", "1")},
			want: rl("cpu", "1"),
		},
		{
			name: "neither",
			in:   v1.ResourceRequirements{},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := manifestPod.DeepCopy()
			p.Spec.InitContainers[0].Resources = *tt.in.DeepCopy()
			p.Spec.Containers[1].Resources = *tt.in.DeepCopy()
			applyAPIDefaults(p)
			for _, c := range []v1.Container{p.Spec.InitContainers[0], p.Spec.Containers[1]} {
				if diff := cmp.Diff(tt.want, c.Resources.Requests, sameQuantities); diff != "" {
					t.Errorf("container %s requests (-want +got):\n%s", c.Name, diff)
				}
			}
		})
	}
}

func TestDefaultPodLevelRequests(t *testing.T) {
	tests := []struct {
		name       string
		pod        v1.ResourceRequirements
		containers v1.ResourceList // requests of containers[0]
		want       v1.ResourceList
	}{
		{
			name: "no container requests: pod limits",
			pod:  v1.ResourceRequirements{Limits: rl("cpu", "4", "memory", "4Gi")},
			want: rl("cpu", "4", "memory", "4Gi"),
		},
		{
			name:       "container requests: their aggregate",
			pod:        v1.ResourceRequirements{Limits: rl("cpu", "4", "memory", "4Gi")},
			containers: rl("cpu", "1"),
			want:       rl("cpu", "1", "memory", "4Gi"),
		},
		{
			name: "explicit pod requests kept",
			pod:  v1.ResourceRequirements{Limits: rl("cpu", "4"), Requests: rl("cpu", "2")},
			want: rl("cpu", "2"),
		},
		{
			name: "requests only: left alone",
			pod:  v1.ResourceRequirements{Requests: rl("cpu", "2")},
			want: rl("cpu", "2"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := manifestPod.DeepCopy()
			p.Spec.Resources = tt.pod.DeepCopy()
			p.Spec.Containers[0].Resources.Requests = tt.containers
			applyAPIDefaults(p)
			if diff := cmp.Diff(tt.want, p.Spec.Resources.Requests, sameQuantities); diff != "" {
				t.Errorf("pod-level requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDefaultProbesAndHandlers(t *testing.T) {
	p := manifestPod.DeepCopy()
	c := &p.Spec.Containers[0]
	c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	c.ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090}}, PeriodSeconds: 3}
	c.StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}}, FailureThreshold: 30}
	c.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/quit", Port: intstr.FromInt32(80)}}}
	applyAPIDefaults(p)

	want := &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
	if diff := cmp.Diff(want, c.LivenessProbe); diff != "" {
		t.Errorf("liveness probe (-want +got):\n%s", diff)
	}
	want = &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Service: ptr.To("")}},
		TimeoutSeconds: 1, PeriodSeconds: 3, SuccessThreshold: 1, FailureThreshold: 3,
	}
	if diff := cmp.Diff(want, c.ReadinessProbe); diff != "" {
		t.Errorf("readiness probe, explicit period kept (-want +got):\n%s", diff)
	}
	if got := c.StartupProbe; got.FailureThreshold != 30 || got.PeriodSeconds != 10 {
		t.Errorf("startup probe = %+v, want failureThreshold 30 kept and period 10", got)
	}
	wantPreStop := &v1.HTTPGetAction{Path: "/quit", Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTP}
	if diff := cmp.Diff(wantPreStop, c.Lifecycle.PreStop.HTTPGet); diff != "" {
		t.Errorf("preStop httpGet (-want +got):\n%s", diff)
	}
}

func TestDefaultHostNetworkPorts(t *testing.T) {
	p := manifestPod.DeepCopy()
	p.Spec.HostNetwork = true
	p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 443, HostPort: 8443}}
	p.Spec.InitContainers[0].Ports = []v1.ContainerPort{{ContainerPort: 9000, Protocol: v1.ProtocolUDP}}
	applyAPIDefaults(p)
	want := []v1.ContainerPort{{ContainerPort: 80, HostPort: 80, Protocol: v1.ProtocolTCP}, {ContainerPort: 443, HostPort: 8443, Protocol: v1.ProtocolTCP}}
	if diff := cmp.Diff(want, p.Spec.Containers[0].Ports); diff != "" {
		t.Errorf("container ports (-want +got):\n%s", diff)
	}
	wantInit := []v1.ContainerPort{{ContainerPort: 9000, HostPort: 9000, Protocol: v1.ProtocolUDP}}
	if diff := cmp.Diff(wantInit, p.Spec.InitContainers[0].Ports); diff != "" {
		t.Errorf("init container ports (-want +got):\n%s", diff)
	}

	// Off the host network hostPort stays unset.
	q := manifestPod.DeepCopy()
	applyAPIDefaults(q)
	if got := q.Spec.Containers[0].Ports[0].HostPort; got != 0 {
		t.Errorf("hostPort without hostNetwork = %d, want 0", got)
	}
}

func TestDefaultVolumes(t *testing.T) {
	p := manifestPod.DeepCopy()
	p.Spec.Volumes = []v1.Volume{
		{Name: "none"},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}},
		{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}, DefaultMode: ptr.To[int32](0o600)}}},
		{Name: "dapi", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		{Name: "img", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "example.com/data:v1"}}},
	}
	applyAPIDefaults(p)
	v := p.Spec.Volumes
	if v[0].EmptyDir == nil || len(volumeSources(&v[0].VolumeSource)) != 1 {
		t.Errorf("volume without a source = %+v, want an emptyDir", v[0].VolumeSource)
	}
	if v[1].HostPath.Type == nil || *v[1].HostPath.Type != v1.HostPathUnset {
		t.Errorf("hostPath type = %v, want \"\" (unset)", v[1].HostPath.Type)
	}
	if m := v[2].Secret.DefaultMode; m == nil || *m != 0o644 {
		t.Errorf("secret defaultMode = %v, want 0644", m)
	}
	if m := v[3].ConfigMap.DefaultMode; m == nil || *m != 0o600 {
		t.Errorf("configMap defaultMode = %v, want the manifest's 0600", m)
	}
	if m := v[4].DownwardAPI.DefaultMode; m == nil || *m != 0o644 {
		t.Errorf("downwardAPI defaultMode = %v, want 0644", m)
	}
	if got := v[4].DownwardAPI.Items[0].FieldRef.APIVersion; got != "v1" {
		t.Errorf("downwardAPI fieldRef apiVersion = %q, want v1", got)
	}
	if m := v[5].Projected.DefaultMode; m == nil || *m != 0o644 {
		t.Errorf("projected defaultMode = %v, want 0644", m)
	}
	if e := v[5].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds; e == nil || *e != 3600 {
		t.Errorf("token expirationSeconds = %v, want 3600", e)
	}
	if got := v[6].Image.PullPolicy; got != v1.PullIfNotPresent {
		t.Errorf("image volume pullPolicy = %q, want IfNotPresent (tagged)", got)
	}
}

func TestDefaultEnvFieldRefAndRounding(t *testing.T) {
	p := manifestPod.DeepCopy()
	c := &p.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	c.Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.0001")}
	p.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse("0.0005")}
	applyAPIDefaults(p)
	if got := c.Env[0].ValueFrom.FieldRef.APIVersion; got != "v1" {
		t.Errorf("env fieldRef apiVersion = %q, want v1", got)
	}
	for _, q := range []resource.Quantity{c.Resources.Limits[v1.ResourceCPU], c.Resources.Requests[v1.ResourceCPU]} {
		if got := q.String(); got != "1m" {
			t.Errorf("cpu 0.0001 rounded to %q, want 1m (milli precision, rounded up)", got)
		}
	}
	if got := p.Spec.Overhead[v1.ResourceMemory]; got.String() != "1m" {
		t.Errorf("overhead memory 0.0005 rounded to %q, want 1m", got.String())
	}
}

func TestDefaultSpecFields(t *testing.T) {
	p := manifestPod.DeepCopy()
	applyAPIDefaults(p)
	s := p.Spec
	if s.SecurityContext == nil {
		t.Error("securityContext not defaulted to {}")
	}
	if s.SchedulerName != v1.DefaultSchedulerName || s.DNSPolicy != v1.DNSClusterFirst || s.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("schedulerName/dnsPolicy/restartPolicy = %q/%q/%q", s.SchedulerName, s.DNSPolicy, s.RestartPolicy)
	}
	if s.EnableServiceLinks == nil || !*s.EnableServiceLinks {
		t.Errorf("enableServiceLinks = %v, want true", s.EnableServiceLinks)
	}
	if c := s.InitContainers[0]; c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != v1.TerminationMessageReadFile {
		t.Errorf("init container termination message = %q/%q", c.TerminationMessagePath, c.TerminationMessagePolicy)
	}
}

// Defaulting a defaulted pod changes nothing: static pod UIDs, a hash of
// the defaulted pod, stay stable across re-reads.
func TestDefaultsIdempotent(t *testing.T) {
	p := manifestPod.DeepCopy()
	c := &p.Spec.Containers[0]
	c.Resources.Limits = rl("cpu", "1.00001", "memory", "1Gi")
	c.LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}}}
	p.Spec.HostNetwork = true
	p.Spec.Resources = &v1.ResourceRequirements{Limits: rl("cpu", "4")}
	p.Spec.Volumes = []v1.Volume{{Name: "v"}}
	applyAPIDefaults(p)
	once := p.DeepCopy()
	applyAPIDefaults(p)
	if diff := cmp.Diff(once, p); diff != "" {
		t.Errorf("second defaulting changed the pod (-first +second):\n%s", diff)
	}
}
