//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
)

// The container GC's policy on the real runtime, for a container that
// keeps crashing: by default (the kubelet's
// --maximum-dead-containers-per-container=1) only the newest dead
// instance stays beside a running one; with 2, the newest two. Collected
// instances' log files go with them, the kept ones stay readable.
func TestContainerGC(t *testing.T) {
	for _, tc := range []struct {
		name string
		keep int
	}{{"default", 1}, {"keep two", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var a *agent
			if tc.keep == 1 {
				a = newAgent(t)
			} else {
				a = newAgent(t, "--maximum-dead-containers-per-container="+strconv.Itoa(tc.keep))
			}
			a.start()
			a.write("crash.yaml", `apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  containers:
  - {name: main, image: `+busybox+`, command: ["sh", "-c", "echo instance; exit 1"]}
`)
			var last string
			eventually(t, 90*time.Second, "the third restart seen with the policy's instances kept", func() bool {
				cs := a.containers("crash", "main")
				if len(cs) == 0 {
					return false
				}
				newest := cs[len(cs)-1]
				n, _ := strconv.Atoi(newest.Annotations[cri.AnnotationRestartCount])
				var got, want []int
				for _, c := range cs {
					i, _ := strconv.Atoi(c.Annotations[cri.AnnotationRestartCount])
					got = append(got, i)
				}
				// The newest instance, and keep dead ones: those before it,
				// or itself and those before it once it is dead.
				first := n - tc.keep
				if newest.State == runtimeapi.ContainerState_CONTAINER_EXITED {
					first = n - tc.keep + 1
				}
				for i := max(first, 0); i <= n; i++ {
					want = append(want, i)
				}
				last = fmt.Sprintf("instances %v (newest %s), want %v", got, newest.State, want)
				return n >= 3 && slices.Equal(got, want)
			})
			t.Log(last)
			// --previous is the status's lastState, as the kubelet reads it:
			// the newest instance while it waits for its restart (the one
			// before it is collected then), else the newest dead one.
			eventually(t, 15*time.Second, "nodeagent logs --previous of the crash-looping container", func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				out, errs, err := a.logsCLI(ctx, "--previous", "crash")
				last = fmt.Sprintf("out %q, err %v: %s", out, err, errs)
				return err == nil && out == "instance\n"
			})
			// Collected instances' logs are gone with them, kept ones are
			// there (the GC removes a container, then its logs).
			p := a.status("crash")
			if p == nil {
				t.Fatal("no status for crash")
			}
			dir := filepath.Join(a.logs, p.Namespace+"_"+p.Name+"_"+string(p.UID), "main")
			eventually(t, 10*time.Second, "log files of exactly the kept instances", func() bool {
				var want, got []string
				for _, c := range a.containers("crash", "main") {
					want = append(want, c.Annotations[cri.AnnotationRestartCount]+".log")
				}
				des, _ := os.ReadDir(dir)
				for _, de := range des {
					got = append(got, de.Name())
				}
				slices.Sort(want)
				slices.Sort(got)
				last = fmt.Sprintf("log files %v, want %v", got, want)
				return slices.Equal(got, want)
			})
		})
	}
}
