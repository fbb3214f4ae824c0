package podsource

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

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
	tests := []validateCase{
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
	runValidateCases(t, tests)
}

// validateCase mutates a copy of validPod and lists the errors Validate
// must report, in order.
type validateCase = struct {
	name   string
	mutate func(p *v1.Pod)
	want   []fieldErr
}

func runValidateCases(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod.DeepCopy()
			tt.mutate(p)
			before := p.DeepCopy()
			var got []fieldErr
			for _, e := range Validate(p) {
				got = append(got, fieldErr{e.Type, e.Field})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() errors (-want +got):\n%s\nall: %v", diff, Validate(p))
			}
			if diff := cmp.Diff(before, p); diff != "" {
				t.Errorf("Validate modified the pod (-before +after):\n%s", diff)
			}
		})
	}
}

// Shorthands for the cases below.
const (
	tInvalid      = field.ErrorTypeInvalid
	tRequired     = field.ErrorTypeRequired
	tForbidden    = field.ErrorTypeForbidden
	tNotSupported = field.ErrorTypeNotSupported
	tDuplicate    = field.ErrorTypeDuplicate
	tNotFound     = field.ErrorTypeNotFound
	tTooLong      = field.ErrorTypeTooLong
)

func app(p *v1.Pod) *v1.Container     { return &p.Spec.Containers[0] }
func sidecar(p *v1.Pod) *v1.Container { return &p.Spec.Containers[1] }
func setup(p *v1.Pod) *v1.Container   { return &p.Spec.InitContainers[0] }

func TestValidatePodFields(t *testing.T) {
	runValidateCases(t, []validateCase{
		{
			name:   "dnsPolicy",
			mutate: func(p *v1.Pod) { p.Spec.DNSPolicy = "Cluster" },
			want:   []fieldErr{{tNotSupported, "spec.dnsPolicy"}},
		},
		{
			name:   "dnsPolicy None without a dnsConfig",
			mutate: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone },
			want:   []fieldErr{{tRequired, "spec.dnsConfig"}},
		},
		{
			name: "dnsPolicy None with a nameserver",
			mutate: func(p *v1.Pod) {
				p.Spec.DNSPolicy = v1.DNSNone
				p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"10.0.0.10"}, Searches: []string{"svc.cluster.local", "."}}
			},
		},
		{
			name: "four nameservers",
			mutate: func(p *v1.Pod) {
				p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9", "1.0.0.1"}}
			},
			want: []fieldErr{{tInvalid, "spec.dnsConfig.nameservers"}},
		},
		{
			name:   "nameserver that is not an IP",
			mutate: func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"dns.example.com"}} },
			want:   []fieldErr{{tInvalid, "spec.dnsConfig.nameservers[0]"}},
		},
		{
			name: "33 search domains",
			mutate: func(p *v1.Pod) {
				p.Spec.DNSConfig = &v1.PodDNSConfig{}
				for i := 0; i < 33; i++ {
					p.Spec.DNSConfig.Searches = append(p.Spec.DNSConfig.Searches, fmt.Sprintf("d%d.example.com", i))
				}
			},
			want: []fieldErr{{tInvalid, "spec.dnsConfig.searches"}},
		},
		{
			name:   "search domain",
			mutate: func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{"-bad.example.com"}} },
			want:   []fieldErr{{tInvalid, "spec.dnsConfig.searches[0]"}},
		},
		{
			name:   "hostname",
			mutate: func(p *v1.Pod) { p.Spec.Hostname = "web.local" },
			want:   []fieldErr{{tInvalid, "spec.hostname"}},
		},
		{
			name:   "subdomain",
			mutate: func(p *v1.Pod) { p.Spec.Subdomain = "Web" },
			want:   []fieldErr{{tInvalid, "spec.subdomain"}},
		},
		{
			name:   "activeDeadlineSeconds zero",
			mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](0) },
			want:   []fieldErr{{tInvalid, "spec.activeDeadlineSeconds"}},
		},
		{
			name:   "activeDeadlineSeconds",
			mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](600) },
		},
		{
			name:   "host network with a hostPort other than the containerPort",
			mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true },
			want:   []fieldErr{{tInvalid, "spec.containers[0].ports[0].hostPort"}},
		},
		{
			name: "host network with matching ports",
			mutate: func(p *v1.Pod) {
				p.Spec.HostNetwork = true
				app(p).Ports[0].HostPort = 80
			},
		},
		{
			name:   "full static pod name longer than a DNS subdomain",
			mutate: func(p *v1.Pod) { p.Name = strings.Repeat("a", 248) + "-node1" },
			want:   []fieldErr{{tInvalid, "metadata.name"}},
		},
		{
			name:   "longest full static pod name",
			mutate: func(p *v1.Pod) { p.Name = strings.Repeat("a", 247) + "-node1" },
		},
		{
			name:   "pod OS",
			mutate: func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: "plan9"} },
			want:   []fieldErr{{tNotSupported, "spec.os.name"}},
		},
		{
			name:   "deletion cost annotation",
			mutate: func(p *v1.Pod) { p.Annotations["controller.kubernetes.io/pod-deletion-cost"] = "high" },
			want:   []fieldErr{{tInvalid, "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]"}},
		},
		{
			name:   "readiness gate",
			mutate: func(p *v1.Pod) { p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "not a condition"}} },
			want:   []fieldErr{{tInvalid, "spec.readinessGates[0].conditionType"}},
		},
		{
			name:   "host alias IP",
			mutate: func(p *v1.Pod) { p.Spec.HostAliases = []v1.HostAlias{{IP: "10.0.0.300", Hostnames: []string{"db"}}} },
			want:   []fieldErr{{tInvalid, "spec.hostAliases[0].ip"}},
		},
		{
			name:   "preemption policy",
			mutate: func(p *v1.Pod) { p.Spec.PreemptionPolicy = ptr.To[v1.PreemptionPolicy]("Always") },
			want:   []fieldErr{{tNotSupported, "spec.preemptionPolicy"}},
		},
	})
}

// The manifests shipped in manifests/ are valid static pods.
func TestRepoManifestsValidate(t *testing.T) {
	files, err := filepath.Glob("../../manifests/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests found: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			pods, err := StaticPods(data, "node1", pod.SourceFile, zap.NewNop())
			if err != nil {
				t.Fatalf("StaticPods: %v", err)
			}
			if len(pods) == 0 {
				t.Fatal("no pods")
			}
		})
	}
}

// Negative limits were accepted before validation checked them; defaulting
// now also copies them to the requests.
func TestStaticPodsRejectNegativeLimits(t *testing.T) {
	for _, q := range []string{`cpu: "-1"`, `memory: "-5Mi"`} {
		t.Run(q, func(t *testing.T) {
			manifest := "apiVersion: v1\nkind: Pod\nmetadata: {name: neg}\nspec:\n  containers:\n  - name: c\n    image: busybox:1.36\n    resources:\n      limits: {" + q + "}\n"
			_, err := StaticPods([]byte(manifest), "node1", pod.SourceFile, zap.NewNop())
			if err == nil || !strings.Contains(err.Error(), "spec.containers[0].resources.limits[") {
				t.Fatalf("StaticPods error = %v, want a negative limit refused", err)
			}
		})
	}
}
