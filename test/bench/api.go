package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

// apiPath measures the API path on a real control plane: n pods created
// through the API server (bound to the agent's node) until all run, and
// until all are reported Running in the API; beside them the same n as
// static pods (the bulk measurement's shape); then the steady state of an
// idle API-mode agent holding them.
func apiPath(ctx context.Context) {
	const n = 30
	c, took, stopCluster := controlPlane(ctx)
	defer stopCluster()
	fmt.Printf("API mode — %d pods through a real kube-apiserver (control plane up in %v)\n", n, took.Round(100*time.Millisecond))
	node := "benchapi"
	a := joinAgent(ctx, c, node)
	defer a.stop()

	var upRun, upAPI, down, cpuUp []time.Duration
	for r := 0; r < *bulkRuns; r++ {
		names := map[string]bool{}
		req0 := apiRequests(ctx, c)
		cpu0, _ := procStat(a.cmd.Process.Pid)
		t0 := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("a%d-%s", i, node)
			names[name] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Admin.CoreV1().Pods("default").Create(ctx, apiBenchPod(name, node), metav1.CreateOptions{}); err != nil {
					fail("create pod: " + err.Error())
				}
			}()
		}
		wg.Wait()
		var last time.Time
		for name := range names {
			if s := startedAt(ctx, name, 120*time.Second); s.After(last) {
				last = s
			}
		}
		upRun = append(upRun, last.Sub(t0))
		for {
			l, err := c.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			running := 0
			if err == nil {
				for _, p := range l.Items {
					if p.Status.Phase == v1.PodRunning {
						running++
					}
				}
			}
			if running == n {
				break
			}
			if time.Since(t0) > 120*time.Second {
				fail("pods not reported Running in the API")
			}
			time.Sleep(20 * time.Millisecond)
		}
		upAPI = append(upAPI, time.Since(t0))
		cpu1, _ := procStat(a.cmd.Process.Pid)
		cpuUp = append(cpuUp, cpu1-cpu0)
		if r == *bulkRuns-1 {
			printRequests(req0, apiRequests(ctx, c))
			time.Sleep(3 * time.Second) // let the start-up work settle
			c0, _ := procStat(a.cmd.Process.Pid)
			time.Sleep(*idle)
			c1, rss := procStat(a.cmd.Process.Pid)
			fmt.Printf("  steady state, API mode, %d pods, %v: CPU %.2f s (%.2f%% of a core), RSS %.1f MiB (%s)\n",
				n, *idle, (c1 - c0).Seconds(), 100*(c1-c0).Seconds()/idle.Seconds(), float64(rss)/1024, rssParts(a.cmd.Process.Pid))
			if path := os.Getenv("NODEAGENT_BENCH_SMAPS"); path != "" {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", a.cmd.Process.Pid))
				os.WriteFile(path, b, 0o644)
			}
		}
		t0 = time.Now()
		for name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.Admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{})
			}()
		}
		wg.Wait()
		for {
			l, err := c.Admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
			if err == nil && len(l.Items) == 0 {
				break
			}
			if time.Since(t0) > 120*time.Second {
				fail("pods not deleted")
			}
			time.Sleep(20 * time.Millisecond)
		}
		gone(ctx, names, 120*time.Second)
		down = append(down, time.Since(t0))
	}
	fmt.Printf("  %-44s %9s (median of %d)\n", fmt.Sprintf("%d API pods created → all running", n), median(upRun).Round(time.Millisecond), *bulkRuns)
	fmt.Printf("  %-44s %9s\n", fmt.Sprintf("%d API pods created → all Running in the API", n), median(upAPI).Round(time.Millisecond))
	fmt.Printf("  %-44s %9s\n", fmt.Sprintf("%d API pods deleted → objects and sandboxes gone", n), median(down).Round(time.Millisecond))
	fmt.Printf("  nodeagent CPU while %d API pods start: %v (median)\n", n, median(cpuUp))
	a.stop()

	// The same n as static pods of a standalone agent, on the same
	// machine with the same control plane up: etcd's and the API
	// server's share of the two cores (and etcd's fsyncs on the disk the
	// agent writes its files to) weigh on the agent's CPU time in both.
	s := startAgent("benchapistatic")
	defer s.stop()
	var cpuStatic []time.Duration
	for r := 0; r < *bulkRuns; r++ {
		_, cpu, _ := s.staticRound(ctx, n)
		cpuStatic = append(cpuStatic, cpu)
	}
	fmt.Printf("  nodeagent CPU while the same %d start as static pods, control plane up: %v (median); API / static %.2f×\n",
		n, median(cpuStatic), median(cpuUp).Seconds()/median(cpuStatic).Seconds())
	fmt.Println()
}

// controlPlane starts etcd, kube-apiserver and kube-controller-manager
// for one measurement; stop ends them and removes their directory.
func controlPlane(ctx context.Context) (c *cluster.Cluster, took time.Duration, stop func()) {
	dir, err := os.MkdirTemp("", "nodeagent-bench-cluster")
	if err != nil {
		fail(err.Error())
	}
	t0 := time.Now()
	c, err = cluster.Start(ctx, cluster.Options{Dir: dir})
	if err != nil {
		os.RemoveAll(dir)
		fail("control plane: " + err.Error())
	}
	return c, time.Since(t0), func() { c.Stop(); os.RemoveAll(dir) }
}

// joinAgent starts an API-mode agent, approves its client CSR and waits
// (60 s at most) until its Node is Ready.
func joinAgent(ctx context.Context, c *cluster.Cluster, node string, extra ...string) *agentProc {
	a := startAgent(node, append([]string{"--kubeconfig", filepath.Join(work, node, "kubeconfig"), "--bootstrap-kubeconfig", c.BootstrapKubeconfig,
		"--cert-dir", filepath.Join(work, node, "pki")}, extra...)...)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(work, node, "kubeconfig")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			a.stop()
			fail("no client certificate for the agent")
		}
		c.ApproveCSRs(ctx, certificatesv1.KubeAPIServerClientKubeletSignerName)
		time.Sleep(100 * time.Millisecond)
	}
	for !apiNodeReady(ctx, c, node) {
		if time.Now().After(deadline) {
			a.stop()
			fail("node not Ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return a
}

func apiNodeReady(ctx context.Context, c *cluster.Cluster, name string) bool {
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

func apiBenchPod(name, node string) *v1.Pod {
	grace := int64(5)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{{
			Name: "main", Image: image, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 100000 & wait"},
		}}}}
}

// apiRequests is the API server's apiserver_request_total by verb and
// resource (with subresource), for the requests a start costs.
func apiRequests(ctx context.Context, c *cluster.Cluster) map[string]float64 {
	body, err := c.Admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		fail("API server metrics: " + err.Error())
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		fail("API server metrics: " + err.Error())
	}
	out := map[string]float64{}
	if f := families["apiserver_request_total"]; f != nil {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			key := l["verb"] + " " + l["resource"]
			if l["subresource"] != "" {
				key += "/" + l["subresource"]
			}
			out[key] += m.GetCounter().GetValue()
		}
	}
	return out
}

// printRequests prints the requests made between two apiRequests, all
// clients' (the agent's, the controller manager's and the bench's own
// creates and lists).
func printRequests(before, after map[string]float64) {
	var keys []string
	for k, v := range after {
		if v-before[k] >= 1 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, after[k]-before[k]))
	}
	fmt.Printf("  API requests while they start (all clients, last run): %s\n", strings.Join(parts, ", "))
}
