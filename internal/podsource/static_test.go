package podsource

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// manifestPod is a pod as read from a manifest, before defaulting. Tests
// DeepCopy it.
var manifestPod = &v1.Pod{
	TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
	ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
	Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "setup", Image: "busybox:1.36"}},
		Containers: []v1.Container{
			{Name: "app", Image: "nginx:1.25", Ports: []v1.ContainerPort{{ContainerPort: 80}}},
			{Name: "sidecar", Image: "busybox"},
		},
	},
}

func defaulted(t *testing.T, p *v1.Pod, node string) (*v1.Pod, string) {
	t.Helper()
	p = p.DeepCopy()
	hash := DefaultStatic(p, node, pod.SourceFile)
	return p, hash
}

func TestDefaultStaticMetadata(t *testing.T) {
	p, hash := defaulted(t, manifestPod, "Node-1")

	if hash == "" {
		t.Fatal("DefaultStatic returned an empty hash")
	}
	if got, want := p.UID, types.UID(hash); got != want {
		t.Errorf("UID = %q, want the content hash %q", got, want)
	}
	if got, want := p.Name, "web-node-1"; got != want {
		t.Errorf("Name = %q, want %q (suffix is the lowercased node name)", got, want)
	}
	if got, want := p.Namespace, "default"; got != want {
		t.Errorf("Namespace = %q, want %q", got, want)
	}
	if got, want := p.Spec.NodeName, "Node-1"; got != want {
		t.Errorf("spec.nodeName = %q, want %q", got, want)
	}
	wantAnn := map[string]string{ConfigHashAnnotation: hash, ConfigSourceAnnotation: pod.SourceFile}
	if diff := cmp.Diff(wantAnn, p.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"app": "web"}, p.Labels); diff != "" {
		t.Errorf("labels must be kept (-want +got):\n%s", diff)
	}
	wantTol := []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
	if diff := cmp.Diff(wantTol, p.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations (-want +got):\n%s", diff)
	}
}

func TestDefaultStaticKeepsNamespaceAndAnnotations(t *testing.T) {
	in := manifestPod.DeepCopy()
	in.Namespace = "kube-system"
	in.Annotations = map[string]string{"owner": "ops"}
	p, hash := defaulted(t, in, "n1")
	if p.Namespace != "kube-system" {
		t.Errorf("Namespace = %q, want the manifest's kube-system", p.Namespace)
	}
	want := map[string]string{"owner": "ops", ConfigHashAnnotation: hash, ConfigSourceAnnotation: pod.SourceFile}
	if diff := cmp.Diff(want, p.Annotations); diff != "" {
		t.Errorf("annotations (-want +got):\n%s", diff)
	}
}

func TestDefaultStaticAPIDefaults(t *testing.T) {
	p, _ := defaulted(t, manifestPod, "n1")
	s := p.Spec
	if s.RestartPolicy != v1.RestartPolicyAlways {
		t.Errorf("restartPolicy = %q, want Always", s.RestartPolicy)
	}
	if s.TerminationGracePeriodSeconds == nil || *s.TerminationGracePeriodSeconds != 30 {
		t.Errorf("terminationGracePeriodSeconds = %v, want 30", s.TerminationGracePeriodSeconds)
	}
	if s.DNSPolicy != v1.DNSClusterFirst {
		t.Errorf("dnsPolicy = %q, want ClusterFirst", s.DNSPolicy)
	}
	if s.SchedulerName != v1.DefaultSchedulerName {
		t.Errorf("schedulerName = %q, want %q", s.SchedulerName, v1.DefaultSchedulerName)
	}
	if s.EnableServiceLinks == nil || !*s.EnableServiceLinks {
		t.Errorf("enableServiceLinks = %v, want true", s.EnableServiceLinks)
	}
	for _, c := range append(append([]v1.Container{}, s.InitContainers...), s.Containers...) {
		if c.TerminationMessagePath != v1.TerminationMessagePathDefault {
			t.Errorf("container %s terminationMessagePath = %q", c.Name, c.TerminationMessagePath)
		}
		if c.TerminationMessagePolicy != v1.TerminationMessageReadFile {
			t.Errorf("container %s terminationMessagePolicy = %q", c.Name, c.TerminationMessagePolicy)
		}
	}
	if got := s.Containers[0].Ports[0].Protocol; got != v1.ProtocolTCP {
		t.Errorf("port protocol = %q, want TCP", got)
	}
}

func TestDefaultStaticKeepsExplicitValues(t *testing.T) {
	in := manifestPod.DeepCopy()
	in.Spec.RestartPolicy = v1.RestartPolicyNever
	grace := int64(5)
	in.Spec.TerminationGracePeriodSeconds = &grace
	in.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	p, _ := defaulted(t, in, "n1")
	if p.Spec.RestartPolicy != v1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q, want the manifest's Never", p.Spec.RestartPolicy)
	}
	if *p.Spec.TerminationGracePeriodSeconds != 5 {
		t.Errorf("grace = %d, want the manifest's 5", *p.Spec.TerminationGracePeriodSeconds)
	}
	if p.Spec.Containers[0].ImagePullPolicy != v1.PullNever {
		t.Errorf("imagePullPolicy = %q, want the manifest's Never", p.Spec.Containers[0].ImagePullPolicy)
	}
}

func TestDefaultStaticPullPolicy(t *testing.T) {
	tests := []struct {
		name  string
		image string
		want  v1.PullPolicy
	}{
		{name: "untagged", image: "nginx", want: v1.PullAlways},
		{name: "latest", image: "nginx:latest", want: v1.PullAlways},
		{name: "tagged", image: "nginx:1.25", want: v1.PullIfNotPresent},
		{name: "registry with port, untagged", image: "registry.local:5000/team/app", want: v1.PullAlways},
		{name: "registry with port, tagged", image: "registry.local:5000/team/app:v2", want: v1.PullIfNotPresent},
		{name: "registry with port, latest", image: "registry.local:5000/team/app:latest", want: v1.PullAlways},
		{name: "digest", image: "nginx@sha256:0d17b565c37bcbd895e9d92315a05c1c3c9a29f762b011a10c54a66cd53c9b31", want: v1.PullIfNotPresent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := manifestPod.DeepCopy()
			in.Spec.Containers[0].Image = tt.image
			in.Spec.InitContainers[0].Image = tt.image
			p, _ := defaulted(t, in, "n1")
			if got := p.Spec.Containers[0].ImagePullPolicy; got != tt.want {
				t.Errorf("container imagePullPolicy for %q = %q, want %q", tt.image, got, tt.want)
			}
			if got := p.Spec.InitContainers[0].ImagePullPolicy; got != tt.want {
				t.Errorf("init container imagePullPolicy for %q = %q, want %q", tt.image, got, tt.want)
			}
		})
	}
}

func TestDefaultStaticUID(t *testing.T) {
	base, baseHash := defaulted(t, manifestPod, "n1")
	tests := []struct {
		name     string
		mutate   func(p *v1.Pod)
		node     string
		sameUID  bool
		sameHash bool
	}{
		{name: "same content and node", mutate: func(*v1.Pod) {}, node: "n1", sameUID: true, sameHash: true},
		{name: "other node", mutate: func(*v1.Pod) {}, node: "n2"},
		{name: "image changed", mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx:1.26" }, node: "n1"},
		{name: "env added", mutate: func(p *v1.Pod) { p.Spec.Containers[1].Env = []v1.EnvVar{{Name: "A", Value: "1"}} }, node: "n1"},
		{name: "init container changed", mutate: func(p *v1.Pod) { p.Spec.InitContainers[0].Command = []string{"true"} }, node: "n1"},
		{name: "label changed", mutate: func(p *v1.Pod) { p.Labels["tier"] = "front" }, node: "n1"},
		{name: "restart policy changed", mutate: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure }, node: "n1"},
		{name: "explicit default equals implicit default", mutate: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyAlways }, node: "n1", sameUID: true, sameHash: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := manifestPod.DeepCopy()
			tt.mutate(in)
			p, hash := defaulted(t, in, tt.node)
			if got := p.UID == base.UID; got != tt.sameUID {
				t.Errorf("UID %q vs base %q: same = %v, want %v", p.UID, base.UID, got, tt.sameUID)
			}
			if got := hash == baseHash; got != tt.sameHash {
				t.Errorf("hash %q vs base %q: same = %v, want %v", hash, baseHash, got, tt.sameHash)
			}
		})
	}
}

func TestDefaultStaticKeepsManifestUID(t *testing.T) {
	in := manifestPod.DeepCopy()
	in.UID = "pinned-uid"
	p1, h1 := defaulted(t, in, "n1")
	if p1.UID != "pinned-uid" {
		t.Fatalf("UID = %q, want the manifest's pinned-uid", p1.UID)
	}
	if p1.Annotations[ConfigHashAnnotation] != h1 {
		t.Errorf("config.hash annotation = %q, want the returned hash %q", p1.Annotations[ConfigHashAnnotation], h1)
	}

	in.Spec.Containers[0].Image = "nginx:1.26"
	p2, h2 := defaulted(t, in, "n1")
	if p2.UID != "pinned-uid" {
		t.Errorf("UID after a spec change = %q, want pinned-uid", p2.UID)
	}
	if h1 == h2 {
		t.Errorf("hash did not change with the spec (%q); a pinned-UID pod would never be replaced", h1)
	}
}

func TestDefaultStaticDoesNotRewriteOnSecondCall(t *testing.T) {
	// Two reads of the same manifest must produce identical pods, so the
	// Mux sees no change.
	a, _ := defaulted(t, manifestPod, "n1")
	b, _ := defaulted(t, manifestPod, "n1")
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("two defaultings of one manifest differ (-first +second):\n%s", diff)
	}
}
