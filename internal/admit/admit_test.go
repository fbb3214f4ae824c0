package admit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder is a Handler that records that it was asked and answers with
// a fixed Result.
type recorder struct {
	name   string
	result Result
	asked  *[]string
}

func (r recorder) Name() string { return r.name }
func (r recorder) Admit(*Attributes) Result {
	*r.asked = append(*r.asked, r.name)
	return r.result
}

func TestChain(t *testing.T) {
	admitAll := Result{Admit: true}
	refuseA := Result{Reason: "ReasonA", Message: "refused by a"}
	refuseB := Result{Reason: "ReasonB", Message: "refused by b"}
	tests := []struct {
		name      string
		results   []Result
		want      Result
		wantAsked []string
	}{
		{name: "empty chain admits", want: admitAll},
		{name: "all admit", results: []Result{admitAll, admitAll}, want: admitAll, wantAsked: []string{"h0", "h1"}},
		{name: "first refusal wins and stops the chain", results: []Result{admitAll, refuseA, refuseB}, want: refuseA, wantAsked: []string{"h0", "h1"}},
		{name: "refusal at the end", results: []Result{admitAll, admitAll, refuseB}, want: refuseB, wantAsked: []string{"h0", "h1", "h2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			var c Chain
			for i, r := range tt.results {
				c = append(c, recorder{name: "h" + string(rune('0'+i)), result: r, asked: &asked})
			}
			got := c.Admit(&Attributes{Pod: podWith()})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Chain.Admit() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAsked, asked); diff != "" {
				t.Errorf("handlers asked (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandlerFunc(t *testing.T) {
	h := HandlerFunc{N: "x", F: func(a *Attributes) Result { return Result{Admit: len(a.OtherPods) == 0} }}
	if h.Name() != "x" {
		t.Errorf("Name() = %q, want x", h.Name())
	}
	if !h.Admit(&Attributes{}).Admit {
		t.Error("HandlerFunc did not call its function")
	}
}
