package cri_test

import (
	"testing"

	"github.com/nodeagent/nodeagent/internal/cri"
)

// Ownership: the agent's own labels on its node; the kubelet's (a pod
// UID, none of nodeagent's) only when it adopts them, and then the lists
// carry no selector the runtime could filter the kubelet's away with.
func TestOwnership(t *testing.T) {
	mine := map[string]string{cri.LabelManaged: "true", cri.LabelNode: "n1", cri.LabelPodUID: "u"}
	otherNode := map[string]string{cri.LabelManaged: "true", cri.LabelNode: "n2", cri.LabelPodUID: "u"}
	kubelet := map[string]string{cri.LabelPodUID: "u"}
	foreign := map[string]string{"app": "x"}
	for _, tt := range []struct {
		adopt                                  bool
		mine, otherNode, kubelet, foreign, sel bool
	}{
		{adopt: false, mine: true, sel: true},
		{adopt: true, mine: true, kubelet: true},
	} {
		o := cri.NewOwnership("n1", tt.adopt)
		got := []bool{o.Owns(mine), o.Owns(otherNode), o.Owns(kubelet), o.Owns(foreign), o.Selector != nil}
		want := []bool{tt.mine, tt.otherNode, tt.kubelet, tt.foreign, tt.sel}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("adopt %v: owns mine, other node, kubelet, foreign, has selector = %v; want %v", tt.adopt, got, want)
				break
			}
		}
	}
}
