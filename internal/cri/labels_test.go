package cri

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// labelPod is the pod whose labels and annotations are checked.
var labelPod = func() *v1.Pod {
	grace := int64(45)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "prod", UID: "uid-42",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"kubernetes.io/config.hash": "h1", "owner": "ops"},
		},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "app", Image: "nginx:1.25",
				Ports:                    []v1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{
					Exec: &v1.ExecAction{Command: []string{"sleep", "5"}},
				}},
				Resources: v1.ResourceRequirements{
					Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi"),
						v1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
					Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")},
				},
			}},
		},
	}
}()

func TestPodLabels(t *testing.T) {
	want := map[string]string{
		"app":                         "web",
		"io.kubernetes.pod.name":      "web-node1",
		"io.kubernetes.pod.namespace": "prod",
		"io.kubernetes.pod.uid":       "uid-42",
		"io.nodeagent.managed":        "true",
		"io.nodeagent.node":           labelPod.Spec.NodeName,
	}
	if diff := cmp.Diff(want, podLabels(labelPod)); diff != "" {
		t.Errorf("podLabels() (-want +got):\n%s", diff)
	}
	// The pod's own labels cannot spoof the agent's keys.
	p := labelPod.DeepCopy()
	p.Labels["io.kubernetes.pod.uid"] = "other"
	if got := podLabels(p)["io.kubernetes.pod.uid"]; got != "uid-42" {
		t.Errorf("pod uid label = %q, want uid-42", got)
	}
}

func TestPodAnnotations(t *testing.T) {
	want := map[string]string{"kubernetes.io/config.hash": "h1", "owner": "ops", AnnotationSpecHash: "h1"}
	if diff := cmp.Diff(want, podAnnotations(labelPod, "h1")); diff != "" {
		t.Errorf("podAnnotations() (-want +got):\n%s", diff)
	}
	if _, ok := podAnnotations(labelPod, "")[AnnotationSpecHash]; ok {
		t.Errorf("podAnnotations() without a spec hash recorded one")
	}
}

func TestContainerLabels(t *testing.T) {
	want := map[string]string{
		"io.kubernetes.pod.name":       "web-node1",
		"io.kubernetes.pod.namespace":  "prod",
		"io.kubernetes.pod.uid":        "uid-42",
		"io.kubernetes.container.name": "app",
		"io.nodeagent.managed":         "true",
		"io.nodeagent.node":            labelPod.Spec.NodeName,
	}
	if diff := cmp.Diff(want, containerLabels(labelPod, &labelPod.Spec.Containers[0])); diff != "" {
		t.Errorf("containerLabels() (-want +got):\n%s", diff)
	}
}

func TestContainerAnnotations(t *testing.T) {
	c := &labelPod.Spec.Containers[0]
	tests := []struct {
		name         string
		restartCount int
		init         bool
		ephemeral    bool
		want         map[string]string
	}{
		{
			name:         "first start",
			restartCount: 0,
			want: map[string]string{
				"io.kubernetes.container.hash":                     KubeletHash(c),
				"io.nodeagent.container.hash":                      HashContainer(c),
				"io.kubernetes.container.restartCount":             "0",
				"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
				"io.kubernetes.container.terminationMessagePolicy": "File",
				"io.kubernetes.pod.terminationGracePeriod":         "45",
				"io.kubernetes.container.ports":                    `[{"name":"http","containerPort":80,"protocol":"TCP"}]`,
				"io.kubernetes.container.preStopHandler":           `{"exec":{"command":["sleep","5"]}}`,
				"io.nodeagent.container.resources":                 `{"limits":{"cpu":"200m"},"requests":{"cpu":"100m","memory":"64Mi"}}`,
			},
		},
		{
			name:         "third restart of an init container",
			restartCount: 3,
			init:         true,
			want: map[string]string{
				"io.kubernetes.container.hash":                     KubeletHash(c),
				"io.nodeagent.container.hash":                      HashContainer(c),
				"io.kubernetes.container.restartCount":             "3",
				"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
				"io.kubernetes.container.terminationMessagePolicy": "File",
				"io.kubernetes.pod.terminationGracePeriod":         "45",
				"io.kubernetes.container.ports":                    `[{"name":"http","containerPort":80,"protocol":"TCP"}]`,
				"io.kubernetes.container.preStopHandler":           `{"exec":{"command":["sleep","5"]}}`,
				"io.nodeagent.container.init":                      "true",
				"io.nodeagent.container.resources":                 `{"limits":{"cpu":"200m"},"requests":{"cpu":"100m","memory":"64Mi"}}`,
			},
		},
		{
			name:      "ephemeral container",
			ephemeral: true,
			want: map[string]string{
				"io.kubernetes.container.hash":                     KubeletHash(c),
				"io.nodeagent.container.hash":                      HashContainer(c),
				"io.kubernetes.container.restartCount":             "0",
				"io.kubernetes.container.terminationMessagePath":   "/dev/termination-log",
				"io.kubernetes.container.terminationMessagePolicy": "File",
				"io.kubernetes.pod.terminationGracePeriod":         "45",
				"io.kubernetes.container.ports":                    `[{"name":"http","containerPort":80,"protocol":"TCP"}]`,
				"io.kubernetes.container.preStopHandler":           `{"exec":{"command":["sleep","5"]}}`,
				"io.nodeagent.container.ephemeral":                 "true",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startSpec{c: c, init: tt.init}
			if tt.ephemeral {
				s.ephemeral = &v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon(*c)}
			}
			got := containerAnnotations(labelPod, s, tt.restartCount)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("containerAnnotations() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHashContainer(t *testing.T) {
	base := labelPod.Spec.Containers[0]
	tests := []struct {
		name   string
		mutate func(c *v1.Container)
		same   bool
	}{
		{name: "identical copy", mutate: func(*v1.Container) {}, same: true},
		{name: "image", mutate: func(c *v1.Container) { c.Image = "nginx:1.26" }},
		{name: "env", mutate: func(c *v1.Container) { c.Env = []v1.EnvVar{{Name: "A", Value: "1"}} }},
		{name: "args", mutate: func(c *v1.Container) { c.Args = []string{"-v"} }},
		{name: "pull policy", mutate: func(c *v1.Container) { c.ImagePullPolicy = v1.PullAlways }},
		// A resize is no spec change: the resize policy decides.
		{name: "resources", same: true, mutate: func(c *v1.Container) {
			c.Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")
			c.Resources.Limits = nil
		}},
		{name: "resize policy", same: true, mutate: func(c *v1.Container) {
			c.ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}
		}},
	}
	want := HashContainer(&base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *base.DeepCopy()
			tt.mutate(&c)
			if got := HashContainer(&c) == want; got != tt.same {
				t.Errorf("hash equal = %v, want %v", got, tt.same)
			}
		})
	}
}

// The hash agents before in-place resize recorded stays recognised: the
// whole spec's, told apart from the new ones by their version prefix.
func TestLegacyHash(t *testing.T) {
	c := labelPod.Spec.Containers[0]
	if h := HashContainer(&c); isLegacyHash(h) {
		t.Errorf("HashContainer() = %q taken for a legacy hash", h)
	}
	old := legacyHash(&c)
	if !isLegacyHash(old) || len(old) != 16 {
		t.Errorf("legacyHash() = %q, want 16 hex digits without a version", old)
	}
	// The function of the agents before: md5 of the JSON spec, resources
	// included.
	resized := *c.DeepCopy()
	resized.Resources.Requests[v1.ResourceCPU] = resource.MustParse("1")
	if legacyHash(&resized) == old {
		t.Error("legacyHash() does not cover the resources")
	}
	if isLegacyHash("") {
		t.Error("no hash taken for a legacy one")
	}
}

// The kubelet's hash, as the kubelet's own code computes it for these
// containers (hack/kubelet-golden.sh).
func TestKubeletHash(t *testing.T) {
	for _, tt := range []struct{ name, image, want string }{
		{"app", "127.0.0.1:5055/nodeagent/busybox:1.36", "e5c5c63"},
		{"etcd", "registry.k8s.io/etcd:3.6.4-0", "e9e20c65"},
	} {
		c := v1.Container{Name: tt.name, Image: tt.image, Command: []string{"ignored"}}
		if got := KubeletHash(&c); got != tt.want {
			t.Errorf("KubeletHash(%s) = %s, want the kubelet's %s", tt.name, got, tt.want)
		}
		if !isKubeletHash(tt.want) || isLegacyHash(tt.want) {
			t.Errorf("%s not told apart as the kubelet's", tt.want)
		}
	}
}
