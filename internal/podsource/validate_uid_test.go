package podsource

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A UID pinned by a manifest names the pod's directories: only plain
// tokens are accepted.
func TestValidateUID(t *testing.T) {
	tests := []struct {
		name string
		uid  types.UID
		ok   bool
	}{
		{"generated", "", true},
		{"uuid", "0c7d7a6e-5f4b-4c1e-9a43-2d0b7f6e8a11", true},
		{"md5", "0123456789abcdef0123456789abcdef", true},
		{"parent", "..", false},
		{"dot", ".", false},
		{"path", "../../../../tmp/x", false},
		{"slash", "a/b", false},
		{"leading dash", "-x", false},
		{"too long", types.UID(string(make([]byte, 65))), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod.DeepCopy()
			p.UID = tt.uid
			errs := Validate(p)
			found := false
			for _, e := range errs {
				if e.Field == "metadata.uid" {
					found = true
				}
			}
			if found == tt.ok {
				t.Fatalf("Validate(uid %q) = %v, want ok=%v", tt.uid, errs, tt.ok)
			}
		})
	}
}
