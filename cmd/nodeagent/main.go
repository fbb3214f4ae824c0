// Command nodeagent is a standalone Kubernetes node agent: it runs the
// pods of a manifest directory on a CRI runtime, as the kubelet runs
// static pods.
//
//	nodeagent [flags]            run the agent
//	nodeagent pods [flags]       list pods from the status directory
//	nodeagent describe NAME      print one pod (spec and status) as YAML
//	nodeagent logs POD [flags]   print (-f: follow) a container's log
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
)

func main() {
	if os.Getenv("NODEAGENT_HEAPPROFILE") == "" {
		// No heap profile asked for: no sampling of allocations, whose
		// stack buckets otherwise grow to ~1.5 MiB of the agent's memory.
		runtime.MemProfileRate = 0
	}
	if os.Getenv("GOGC") == "" {
		// The agent's live heap is a few MiB; the default GOGC=100 lets it
		// double before a collection. 50 keeps the heap's share of the RSS
		// small for little CPU (docs/performance.md). GOGC overrides.
		debug.SetGCPercent(50)
	}
	args := os.Args[1:]
	var err error
	switch {
	case len(args) > 0 && args[0] == "pods":
		err = cmdPods(args[1:])
	case len(args) > 0 && args[0] == "describe":
		err = cmdDescribe(args[1:])
	case len(args) > 0 && args[0] == "logs":
		err = cmdLogs(args[1:])
	default:
		err = cmdRun(args)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodeagent:", err)
		os.Exit(1)
	}
}
