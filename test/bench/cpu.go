package main

import (
	"context"
	"fmt"
	"time"
)

// pinnedStart measures, under the static CPU manager policy (CPU 0
// reserved), the start latency of a Guaranteed pod pinned to an exclusive
// CPU beside an unpinned BestEffort one: manifest written → container
// running, alternating, median of -runs.
func pinnedStart(ctx context.Context) {
	fmt.Println("CPU manager static policy (--reserved-cpus 0): one pod, manifest written → container running")
	a := startAgent("benchcpu", "--cpu-manager-policy", "static", "--reserved-cpus", "0")
	defer a.stop()
	var pinned, unpinned []time.Duration
	for i := 0; i < *runs; i++ {
		for _, guaranteed := range []bool{true, false} {
			name := fmt.Sprintf("cpu%d-%v", i, guaranteed)
			body := manifest(name)
			if guaranteed {
				body += "    resources: {requests: {cpu: \"1\", memory: 32Mi}, limits: {cpu: \"1\", memory: 32Mi}}\n"
			}
			t0 := time.Now()
			a.writeBody(name, body)
			took := startedAt(ctx, name+"-benchcpu", 60*time.Second).Sub(t0)
			if guaranteed {
				pinned = append(pinned, took)
			} else {
				unpinned = append(unpinned, took)
			}
			a.remove(name)
			gone(ctx, map[string]bool{name + "-benchcpu": true}, 60*time.Second)
		}
	}
	fmt.Printf("  pinned Guaranteed (cpu: 1, exclusive CPU 1): %v (median of %d)\n", median(pinned), len(pinned))
	fmt.Printf("  unpinned BestEffort (shared pool):          %v (median of %d)\n", median(unpinned), len(unpinned))
	fmt.Println()
}
