package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/logs"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/status"
)

const logsUsage = "usage: nodeagent logs [-n NAMESPACE] [-c CONTAINER] [-f] [--previous] [--tail N] [--since DURATION] [--timestamps] [--limit-bytes N] [--pod-logs-dir DIR] [--root-dir DIR | --status-dir DIR] POD"

// logsCmd is `nodeagent logs`'s arguments.
type logsCmd struct {
	namespace, container         string
	follow, previous, timestamps bool
	tail, limit                  int64
	since                        time.Duration
	podLogs, root, dir           string
	pod                          string // the POD argument
}

// parseLogsArgs parses `nodeagent logs`'s flags and POD.
func parseLogsArgs(args []string) (*logsCmd, error) {
	c := &logsCmd{}
	fs := flag.NewFlagSet("logs", flag.ContinueOnError)
	fs.StringVar(&c.namespace, "n", "", "the pod's namespace (default: any, if the name is unique)")
	fs.StringVar(&c.namespace, "namespace", "", "same as -n")
	fs.StringVar(&c.container, "c", "", "the container (default: the pod's only container)")
	fs.StringVar(&c.container, "container", "", "same as -c")
	fs.BoolVar(&c.follow, "f", false, "follow the log until the container exits")
	fs.BoolVar(&c.follow, "follow", false, "same as -f")
	fs.BoolVar(&c.previous, "p", false, "the previous instance of the container")
	fs.BoolVar(&c.previous, "previous", false, "same as -p")
	fs.Int64Var(&c.tail, "tail", -1, "lines from the end (-1: all)")
	fs.DurationVar(&c.since, "since", 0, "only lines newer than this (e.g. 10s, 5m)")
	fs.BoolVar(&c.timestamps, "timestamps", false, "prefix each line with its time")
	fs.Int64Var(&c.limit, "limit-bytes", 0, "stop after this many bytes (0: no limit)")
	fs.StringVar(&c.podLogs, "pod-logs-dir", "/var/log/pods", "nodeagent's --pod-logs-dir")
	fs.StringVar(&c.root, "root-dir", "/var/lib/kubelet", "nodeagent's --root-dir")
	fs.StringVar(&c.dir, "status-dir", "", "nodeagent's --status-dir (default <root-dir>/status)")
	var err error
	if c.pod, err = parseNameArg(fs, args, logsUsage); err != nil {
		return nil, err
	}
	if c.since < 0 {
		return nil, fmt.Errorf("--since %v: must not be negative", c.since)
	}
	if c.limit < 0 {
		return nil, fmt.Errorf("--limit-bytes %d: must not be negative", c.limit)
	}
	return c, nil
}

// cmdLogs prints a container's log like `kubectl logs`, from the files
// under the pod logs directory, the pod found in the status directory.
func cmdLogs(args []string) error {
	c, err := parseLogsArgs(args)
	if err != nil {
		return err
	}
	sdir := statusDir(c.root, c.dir)
	pods, err := status.List(sdir)
	if err != nil {
		return err
	}
	p, err := findPod(pods, c.namespace, c.pod)
	if err != nil {
		return fmt.Errorf("%w (pods in %s)", err, sdir)
	}
	if c.container, err = pickContainer(p, c.container); err != nil {
		return err
	}
	d, err := logs.OpenContainerDir(c.podLogs, logs.ContainerRef{
		Namespace: p.Namespace, Pod: p.Name, UID: string(p.UID), Container: c.container,
	})
	if err != nil {
		return fmt.Errorf("container %q of pod %s/%s: %w", c.container, p.Namespace, p.Name, err)
	}
	defer d.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.print(ctx, d, sdir, p)
}

// print reads the container's log in d to stdout; a followed log of the
// current instance ends when the status directory shows it exited.
func (c *logsCmd) print(ctx context.Context, d *logs.ContainerDir, sdir string, p *v1.Pod) error {
	opts := logs.Options{Previous: c.previous, LatestIsPrevious: pod.LatestIsLastState(p, c.container),
		TailLines: c.tail, Timestamps: c.timestamps, LimitBytes: c.limit, Follow: c.follow}
	if c.since > 0 {
		opts.SinceTime = time.Now().Add(-c.since)
	}
	if c.follow && !c.previous {
		restarts, err := d.Restarts()
		if err != nil {
			return err
		}
		if len(restarts) > 0 {
			exited := make(chan struct{})
			go watchExit(ctx, sdir, p.UID, c.container, restarts[len(restarts)-1], exited)
			opts.Exited = exited
		}
	}
	out := &flushWriter{bufio.NewWriterSize(os.Stdout, 64<<10)}
	err := logs.Read(ctx, d, opts, out)
	if ferr := out.Writer.Flush(); err == nil {
		err = ferr
	}
	if errors.Is(err, logs.ErrNotFound) && c.previous {
		return fmt.Errorf("previous terminated container %q in pod %q not found", c.container, p.Name)
	}
	if errors.Is(err, context.Canceled) {
		return nil // interrupted
	}
	return err
}

// flushWriter buffers output; logs.Read flushes it whenever a followed
// log is read up to its end.
type flushWriter struct{ *bufio.Writer }

func (w *flushWriter) Flush() { w.Writer.Flush() }

// findPod finds a published pod by name (a static pod also by its
// manifest's name, without the node suffix), or [namespace/]name.
func findPod(pods []*v1.Pod, namespace, want string) (*v1.Pod, error) {
	if ns, name, ok := strings.Cut(want, "/"); ok && namespace == "" {
		namespace, want = ns, name
	}
	var found []*v1.Pod
	for _, p := range pods {
		if namespace != "" && p.Namespace != namespace {
			continue
		}
		if p.Name == want || strings.TrimSuffix(p.Name, "-"+p.Spec.NodeName) == want {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("pod %q not found", want)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, p := range found {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return nil, fmt.Errorf("pod %q is ambiguous, one of: %s (use -n NAMESPACE or the full name)", want, strings.Join(names, ", "))
}

// pickContainer is the named container (init and ephemeral containers
// too), else the default one: kubectl's default-container annotation, or
// the only container.
func pickContainer(p *v1.Pod, name string) (string, error) {
	var all, init []string
	for _, c := range p.Spec.Containers {
		all = append(all, c.Name)
	}
	for _, c := range p.Spec.InitContainers {
		init = append(init, c.Name)
	}
	if name != "" {
		for _, c := range append(append([]string{}, all...), init...) {
			if c == name {
				return name, nil
			}
		}
		for _, c := range p.Spec.EphemeralContainers {
			if c.Name == name {
				return name, nil
			}
		}
		return "", fmt.Errorf("container %q is not valid for pod %s: one of %s", name, p.Name, containerChoice(all, init))
	}
	if def := p.Annotations["kubectl.kubernetes.io/default-container"]; def != "" {
		for _, c := range all {
			if c == def {
				return def, nil
			}
		}
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return "", fmt.Errorf("a container name must be specified for pod %s, choose one of: %s", p.Name, containerChoice(all, init))
}

func containerChoice(all, init []string) string {
	s := "[" + strings.Join(all, " ") + "]"
	if len(init) > 0 {
		s += " or one of the init containers: [" + strings.Join(init, " ") + "]"
	}
	return s
}

// watchExit closes exited once the pod's status shows that the
// container's instance restart has ended: a later instance, its
// termination, or the pod gone. It looks every second until ctx ends.
func watchExit(ctx context.Context, sdir string, uid types.UID, container string, restart int, exited chan<- struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if pods, err := status.List(sdir); err == nil && instanceEnded(pods, uid, container, restart) {
			close(exited)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func instanceEnded(pods []*v1.Pod, uid types.UID, container string, restart int) bool {
	for _, p := range pods {
		if p.UID != uid {
			continue
		}
		all := append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
		all = append(all, p.Status.EphemeralContainerStatuses...)
		for _, c := range all {
			if c.Name != container {
				continue
			}
			switch n := int(c.RestartCount); {
			case n > restart:
				return true
			case n < restart, c.State.Running != nil:
				return false // not published yet, or running
			}
			// The latest instance's end: terminated, or waiting to
			// restart with it as the last termination (while an instance
			// is being created, the last termination is the one before).
			last := c.LastTerminationState.Terminated
			return c.State.Terminated != nil || last != nil && last.ContainerID == c.ContainerID
		}
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed
	}
	return true // the pod is gone
}
