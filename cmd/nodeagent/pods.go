package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/internal/status"
)

// cmdPods prints the published pods like `kubectl get pods`.
func cmdPods(args []string) error {
	fs := flag.NewFlagSet("pods", flag.ContinueOnError)
	root := fs.String("root-dir", "/var/lib/kubelet", "nodeagent's --root-dir")
	dir := fs.String("status-dir", "", "nodeagent's --status-dir (default <root-dir>/status)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sdir := statusDir(*root, *dir)
	pods, err := status.List(sdir)
	if err != nil {
		return err
	}
	defer printProblems(sdir)
	if node, err := status.ReadNodeState(sdir); err == nil && node != nil && !node.RuntimeReachable {
		fmt.Printf("NODE: container runtime unreachable since %s (%s ago): %s\nPod states below are the last seen, shown as Unknown.\n\n",
			node.Since.UTC().Format(time.RFC3339), time.Since(node.Since.Time).Round(time.Second), node.Message)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 3, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tREADY\tSTATUS\tRESTARTS\tAGE\tIP")
	for _, p := range pods {
		ready, restarts := 0, int32(0)
		for _, c := range p.Status.ContainerStatuses {
			if c.Ready {
				ready++
			}
			restarts += c.RestartCount
		}
		age := "-"
		if p.Status.StartTime != nil {
			age = time.Since(p.Status.StartTime.Time).Round(time.Second).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%d/%d\t%s\t%d\t%s\t%s\n", p.Namespace, p.Name, ready, len(p.Spec.Containers),
			displayStatus(p), restarts, age, p.Status.PodIP)
	}
	return w.Flush()
}

// printProblems lists the manifests nodeagent could not use.
func printProblems(dir string) {
	problems, err := status.ReadSourceProblems(dir)
	if err != nil || len(problems) == 0 {
		return
	}
	fmt.Println("\nMANIFEST PROBLEMS (these manifests are not applied; pods they ran keep running as last read)")
	var lines []string
	for source, items := range problems {
		for item, reason := range items {
			lines = append(lines, fmt.Sprintf("  %s %s: %s", source, item, reason))
		}
	}
	sort.Strings(lines)
	fmt.Println(strings.Join(lines, "\n"))
}

// displayStatus is kubectl's STATUS column: the pod reason, else the first
// waiting or terminated container reason, else the phase.
func displayStatus(p *v1.Pod) string {
	if p.DeletionTimestamp != nil && p.Status.Phase != v1.PodUnknown {
		return "Terminating" // as kubectl
	}
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	for _, c := range p.Status.InitContainerStatuses {
		if c.State.Terminated != nil && c.State.Terminated.ExitCode == 0 {
			continue
		}
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing" {
			return "Init:" + c.State.Waiting.Reason
		}
		return fmt.Sprintf("Init:%d/%d", countDone(p.Status.InitContainerStatuses), len(p.Spec.InitContainers))
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
			return c.State.Waiting.Reason
		}
		if c.State.Terminated != nil && c.State.Terminated.Reason != "" {
			return c.State.Terminated.Reason
		}
	}
	return string(p.Status.Phase)
}

func countDone(cs []v1.ContainerStatus) int {
	n := 0
	for _, c := range cs {
		if c.State.Terminated != nil && c.State.Terminated.ExitCode == 0 {
			n++
		}
	}
	return n
}

// cmdDescribe prints one published pod as YAML.
func cmdDescribe(args []string) error {
	fs := flag.NewFlagSet("describe", flag.ContinueOnError)
	root := fs.String("root-dir", "/var/lib/kubelet", "nodeagent's --root-dir")
	dir := fs.String("status-dir", "", "nodeagent's --status-dir (default <root-dir>/status)")
	want, err := parseNameArg(fs, args, "usage: nodeagent describe [--root-dir DIR | --status-dir DIR] [NAMESPACE/]NAME")
	if err != nil {
		return err
	}
	pods, err := status.List(statusDir(*root, *dir))
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Name == want || p.Namespace+"/"+p.Name == want || strings.TrimSuffix(p.Name, "-"+p.Spec.NodeName) == want {
			out, err := yaml.Marshal(p)
			if err != nil {
				return err
			}
			if _, err := os.Stdout.Write(out); err != nil {
				return err
			}
			printCPUs(*root, p)
			events, err := status.ReadEvents(statusDir(*root, *dir), p)
			if err != nil || len(events) == 0 {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 3, ' ', 0)
			fmt.Fprintln(w, "\nEvents:\nTYPE\tREASON\tAGE\tCOUNT\tMESSAGE")
			for _, e := range events {
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\n", e.Type, e.Reason,
					time.Since(e.LastTimestamp.Time).Round(time.Second), e.Count, e.Message)
			}
			return w.Flush()
		}
	}
	return fmt.Errorf("pod %q not found in %s", want, statusDir(*root, *dir))
}

func statusDir(root, dir string) string {
	if dir != "" {
		return dir
	}
	return filepath.Join(root, "status")
}

// parseNameArg parses fs from args and returns the one name argument;
// flags may come before or after it.
func parseNameArg(fs *flag.FlagSet, args []string, usage string) (string, error) {
	want := ""
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return "", err
		}
		if fs.NArg() == 0 {
			break
		}
		if want != "" {
			return "", errors.New(usage)
		}
		want, rest = fs.Arg(0), fs.Args()[1:]
	}
	if want == "" {
		return "", errors.New(usage)
	}
	return want, nil
}
