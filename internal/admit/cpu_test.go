package admit

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
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
