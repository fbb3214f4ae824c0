package downward

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestFormatMap(t *testing.T) {
	got := formatMap(map[string]string{"b": "two words", "a": `quote"d`, "c": ""})
	want := "a=\"quote\\\"d\"\nb=\"two words\"\nc=\"\""
	if got != want {
		t.Errorf("formatMap() = %q, want %q", got, want)
	}
	if got := formatMap(nil); got != "" {
		t.Errorf("formatMap(nil) = %q, want empty", got)
	}
}

func TestResourceValue(t *testing.T) {
	n := Node{RootDir: t.TempDir()}
	c := &v1.Container{Name: "app", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{
			v1.ResourceCPU:                   resource.MustParse("1500m"),
			v1.ResourceName("hugepages-2Mi"): resource.MustParse("4Mi"),
		},
		Requests: v1.ResourceList{
			v1.ResourceCPU:              resource.MustParse("250m"),
			v1.ResourceMemory:           resource.MustParse("100M"),
			v1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
		},
	}}
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*c}}}
	podLimited := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*c}, Resources: &v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")}}}}
	tests := []struct {
		name     string
		pod      *v1.Pod
		resource string
		divisor  string
		want     string
		wantErr  string
	}{
		{name: "cpu limit in cores rounds up", resource: "limits.cpu", want: "2"},
		{name: "cpu limit in millicores", resource: "limits.cpu", divisor: "1m", want: "1500"},
		{name: "cpu request", resource: "requests.cpu", divisor: "1m", want: "250"},
		{name: "memory request in Mi rounds up", resource: "requests.memory", divisor: "1Mi", want: "96"},
		{name: "ephemeral storage request", resource: "requests.ephemeral-storage", divisor: "1Mi", want: "1024"},
		{name: "hugepages limit", resource: "limits.hugepages-2Mi", divisor: "1Mi", want: "4"},
		{name: "unset hugepages request is 0", resource: "requests.hugepages-2Mi", want: "0"},
		{name: "extended resources are not supported", resource: "requests.nvidia.com/gpu", wantErr: "unsupported container resource"},
		{name: "memory limit from the pod's limit", pod: podLimited, resource: "limits.memory", divisor: "1Mi", want: "256"},
		{name: "ephemeral storage limit from the node", resource: "limits.ephemeral-storage", want: ""},
		{name: "unknown resource", resource: "limits.gpu", wantErr: "unsupported container resource : limits.gpu"},
		{name: "unknown kind", resource: "usage.cpu", wantErr: "unsupported container resource"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod
			if pod == nil {
				pod = p
			}
			fs := &v1.ResourceFieldSelector{Resource: tt.resource}
			if tt.divisor != "" {
				fs.Divisor = resource.MustParse(tt.divisor)
			}
			got, err := n.ResourceValue(pod, c, fs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ResourceValue() = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ResourceValue() error = %v", err)
			}
			if tt.want == "" {
				// From the host: only check it is a positive number.
				if n, err := strconv.ParseInt(got, 10, 64); err != nil || n <= 0 {
					t.Errorf("ResourceValue() = %q, want a positive size", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("ResourceValue() = %q, want %q", got, tt.want)
			}
		})
	}
	// No memory limit anywhere: the node's memory, in bytes.
	bare := &v1.Container{Name: "bare"}
	got, err := n.ResourceValue(p, bare, &v1.ResourceFieldSelector{Resource: "limits.memory"})
	if n, perr := strconv.ParseInt(got, 10, 64); err != nil || perr != nil || n <= 0 {
		t.Errorf("limits.memory without a limit = %q, %v; want the node's memory", got, err)
	}
	got, err = n.ResourceValue(p, bare, &v1.ResourceFieldSelector{Resource: "limits.cpu"})
	if err != nil || got != strconv.Itoa(runtime.NumCPU()) {
		t.Errorf("limits.cpu without a limit = %q, %v; want %d", got, err, runtime.NumCPU())
	}
}

func TestFieldValue(t *testing.T) {
	n := Node{IP: "192.168.1.10"}
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID = "web", "default", "uid-1"
	p.Labels = map[string]string{"app": "web"}
	p.Spec.NodeName = "node1"
	tests := []struct {
		name, path, want, wantErr string
	}{
		{name: "name", path: "metadata.name", want: "web"},
		{name: "uid", path: "metadata.uid", want: "uid-1"},
		{name: "node", path: "spec.nodeName", want: "node1"},
		{name: "pod IP", path: "status.podIP", want: "10.88.0.5"},
		{name: "pod IPs", path: "status.podIPs", want: "10.88.0.5"},
		{name: "host IP", path: "status.hostIP", want: "192.168.1.10"},
		{name: "host IPs", path: "status.hostIPs", want: "192.168.1.10"},
		{name: "all labels", path: "metadata.labels", want: `app="web"`},
		{name: "one label", path: "metadata.labels['app']", want: "web"},
		{name: "unsupported", path: "status.phase", wantErr: `unsupported fieldPath "status.phase"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := n.FieldValue(p, tt.path, "10.88.0.5")
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("FieldValue() = %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("FieldValue() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestPodFieldValueIPs: status.podIPs is every pod IP, comma-separated,
// the node's family first (the kubelet's sortPodIPs), and status.podIP
// the first of them; a hostNetwork pod has the node's IP.
func TestPodFieldValueIPs(t *testing.T) {
	p := &v1.Pod{}
	hostNet := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}}
	tests := []struct {
		name        string
		nodeIP      string
		pod         *v1.Pod
		podIPs      []string
		wantIP      string
		wantIPs     string
		wantHostIPs string
	}{
		{name: "dual stack, IPv4 node", nodeIP: "192.168.1.10", podIPs: []string{"10.88.0.5", "fd00:10:88::5"},
			wantIP: "10.88.0.5", wantIPs: "10.88.0.5,fd00:10:88::5", wantHostIPs: "192.168.1.10"},
		{name: "runtime lists IPv6 first, IPv4 node", nodeIP: "192.168.1.10", podIPs: []string{"fd00:10:88::5", "10.88.0.5"},
			wantIP: "10.88.0.5", wantIPs: "10.88.0.5,fd00:10:88::5", wantHostIPs: "192.168.1.10"},
		{name: "dual stack, IPv6 node", nodeIP: "fd00::10", podIPs: []string{"10.88.0.5", "fd00:10:88::5"},
			wantIP: "fd00:10:88::5", wantIPs: "fd00:10:88::5,10.88.0.5", wantHostIPs: "fd00::10"},
		{name: "single stack", nodeIP: "192.168.1.10", podIPs: []string{"10.88.0.5"},
			wantIP: "10.88.0.5", wantIPs: "10.88.0.5", wantHostIPs: "192.168.1.10"},
		{name: "unknown node IP: IPv4 first", podIPs: []string{"fd00:10:88::5", "10.88.0.5"},
			wantIP: "10.88.0.5", wantIPs: "10.88.0.5,fd00:10:88::5"},
		{name: "one of each family at most", nodeIP: "192.168.1.10", podIPs: []string{"10.88.0.5", "10.88.0.6", "fd00:10:88::5"},
			wantIP: "10.88.0.5", wantIPs: "10.88.0.5,fd00:10:88::5", wantHostIPs: "192.168.1.10"},
		{name: "no IP yet", nodeIP: "192.168.1.10", wantHostIPs: "192.168.1.10"},
		{name: "host network: the node's IP", nodeIP: "192.168.1.10", pod: hostNet,
			wantIP: "192.168.1.10", wantIPs: "192.168.1.10", wantHostIPs: "192.168.1.10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Node{IP: tt.nodeIP}
			pod := tt.pod
			if pod == nil {
				pod = p
			}
			for path, want := range map[string]string{"status.podIP": tt.wantIP, "status.podIPs": tt.wantIPs, "status.hostIPs": tt.wantHostIPs} {
				got, err := n.PodFieldValue(pod, path, tt.podIPs)
				if err != nil || got != want {
					t.Errorf("PodFieldValue(%s) = %q, %v; want %q", path, got, err, want)
				}
			}
		})
	}
}

// TestResourceValueAllocatable: a limit the container does not set reads
// as the node's allocatable amount, not its capacity (the kubelet's
// MergeContainerResourceLimits); the pod's own limit comes first.
func TestResourceValueAllocatable(t *testing.T) {
	n := Node{RootDir: t.TempDir(), Allocatable: v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("3500m"),
		v1.ResourceMemory:           resource.MustParse("7Gi"),
		v1.ResourceEphemeralStorage: resource.MustParse("90Gi"),
	}}
	bare := &v1.Container{Name: "bare"}
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*bare}}}
	podLimited := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{*bare}, Resources: &v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("256Mi")}}}}
	limited := &v1.Container{Name: "limited", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}}
	tests := []struct {
		name      string
		pod       *v1.Pod
		node      Node
		container *v1.Container
		resource  string
		divisor   string
		want      string
	}{
		{name: "cpu in cores, rounded up", resource: "limits.cpu", want: "4"},
		{name: "cpu in millicores", resource: "limits.cpu", divisor: "1m", want: "3500"},
		{name: "memory", resource: "limits.memory", divisor: "1Mi", want: "7168"},
		{name: "ephemeral storage", resource: "limits.ephemeral-storage", divisor: "1Gi", want: "90"},
		{name: "the pod's limit first", pod: podLimited, resource: "limits.memory", divisor: "1Mi", want: "256"},
		{name: "the container's own limit", container: limited, resource: "limits.cpu", divisor: "1m", want: "500"},
		{name: "requests are not defaulted", resource: "requests.cpu", want: "0"},
		{name: "a resource the node does not list reads 0", node: Node{Allocatable: v1.ResourceList{}}, resource: "limits.memory", want: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, node, c := tt.pod, tt.node, tt.container
			if pod == nil {
				pod = p
			}
			if node.Allocatable == nil {
				node = n
			}
			if c == nil {
				c = bare
			}
			fs := &v1.ResourceFieldSelector{Resource: tt.resource}
			if tt.divisor != "" {
				fs.Divisor = resource.MustParse(tt.divisor)
			}
			got, err := node.ResourceValue(pod, c, fs)
			if err != nil || got != tt.want {
				t.Errorf("ResourceValue() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
