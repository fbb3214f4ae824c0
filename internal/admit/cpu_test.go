package admit

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeAllocator struct {
	err   error
	calls []string
}

func (f *fakeAllocator) Allocate(p *v1.Pod) error {
	f.calls = append(f.calls, p.Name)
	return f.err
}

type reasoned struct{ msg, reason string }

func (e reasoned) Error() string  { return e.msg }
func (e reasoned) Reason() string { return e.reason }

func TestCPUs(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Result
	}{
		{"allocated", nil, Result{Admit: true}},
		{"not enough CPUs", errors.New("container c: not enough CPUs available to satisfy request: requested=2, available=1"),
			Result{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to container c: not enough CPUs available to satisfy request: requested=2, available=1, which is unexpected"}},
		{"typed error keeps its reason", reasoned{"SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2", "SMTAlignmentError"},
			Result{Reason: "SMTAlignmentError", Message: "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &fakeAllocator{err: tt.err}
			got := CPUs(a).Admit(&Attributes{Pod: podWith()})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if len(a.calls) != 1 {
				t.Errorf("Allocate called %d times, want 1", len(a.calls))
			}
		})
	}
}

type fakeDevices struct{ err error }

func (f fakeDevices) Allocate(context.Context, *v1.Pod) error { return f.err }

// A device allocation that fails refuses the pod with the kubelet's
// wording; one that succeeds admits it.
func TestDevices(t *testing.T) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if got := Devices(context.Background(), fakeDevices{}).Admit(&Attributes{Pod: p}); !got.Admit {
		t.Errorf("allocated: %+v", got)
	}
	got := Devices(context.Background(), fakeDevices{errors.New("no healthy devices present; cannot allocate unhealthy devices example.com/r")}).Admit(&Attributes{Pod: p})
	want := Result{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices example.com/r, which is unexpected"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusal (-want +got):\n%s", diff)
	}
}

// ResourcesOf reads the allocatable at each admission: a device resource
// that appears is counted from then on.
func TestResourcesOfFollowsAllocatable(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	h := ResourcesOf(func() v1.ResourceList { return allocatable }, nil)
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{"example.com/r": resource.MustParse("3")}, Limits: v1.ResourceList{"example.com/r": resource.MustParse("3")}}}}}}
	if got := h.Admit(&Attributes{Pod: p}); !got.Admit {
		t.Errorf("a resource the node does not have is not judged (cluster-level): %+v", got)
	}
	allocatable["example.com/r"] = resource.MustParse("2")
	got := h.Admit(&Attributes{Pod: p})
	if got.Admit || got.Reason != "OutOfexample.com/r" || got.Message != "Node didn't have enough resource: example.com/r, requested: 3, used: 0, capacity: 2" {
		t.Errorf("more than the node's 2: %+v", got)
	}
}
