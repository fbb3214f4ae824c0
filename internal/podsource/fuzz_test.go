package podsource

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// FuzzStaticPods feeds arbitrary bytes through decoding, defaulting and
// validation. It must never panic; every pod it returns must pass Validate
// again (defaulting never produces what validation refuses, and Validate
// does not depend on having run once); and reading the same bytes twice
// gives the same pods, UIDs included. Seeds: testdata/fuzz/FuzzStaticPods.
func FuzzStaticPods(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: busybox}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pods, err := StaticPods(data, "node", pod.SourceFile, zap.NewNop())
		if err != nil {
			return
		}
		again, err := StaticPods(data, "node", pod.SourceFile, zap.NewNop())
		if err != nil {
			t.Fatalf("second read failed where the first did not: %v", err)
		}
		if len(again) != len(pods) {
			t.Fatalf("second read gave %d pods, first %d", len(again), len(pods))
		}
		for i, p := range pods {
			if errs := Validate(p); len(errs) > 0 {
				t.Fatalf("pod %d (%s) accepted, then invalid: %v", i, p.Name, errs.ToAggregate())
			}
			if p.UID != again[i].UID || p.Name != again[i].Name {
				t.Fatalf("pod %d read twice: %s/%s, then %s/%s", i, p.Name, p.UID, again[i].Name, again[i].UID)
			}
		}
	})
}

// The seed corpus exercises the accepting path too: these seeds hold
// valid pods (the others are refused, each for a different reason).
func TestFuzzSeedsAccepted(t *testing.T) {
	tests := []struct {
		seed string
		pods int
	}{
		{"web", 1}, {"multi-document", 2}, {"pod-json", 1}, {"podlist-json", 2}, {"podlist-yaml", 2},
		{"mixed-kinds", 1}, {"anchors", 1},
	}
	for _, tt := range tests {
		t.Run(tt.seed, func(t *testing.T) {
			data := readSeed(t, filepath.Join("testdata", "fuzz", "FuzzStaticPods", tt.seed))
			pods, err := StaticPods(data, "node", pod.SourceFile, zap.NewNop())
			if err != nil || len(pods) != tt.pods {
				t.Fatalf("StaticPods = %d pods, %v; want %d pods", len(pods), err, tt.pods)
			}
		})
	}
	for _, seed := range []string{"tricky-values", "unicode-and-ephemeral", "not-a-pod"} {
		data := readSeed(t, filepath.Join("testdata", "fuzz", "FuzzStaticPods", seed))
		if _, err := StaticPods(data, "node", pod.SourceFile, zap.NewNop()); err == nil {
			t.Errorf("seed %s accepted, want it refused", seed)
		} else {
			t.Logf("seed %s: %v", seed, err)
		}
	}
}

// readSeed reads a one-value []byte corpus file ("go test fuzz v1").
func readSeed(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "go test fuzz v1\n[]byte(")
	if !ok || !strings.HasSuffix(body, ")") {
		t.Fatalf("%s: not a []byte corpus file", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(body, ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}
