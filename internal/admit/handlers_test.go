package admit

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podsource"
)

// podWith builds a pod from container options.
func podWith(opts ...func(p *v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "nginx"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// requests sets the requests of the pod's containers, one value per
// container ("" = none), adding containers as needed.
func requests(name v1.ResourceName, qs ...string) func(p *v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers = nil
		for i, q := range qs {
			c := v1.Container{Name: "c" + string(rune('0'+i)), Image: "x"}
			if q != "" {
				c.Resources.Requests = v1.ResourceList{name: resource.MustParse(q)}
			}
			p.Spec.Containers = append(p.Spec.Containers, c)
		}
	}
}

// initRequests sets the pod's init containers' requests.
func initRequests(name v1.ResourceName, qs ...string) func(p *v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.InitContainers = nil
		for i, q := range qs {
			c := v1.Container{Name: "i" + string(rune('0'+i)), Image: "x"}
			c.Resources.Requests = v1.ResourceList{name: resource.MustParse(q)}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
		}
	}
}

// sidecarRequests adds a restartable (sidecar) init container with a
// request.
func sidecarRequests(name v1.ResourceName, q string) func(p *v1.Pod) {
	return func(p *v1.Pod) {
		always := v1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{
			Name: "sidecar", Image: "x", RestartPolicy: &always,
			Resources: v1.ResourceRequirements{Requests: v1.ResourceList{name: resource.MustParse(q)}},
		})
	}
}

// overhead sets the pod's overhead (a RuntimeClass's, in a cluster).
func overhead(name v1.ResourceName, q string) func(p *v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Overhead = v1.ResourceList{name: resource.MustParse(q)} }
}

func pods(ps ...*v1.Pod) []*v1.Pod { return ps }

func TestMaxPods(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		others int
		admit  bool
	}{
		{name: "room left", max: 3, others: 2, admit: true},
		{name: "full", max: 2, others: 2},
		{name: "over full", max: 2, others: 5},
		{name: "empty node", max: 1, others: 0, admit: true},
		{name: "zero means no limit", max: 0, others: 500, admit: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var others []*v1.Pod
			for i := 0; i < tt.others; i++ {
				others = append(others, podWith())
			}
			got := MaxPods(tt.max).Admit(&Attributes{Pod: podWith(), OtherPods: others})
			if got.Admit != tt.admit {
				t.Fatalf("Admit = %v, want %v (%+v)", got.Admit, tt.admit, got)
			}
			if !tt.admit && got.Reason != "OutOfpods" {
				t.Errorf("Reason = %q, want OutOfpods", got.Reason)
			}
		})
	}
}

func TestMaxPodsMessage(t *testing.T) {
	got := MaxPods(2).Admit(&Attributes{Pod: podWith(), OtherPods: pods(podWith(), podWith())})
	want := Result{Reason: "OutOfpods", Message: "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("MaxPods refusal (-want +got):\n%s", diff)
	}
}

// allocatable is the node the Resources tests admit onto.
var allocatable = v1.ResourceList{
	v1.ResourceCPU:    resource.MustParse("2"),
	v1.ResourceMemory: resource.MustParse("4Gi"),
}

func TestResources(t *testing.T) {
	tests := []struct {
		name        string
		allocatable v1.ResourceList
		pod         *v1.Pod
		others      []*v1.Pod
		wantReason  string // "" = admitted
	}{
		{
			name:   "fits",
			pod:    podWith(requests(v1.ResourceCPU, "500m")),
			others: pods(podWith(requests(v1.ResourceCPU, "1", "500m"))),
		},
		{
			name:   "exactly full fits",
			pod:    podWith(requests(v1.ResourceCPU, "500m")),
			others: pods(podWith(requests(v1.ResourceCPU, "1500m"))),
		},
		{
			name:       "cpu over",
			pod:        podWith(requests(v1.ResourceCPU, "600m")),
			others:     pods(podWith(requests(v1.ResourceCPU, "1")), podWith(requests(v1.ResourceCPU, "500m"))),
			wantReason: "OutOfcpu",
		},
		{
			name:       "memory over",
			pod:        podWith(requests(v1.ResourceMemory, "1Gi", "1Gi")),
			others:     pods(podWith(requests(v1.ResourceMemory, "3Gi"))),
			wantReason: "OutOfmemory",
		},
		{
			name:       "pod alone bigger than the node",
			pod:        podWith(requests(v1.ResourceCPU, "3")),
			wantReason: "OutOfcpu",
		},
		{
			name:   "no requests fits a full node",
			pod:    podWith(),
			others: pods(podWith(requests(v1.ResourceCPU, "2"))),
		},
		{
			name:   "containers without requests do not count",
			pod:    podWith(requests(v1.ResourceCPU, "", "500m")),
			others: pods(podWith(requests(v1.ResourceCPU, "", "1500m"))),
		},
		{
			name: "init containers count as their largest, not their sum",
			// effective 500m (max of init 500m, 500m and containers 200m);
			// a sum of the init containers (1.2) would not fit.
			pod:    podWith(requests(v1.ResourceCPU, "200m"), initRequests(v1.ResourceCPU, "500m", "500m")),
			others: pods(podWith(requests(v1.ResourceCPU, "1400m"))),
		},
		{
			name: "largest init container above the containers' sum",
			// effective 800m; the containers alone (200m) would fit.
			pod:        podWith(requests(v1.ResourceCPU, "100m", "100m"), initRequests(v1.ResourceCPU, "800m")),
			others:     pods(podWith(requests(v1.ResourceCPU, "1400m"))),
			wantReason: "OutOfcpu",
		},
		{
			name: "other pods' init containers count too",
			pod:  podWith(requests(v1.ResourceCPU, "500m")),
			// effective 1600m
			others:     pods(podWith(requests(v1.ResourceCPU, "100m"), initRequests(v1.ResourceCPU, "1600m"))),
			wantReason: "OutOfcpu",
		},
		{
			name: "sidecar init container counts with the containers",
			// effective 1100m: the app's 500m plus the sidecar's 600m,
			// which keeps running beside it.
			pod:        podWith(requests(v1.ResourceCPU, "500m"), sidecarRequests(v1.ResourceCPU, "600m")),
			others:     pods(podWith(requests(v1.ResourceCPU, "1"))),
			wantReason: "OutOfcpu",
		},
		{
			name: "the same init container without restartPolicy Always only counts while it runs",
			// effective 600m = max(500m, 600m)
			pod:    podWith(requests(v1.ResourceCPU, "500m"), initRequests(v1.ResourceCPU, "600m")),
			others: pods(podWith(requests(v1.ResourceCPU, "1"))),
		},
		{
			name: "an init container after a sidecar runs beside it",
			// sidecar 300m, then an init container of 1200m: 1500m at
			// that point, more than the 400m of sidecar + app after.
			pod: podWith(requests(v1.ResourceCPU, "100m"), func(p *v1.Pod) {
				sidecarRequests(v1.ResourceCPU, "300m")(p)
				p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{
					Name: "migrate", Image: "x", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1200m")}},
				})
			}),
			others:     pods(podWith(requests(v1.ResourceCPU, "600m"))),
			wantReason: "OutOfcpu",
		},
		{
			name:       "pod overhead counts",
			pod:        podWith(requests(v1.ResourceCPU, "1500m"), overhead(v1.ResourceCPU, "600m")),
			wantReason: "OutOfcpu",
		},
		{
			name:       "other pods' overhead counts",
			pod:        podWith(requests(v1.ResourceMemory, "1Gi")),
			others:     pods(podWith(requests(v1.ResourceMemory, "2Gi"), overhead(v1.ResourceMemory, "1536Mi"))),
			wantReason: "OutOfmemory",
		},
		{
			name: "pod-level requests replace the containers' sum",
			pod: podWith(requests(v1.ResourceCPU, "100m"), func(p *v1.Pod) {
				p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
			}),
			others:     pods(podWith(requests(v1.ResourceCPU, "1500m"))),
			wantReason: "OutOfcpu",
		},
		{
			name:        "extended resource the node reports",
			allocatable: v1.ResourceList{"example.com/gpu": resource.MustParse("1")},
			pod:         podWith(requests("example.com/gpu", "1")),
			others:      pods(podWith(requests("example.com/gpu", "1"))),
			wantReason:  "OutOfexample.com/gpu",
		},
		{
			name:        "resource the node does not report is not checked",
			allocatable: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
			pod:         podWith(requests(v1.ResourceCPU, "64")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alloc := tt.allocatable
			if alloc == nil {
				alloc = allocatable
			}
			got := Resources(alloc, nil).Admit(&Attributes{Pod: tt.pod, OtherPods: tt.others})
			if tt.wantReason == "" {
				if !got.Admit {
					t.Errorf("refused %+v, want admitted", got)
				}
				return
			}
			if got.Admit || got.Reason != tt.wantReason {
				t.Errorf("Admit/Reason = %v/%q, want refused with %q (%s)", got.Admit, got.Reason, tt.wantReason, got.Message)
			}
		})
	}
}

func TestResourcesMessage(t *testing.T) {
	got := Resources(allocatable, nil).Admit(&Attributes{
		Pod:       podWith(requests(v1.ResourceCPU, "600m")),
		OtherPods: pods(podWith(requests(v1.ResourceCPU, "1500m"))),
	})
	want := Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Resources refusal (-want +got):\n%s", diff)
	}
}

func TestResourcesSidecarMessage(t *testing.T) {
	got := Resources(allocatable, nil).Admit(&Attributes{
		Pod:       podWith(requests(v1.ResourceCPU, "500m"), sidecarRequests(v1.ResourceCPU, "600m")),
		OtherPods: pods(podWith(requests(v1.ResourceCPU, "1"))),
	})
	want := Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 1100, used: 1000, capacity: 2000"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Resources refusal (-want +got):\n%s", diff)
	}
}

// A manifest giving only limits is defaulted (requests = limits) before it
// reaches admission, so it is refused for what it may use, as by the
// kubelet; undefaulted it would ask for nothing and always fit.
func TestResourcesLimitsOnlyManifest(t *testing.T) {
	manifest := []byte(`apiVersion: v1
kind: Pod
metadata: {name: greedy}
spec:
  containers:
  - name: c
    image: busybox:1.36
    resources:
      limits: {cpu: "100", memory: 64Gi}
`)
	ps, err := podsource.StaticPods(manifest, "node1", pod.SourceFile, zap.NewNop())
	if err != nil || len(ps) != 1 {
		t.Fatalf("StaticPods = %v, %v", ps, err)
	}
	got := Resources(allocatable, nil).Admit(&Attributes{Pod: ps[0]})
	want := Result{Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu, requested: 100000, used: 0, capacity: 2000"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits-only pod (-want +got):\n%s", diff)
	}
}

// nodeLabels are the labels of the node the NodeSelector tests admit onto.
var nodeLabels = map[string]string{
	"kubernetes.io/hostname": "node1",
	"kubernetes.io/arch":     "amd64",
	"disk":                   "ssd",
	"gpus":                   "2",
}

func required(terms ...v1.NodeSelectorTerm) func(p *v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func term(reqs ...v1.NodeSelectorRequirement) v1.NodeSelectorTerm {
	return v1.NodeSelectorTerm{MatchExpressions: reqs}
}

func req(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorRequirement {
	return v1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func nodeSelector(sel map[string]string) func(p *v1.Pod) {
	return func(p *v1.Pod) { p.Spec.NodeSelector = sel }
}

func TestNodeSelector(t *testing.T) {
	tests := []struct {
		name  string
		pod   *v1.Pod
		admit bool
	}{
		{name: "no selector", pod: podWith(), admit: true},
		{name: "nodeSelector matches", pod: podWith(nodeSelector(map[string]string{"disk": "ssd", "kubernetes.io/arch": "amd64"})), admit: true},
		{name: "nodeSelector value differs", pod: podWith(nodeSelector(map[string]string{"disk": "hdd"}))},
		{name: "nodeSelector key missing", pod: podWith(nodeSelector(map[string]string{"zone": "a"}))},
		{name: "nodeSelector partly matching", pod: podWith(nodeSelector(map[string]string{"disk": "ssd", "zone": "a"}))},
		{name: "In matches", pod: podWith(required(term(req("disk", v1.NodeSelectorOpIn, "nvme", "ssd")))), admit: true},
		{name: "In does not match", pod: podWith(required(term(req("disk", v1.NodeSelectorOpIn, "nvme", "hdd"))))},
		{name: "In on a missing key", pod: podWith(required(term(req("zone", v1.NodeSelectorOpIn, "a"))))},
		{name: "NotIn matches", pod: podWith(required(term(req("disk", v1.NodeSelectorOpNotIn, "hdd")))), admit: true},
		{name: "NotIn does not match", pod: podWith(required(term(req("disk", v1.NodeSelectorOpNotIn, "ssd"))))},
		{name: "NotIn on a missing key matches", pod: podWith(required(term(req("zone", v1.NodeSelectorOpNotIn, "a")))), admit: true},
		{name: "Exists matches", pod: podWith(required(term(req("disk", v1.NodeSelectorOpExists)))), admit: true},
		{name: "Exists does not match", pod: podWith(required(term(req("zone", v1.NodeSelectorOpExists))))},
		{name: "DoesNotExist matches", pod: podWith(required(term(req("zone", v1.NodeSelectorOpDoesNotExist)))), admit: true},
		{name: "DoesNotExist does not match", pod: podWith(required(term(req("disk", v1.NodeSelectorOpDoesNotExist))))},
		{name: "Gt matches", pod: podWith(required(term(req("gpus", v1.NodeSelectorOpGt, "1")))), admit: true},
		{name: "Lt does not match", pod: podWith(required(term(req("gpus", v1.NodeSelectorOpLt, "2"))))},
		{
			name:  "expressions of a term are ANDed",
			pod:   podWith(required(term(req("disk", v1.NodeSelectorOpIn, "ssd"), req("zone", v1.NodeSelectorOpExists)))),
			admit: false,
		},
		{
			name: "terms are ORed",
			pod: podWith(required(
				term(req("zone", v1.NodeSelectorOpExists)),
				term(req("kubernetes.io/hostname", v1.NodeSelectorOpIn, "node1")),
			)),
			admit: true,
		},
		{
			name: "nodeSelector and affinity must both match",
			pod: podWith(nodeSelector(map[string]string{"disk": "hdd"}),
				required(term(req("kubernetes.io/hostname", v1.NodeSelectorOpIn, "node1")))),
		},
		{name: "unknown operator refuses", pod: podWith(required(term(req("disk", "Like", "ssd"))))},
		{name: "In without values refuses", pod: podWith(required(term(req("disk", v1.NodeSelectorOpIn))))},
		{
			name: "preferred affinity alone is not required",
			pod: podWith(func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
					PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{Weight: 1, Preference: term(req("zone", v1.NodeSelectorOpExists))}},
				}}
			}),
			admit: true,
		},
	}
	h := NodeSelector(nodeLabels)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := h.Admit(&Attributes{Pod: tt.pod})
			if got.Admit != tt.admit {
				t.Fatalf("Admit = %v, want %v (%+v)", got.Admit, tt.admit, got)
			}
			if !tt.admit && got.Reason != "NodeAffinity" {
				t.Errorf("Reason = %q, want NodeAffinity", got.Reason)
			}
		})
	}
}

func TestNodeSelectorEmptyTermMatchesNothing(t *testing.T) {
	tests := []struct {
		name string
		term v1.NodeSelectorTerm
	}{
		{name: "empty term", term: v1.NodeSelectorTerm{}},
		{name: "matchFields naming another node", term: v1.NodeSelectorTerm{
			MatchFields: []v1.NodeSelectorRequirement{req("metadata.name", v1.NodeSelectorOpIn, "node2")},
		}},
	}
	h := NodeSelector(nodeLabels)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := h.Admit(&Attributes{Pod: podWith(required(tt.term))}); got.Admit {
				t.Errorf("admitted a pod whose only required term is %+v; want NodeAffinity refusal", tt.term)
			}
		})
	}
}

// hostPort returns an option adding a container with one host port.
func hostPort(proto v1.Protocol, ip string, port int32) func(p *v1.Pod) {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{
			Name: "c" + string(rune('a'+len(p.Spec.Containers))), Image: "x",
			Ports: []v1.ContainerPort{{ContainerPort: 8080, HostPort: port, HostIP: ip, Protocol: proto}},
		})
	}
}

func TestHostPorts(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.Pod
		others []*v1.Pod
		admit  bool
	}{
		{name: "no host ports", pod: podWith(), others: pods(podWith(hostPort(v1.ProtocolTCP, "", 80))), admit: true},
		{name: "free port", pod: podWith(hostPort(v1.ProtocolTCP, "", 81)), others: pods(podWith(hostPort(v1.ProtocolTCP, "", 80))), admit: true},
		{name: "same port, any IP", pod: podWith(hostPort(v1.ProtocolTCP, "", 80)), others: pods(podWith(hostPort(v1.ProtocolTCP, "", 80)))},
		{name: "empty IP is 0.0.0.0", pod: podWith(hostPort(v1.ProtocolTCP, "0.0.0.0", 80)), others: pods(podWith(hostPort(v1.ProtocolTCP, "", 80)))},
		{name: "empty protocol is TCP", pod: podWith(hostPort("", "", 80)), others: pods(podWith(hostPort(v1.ProtocolTCP, "", 80)))},
		{name: "same port, same IP", pod: podWith(hostPort(v1.ProtocolTCP, "10.0.0.1", 80)), others: pods(podWith(hostPort(v1.ProtocolTCP, "10.0.0.1", 80)))},
		{name: "same port, different IPs", pod: podWith(hostPort(v1.ProtocolTCP, "10.0.0.1", 80)), others: pods(podWith(hostPort(v1.ProtocolTCP, "10.0.0.2", 80))), admit: true},
		{name: "any IP against a specific IP", pod: podWith(hostPort(v1.ProtocolTCP, "0.0.0.0", 80)), others: pods(podWith(hostPort(v1.ProtocolTCP, "10.0.0.2", 80)))},
		{name: "specific IP against any IP", pod: podWith(hostPort(v1.ProtocolTCP, "10.0.0.2", 80)), others: pods(podWith(hostPort(v1.ProtocolTCP, "0.0.0.0", 80)))},
		{name: "different protocols do not conflict", pod: podWith(hostPort(v1.ProtocolUDP, "", 53)), others: pods(podWith(hostPort(v1.ProtocolTCP, "", 53))), admit: true},
		{name: "any IP, other protocol on a specific IP", pod: podWith(hostPort(v1.ProtocolUDP, "", 53)), others: pods(podWith(hostPort(v1.ProtocolTCP, "10.0.0.1", 53))), admit: true},
		{name: "port that is a suffix of a used port", pod: podWith(hostPort(v1.ProtocolTCP, "", 80)), others: pods(podWith(hostPort(v1.ProtocolTCP, "10.0.0.1", 8080))), admit: true},
		{
			name:   "second container of the pod conflicts",
			pod:    podWith(hostPort(v1.ProtocolTCP, "", 81), hostPort(v1.ProtocolTCP, "", 443)),
			others: pods(podWith(hostPort(v1.ProtocolUDP, "", 81)), podWith(hostPort(v1.ProtocolTCP, "", 443))),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := HostPorts().Admit(&Attributes{Pod: tt.pod, OtherPods: tt.others})
			if got.Admit != tt.admit {
				t.Fatalf("Admit = %v, want %v (%+v)", got.Admit, tt.admit, got)
			}
			if !tt.admit && (got.Reason != "NodePorts" || !strings.Contains(got.Message, "didn't have free ports")) {
				t.Errorf("refusal = %+v, want reason NodePorts and a free-ports message", got)
			}
		})
	}
}

func TestHostPortsMessage(t *testing.T) {
	got := HostPorts().Admit(&Attributes{
		Pod:       podWith(hostPort(v1.ProtocolTCP, "10.0.0.1", 80)),
		OtherPods: pods(podWith(hostPort(v1.ProtocolTCP, "", 80))),
	})
	want := Result{Reason: "NodePorts", Message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports (TCP 10.0.0.1:80)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HostPorts refusal (-want +got):\n%s", diff)
	}
}

// allocations is an AllocatedPods whose pods have the cpu request
// allocated by UID.
type allocations map[string]string

func (a allocations) AllocatedPod(p *v1.Pod) *v1.Pod {
	q, ok := a[string(p.UID)]
	if !ok {
		return p
	}
	return podWith(func(x *v1.Pod) { x.UID = p.UID }, requests(v1.ResourceCPU, q))
}

// With the allocation manager, pods count by their allocation: another
// pod's resize the node did not allocate takes nothing, and a pod
// re-admitted after an agent restart is judged by what it was allocated.
func TestResourcesCountsAllocations(t *testing.T) {
	resizing := podWith(func(p *v1.Pod) { p.UID = "other" }, requests(v1.ResourceCPU, "1800m"))
	p := podWith(requests(v1.ResourceCPU, "1"))
	if got := Resources(allocatable, nil).Admit(&Attributes{Pod: p, OtherPods: pods(resizing)}); got.Admit {
		t.Fatal("without allocations: admitted beside the other pod's spec")
	}
	got := Resources(allocatable, allocations{"other": "500m"}).Admit(&Attributes{Pod: p, OtherPods: pods(resizing)})
	if !got.Admit {
		t.Errorf("refused %+v, want admitted beside the other pod's allocated 500m", got)
	}
	// Re-admitted: its allocation, not its (resized) spec.
	got = Resources(allocatable, allocations{"uid": "500m", "other": "1500m"}).Admit(&Attributes{Pod: p, OtherPods: pods(resizing)})
	if !got.Admit {
		t.Errorf("refused %+v, want admitted by its allocated 500m", got)
	}
}

type recordingAllocator struct {
	got []string
	err error
}

func (r *recordingAllocator) Admitted(p *v1.Pod) error {
	r.got = append(r.got, string(p.UID))
	return r.err
}

// Allocate records the pod and never refuses.
func TestAllocate(t *testing.T) {
	r := &recordingAllocator{err: errors.New("read-only file system")}
	if got := Allocate(r).Admit(&Attributes{Pod: podWith()}); !got.Admit {
		t.Errorf("Allocate refused: %+v", got)
	}
	if !cmp.Equal(r.got, []string{"uid"}) {
		t.Errorf("recorded %v", r.got)
	}
}
