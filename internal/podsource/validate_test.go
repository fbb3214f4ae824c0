package podsource

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// validPod is a defaulted pod that passes validation. Tests DeepCopy it.
var validPod = func() *v1.Pod {
	p := manifestPod.DeepCopy()
	p.Spec.Volumes = []v1.Volume{
		{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/var/lib/x"}}},
	}
	c := &p.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "my.var-1", Value: "x"}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "host", MountPath: "/host"}}
	c.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 80, HostPort: 8080}}
	c.Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}
	DefaultStatic(p, "node1", pod.SourceFile)
	return p
}()

// fieldErr is the part of a field.Error a test compares.
type fieldErr struct {
	Type  field.ErrorType
	Field string
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *v1.Pod)
		want   []fieldErr
	}{
		{name: "valid pod", mutate: func(*v1.Pod) {}},
		{
			name:   "bad container name",
			mutate: func(p *v1.Pod) { p.Spec.Containers[1].Name = "Side_Car" },
			want:   []fieldErr{{field.ErrorTypeInvalid, "spec.containers[1].name"}},
		},
		{
			name:   "bad init container name",
			mutate: func(p *v1.Pod) { p.Spec.InitContainers[0].Name = "-setup" },
			want:   []fieldErr{{field.ErrorTypeInvalid, "spec.initContainers[0].name"}},
		},
		{
			name:   "container name duplicated across init and regular containers",
			mutate: func(p *v1.Pod) { p.Spec.Containers[1].Name = "setup" },
			want:   []fieldErr{{field.ErrorTypeDuplicate, "spec.containers[1].name"}},
		},
		{
			name:   "duplicate regular container names",
			mutate: func(p *v1.Pod) { p.Spec.Containers[1].Name = "app" },
			want:   []fieldErr{{field.ErrorTypeDuplicate, "spec.containers[1].name"}},
		},
		{
			name:   "missing image",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = "" },
			want:   []fieldErr{{field.ErrorTypeRequired, "spec.containers[0].image"}},
		},
		{
			name:   "no containers",
			mutate: func(p *v1.Pod) { p.Spec.Containers = nil },
			want:   []fieldErr{{field.ErrorTypeRequired, "spec.containers"}},
		},
		{
			name:   "container port zero",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 0 },
			want:   []fieldErr{{field.ErrorTypeInvalid, "spec.containers[0].ports[0].containerPort"}},
		},
		{
			name:   "host port out of range",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].HostPort = 70000 },
			want:   []fieldErr{{field.ErrorTypeInvalid, "spec.containers[0].ports[0].hostPort"}},
		},
		{
			name:   "bad port protocol",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].Protocol = "ICMP" },
			want:   []fieldErr{{field.ErrorTypeNotSupported, "spec.containers[0].ports[0].protocol"}},
		},
		{
			name: "duplicate port name",
			mutate: func(p *v1.Pod) {
				c := &p.Spec.Containers[0]
				c.Ports = append(c.Ports, v1.ContainerPort{Name: "http", ContainerPort: 81, Protocol: v1.ProtocolTCP})
			},
			want: []fieldErr{{field.ErrorTypeDuplicate, "spec.containers[0].ports[1].name"}},
		},
		{
			name:   "bad env name",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].Env[1].Name = "1BAD" },
			want:   []fieldErr{{field.ErrorTypeInvalid, "spec.containers[0].env[1].name"}},
		},
		{
			name:   "mount of an unknown volume",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[1].Name = "nope" },
			want:   []fieldErr{{field.ErrorTypeNotFound, "spec.containers[0].volumeMounts[1].name"}},
		},
		{
			name:   "mount without a path",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].VolumeMounts[0].MountPath = "" },
			want:   []fieldErr{{field.ErrorTypeRequired, "spec.containers[0].volumeMounts[0].mountPath"}},
		},
		{
			name:   "duplicate volume",
			mutate: func(p *v1.Pod) { p.Spec.Volumes[1].Name = "data" },
			want: []fieldErr{
				{field.ErrorTypeDuplicate, "spec.volumes[1].name"},
				// The mount of the renamed volume no longer resolves.
				{field.ErrorTypeNotFound, "spec.containers[0].volumeMounts[1].name"},
			},
		},
		{
			name:   "hostPath without a path",
			mutate: func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Path = "" },
			want:   []fieldErr{{field.ErrorTypeRequired, "spec.volumes[1].hostPath.path"}},
		},
		{
			name: "request above limit",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("500m")
			},
			want: []fieldErr{{field.ErrorTypeInvalid, "spec.containers[0].resources.requests[cpu]"}},
		},
		{
			name: "negative request",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[1].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("-1")}
			},
			want: []fieldErr{{field.ErrorTypeInvalid, "spec.containers[1].resources.requests[memory]"}},
		},
		{
			name:   "bad restart policy",
			mutate: func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
			want:   []fieldErr{{field.ErrorTypeNotSupported, "spec.restartPolicy"}},
		},
		{
			name:   "bad pull policy",
			mutate: func(p *v1.Pod) { p.Spec.Containers[0].ImagePullPolicy = "Sometimes" },
			want:   []fieldErr{{field.ErrorTypeNotSupported, "spec.containers[0].imagePullPolicy"}},
		},
		{
			name: "negative grace period",
			mutate: func(p *v1.Pod) {
				g := int64(-1)
				p.Spec.TerminationGracePeriodSeconds = &g
			},
			want: []fieldErr{{field.ErrorTypeInvalid, "spec.terminationGracePeriodSeconds"}},
		},
		{
			name:   "bad pod name",
			mutate: func(p *v1.Pod) { p.Name = "Web_Pod" },
			want:   []fieldErr{{field.ErrorTypeInvalid, "metadata.name"}},
		},
		{
			name:   "bad label",
			mutate: func(p *v1.Pod) { p.Labels["bad key!"] = "x" },
			want:   []fieldErr{{field.ErrorTypeInvalid, "metadata.labels"}},
		},
		{
			name: "several problems are all reported",
			mutate: func(p *v1.Pod) {
				p.Spec.RestartPolicy = "Sometimes"
				p.Spec.InitContainers[0].Image = ""
				p.Spec.Containers[1].Env = []v1.EnvVar{{Name: "A=B"}}
			},
			want: []fieldErr{
				{field.ErrorTypeNotSupported, "spec.restartPolicy"},
				{field.ErrorTypeRequired, "spec.initContainers[0].image"},
				{field.ErrorTypeInvalid, "spec.containers[1].env[0].name"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod.DeepCopy()
			tt.mutate(p)
			var got []fieldErr
			for _, e := range Validate(p) {
				got = append(got, fieldErr{e.Type, e.Field})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() errors (-want +got):\n%s\nall: %v", diff, Validate(p))
			}
		})
	}
}
