//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// TestStatsSummary: `kubectl get --raw /api/v1/nodes/<node>/proxy/stats/summary`
// through the real API server, with figures that match what the pod's
// containers do: one holds 64 MiB, one burns CPU under a 200m limit, one
// wrote a known amount of log; /metrics/resource carries the same
// figures under the kubelet's names; the read-only port serves the
// summary with no credentials and nothing that reaches a container.
func TestStatsSummary(t *testing.T) {
	c := apiCluster(t)
	port, roPort := freePort(t), freePort(t)
	a := joined(t, c, "--port", strconv.Itoa(port), "--client-ca-file", c.CAFile, "--read-only-port", strconv.Itoa(roPort))
	const logBytes = 200000 // 2000 lines of 99 characters and a newline
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: a.podName("stats"), Namespace: "default"},
		Spec: v1.PodSpec{NodeName: a.node, Containers: []v1.Container{
			// dd's 64 MiB buffer, filled and held: the pipe is never read.
			{Name: "mem", Image: busybox, Command: []string{"sh", "-c", "dd if=/dev/zero bs=64M count=1 | sleep 100000"}},
			{Name: "burn", Image: busybox, Command: []string{"sh", "-c", "while :; do :; done"},
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}}},
			{Name: "talk", Image: busybox, Command: []string{"sh", "-c",
				`dd if=/dev/zero of=/scratch/f bs=1M count=3; i=0; while [ $i -lt 2000 ]; do printf '%099d\n' $i; i=$((i+1)); done; exec sleep 100000`},
				VolumeMounts: []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}},
		},
			Volumes: []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}},
	}
	p = createRunning(t, c, p)
	summary := func() *statsapi.Summary {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.Kubectl(ctx, "get", "--raw", "/api/v1/nodes/"+a.node+"/proxy/stats/summary")
		if err != nil {
			t.Fatal(err)
		}
		var s statsapi.Summary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("summary: %v: %s", err, out)
		}
		return &s
	}
	podOf := func(s *statsapi.Summary) *statsapi.PodStats {
		for i := range s.Pods {
			if s.Pods[i].PodRef.Name == p.Name && s.Pods[i].PodRef.Namespace == "default" {
				return &s.Pods[i]
			}
		}
		return nil
	}
	ctrOf := func(ps *statsapi.PodStats, name string) *statsapi.ContainerStats {
		for i := range ps.Containers {
			if ps.Containers[i].Name == name {
				return &ps.Containers[i]
			}
		}
		return nil
	}
	// Wait until the three run, dd has filled its buffer and talk has
	// written its lines.
	var s *statsapi.Summary
	eventually(t, 60*time.Second, "the pod's three containers in the summary, mem holding 64 MiB, talk's log written", func() bool {
		s = summary()
		ps := podOf(s)
		if ps == nil || len(ps.Containers) != 3 {
			return false
		}
		mem, talk := ctrOf(ps, "mem"), ctrOf(ps, "talk")
		return mem != nil && mem.Memory != nil && *mem.Memory.WorkingSetBytes >= 64<<20 &&
			talk != nil && talk.Logs != nil && *talk.Logs.UsedBytes >= logBytes
	})
	ps := podOf(s)
	if ps.PodRef.UID != string(p.UID) {
		t.Errorf("podRef %+v: want the API pod's UID %s", ps.PodRef, p.UID)
	}
	mem := ctrOf(ps, "mem")
	if ws := *mem.Memory.WorkingSetBytes; ws > 64<<20+16<<20 {
		t.Errorf("mem's working set %d: want 64 MiB and little more", ws)
	}
	if ws := *ps.Memory.WorkingSetBytes; ws < 64<<20 {
		t.Errorf("pod working set %d: want at least mem's 64 MiB", ws)
	}
	if talk := ctrOf(ps, "talk"); *talk.Logs.UsedBytes > 4*logBytes {
		t.Errorf("talk's logs %d bytes: want about %d (CRI lines carry a timestamp and stream)", *talk.Logs.UsedBytes, logBytes)
	}
	// The pod's volumes (measured at most once a minute): the emptyDir
	// talk filled with 3 MiB, in the pod's ephemeral storage with the
	// log, and the API server's token volume.
	volume := func(ps *statsapi.PodStats, name string) *statsapi.VolumeStats {
		for i := range ps.VolumeStats {
			if strings.HasPrefix(ps.VolumeStats[i].Name, name) {
				return &ps.VolumeStats[i]
			}
		}
		return nil
	}
	eventually(t, 75*time.Second, "the emptyDir's 3 MiB in the summary", func() bool {
		ps := podOf(summary())
		v := volume(ps, "scratch")
		return v != nil && v.UsedBytes != nil && *v.UsedBytes >= 3<<20 && volume(ps, "kube-api-access-") != nil &&
			ps.EphemeralStorage != nil && *ps.EphemeralStorage.UsedBytes >= logBytes+3<<20
	})
	// The runtime's pod-level stats (containerd 1.6 and 2.x both have
	// them) carry the pod's network: its eth0.
	if ps.Network == nil || ps.Network.Name != "eth0" || ps.Network.RxBytes == nil {
		t.Errorf("pod network %+v: want the runtime's figures for eth0", ps.Network)
	}
	got := apiPod(c, t, "default", p.Name)
	for _, cs := range got.Status.ContainerStatuses {
		ct := ctrOf(ps, cs.Name)
		if ct == nil || cs.State.Running == nil {
			t.Fatalf("container %s: %+v / %+v", cs.Name, ct, cs.State)
		}
		if d := cs.State.Running.StartedAt.Sub(ct.StartTime.Time); d < -time.Second || d > 5*time.Second {
			t.Errorf("container %s started %v in the API, %v in the summary", cs.Name, cs.State.Running.StartedAt, ct.StartTime)
		}
	}
	// CPU: burn's rate over 4 s from its cumulative counter, and the
	// runtime's own rate, both near the 200m limit.
	burn0 := ctrOf(ps, "burn").CPU
	time.Sleep(4 * time.Second) // the interval the rate is measured over
	s = summary()
	ps = podOf(s)
	burn1 := ctrOf(ps, "burn").CPU
	cores := float64(*burn1.UsageCoreNanoSeconds-*burn0.UsageCoreNanoSeconds) / float64(burn1.Time.Sub(burn0.Time.Time).Nanoseconds())
	if cores < 0.1 || cores > 0.3 {
		t.Errorf("burn used %.3f cores over %v: want about its 0.2 limit", cores, burn1.Time.Sub(burn0.Time.Time))
	}
	if burn1.UsageNanoCores == nil || *burn1.UsageNanoCores < 1e8 || *burn1.UsageNanoCores > 3e8 {
		t.Errorf("burn's usageNanoCores %v: want about 2e8", burn1.UsageNanoCores)
	}
	if *ps.CPU.UsageCoreNanoSeconds < *burn1.UsageCoreNanoSeconds {
		t.Errorf("pod cpu %d below burn's %d", *ps.CPU.UsageCoreNanoSeconds, *burn1.UsageCoreNanoSeconds)
	}
	// The node, against the host.
	n := s.Node
	var st unix.Statfs_t
	if err := unix.Statfs(a.root, &st); err != nil {
		t.Fatal(err)
	}
	if n.NodeName != a.node || n.Fs == nil || *n.Fs.CapacityBytes != st.Blocks*uint64(st.Bsize) {
		t.Errorf("node %q fs %+v: want the capacity of the agent's root dir's fs (%d)", n.NodeName, n.Fs, st.Blocks*uint64(st.Bsize))
	}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	total := si.Totalram * uint64(si.Unit)
	if ws := *n.Memory.WorkingSetBytes; ws < 64<<20 || ws > total || *n.Memory.AvailableBytes+ws != total {
		t.Errorf("node memory %+v: want a working set within the host's %d and available = total - working set", n.Memory, total)
	}
	if n.CPU == nil || *n.CPU.UsageCoreNanoSeconds == 0 || n.Runtime == nil || n.Runtime.ImageFs == nil || n.Rlimit == nil {
		t.Errorf("node cpu %+v runtime %+v rlimit %+v", n.CPU, n.Runtime, n.Rlimit)
	}

	t.Run("metrics/resource", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.Kubectl(ctx, "get", "--raw", "/api/v1/nodes/"+a.node+"/proxy/metrics/resource")
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(out))
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		found := false
		for _, m := range fams["container_memory_working_set_bytes"].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["pod"] == p.Name && labels["namespace"] == "default" && labels["container"] == "mem" {
				found = true
				if v := m.GetGauge().GetValue(); v < 64<<20 || m.GetTimestampMs() == 0 {
					t.Errorf("mem's working set %v at %d: want at least 64 MiB, with a timestamp", v, m.GetTimestampMs())
				}
			}
		}
		if !found {
			t.Errorf("no container_memory_working_set_bytes for mem in:\n%s", out)
		}
		for _, name := range []string{"node_cpu_usage_seconds_total", "node_memory_working_set_bytes", "pod_cpu_usage_seconds_total",
			"pod_memory_working_set_bytes", "container_cpu_usage_seconds_total", "container_start_time_seconds", "scrape_error"} {
			if _, ok := fams[name]; !ok {
				t.Errorf("no %s", name)
			}
		}
		if v := fams["scrape_error"].GetMetric()[0].GetGauge().GetValue(); v != 0 {
			t.Errorf("scrape_error %v", v)
		}
	})

	t.Run("read-only port", func(t *testing.T) {
		get := func(path string) (int, string) {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", roPort, path))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		code, body := get("/stats/summary")
		var s statsapi.Summary
		if code != 200 || json.Unmarshal([]byte(body), &s) != nil || s.Node.NodeName != a.node {
			t.Fatalf("read-only /stats/summary: %d %.200s", code, body)
		}
		if code, _ := get("/containerLogs/default/" + p.Name + "/talk"); code != 404 {
			t.Errorf("read-only /containerLogs: %d; want 404 (not on the read-only port)", code)
		}
	})
}

// TestKubectlTop: metrics-server, registered with the real API server's
// aggregation layer, scrapes the agent's /metrics/resource, and `kubectl
// top pod` and `kubectl top node` show the pod's 64 MiB and the node.
func TestKubectlTop(t *testing.T) {
	c := apiCluster(t)
	a := joined(t, c, "--port", strconv.Itoa(freePort(t)), "--client-ca-file", c.CAFile)
	p := createRunning(t, c, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: a.podName("top"), Namespace: "default"},
		Spec: v1.PodSpec{NodeName: a.node, Containers: []v1.Container{
			{Name: "mem", Image: busybox, Command: []string{"sh", "-c", "dd if=/dev/zero bs=64M count=1 | sleep 100000"}},
		}},
	})
	// metrics-server listens on this host's address on the pods' bridge:
	// the API server dials it there, and an Endpoints may not hold
	// loopback.
	p = apiPod(c, t, "default", p.Name)
	hostIP := hostAddressFacing(t, net.ParseIP(p.Status.PodIP))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ms, err := c.StartMetricsServer(ctx, hostIP, freePort(t), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Stop()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of metrics-server's log:\n%s", ms.Log())
		}
	})
	kubectl := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return c.Kubectl(ctx, args...)
	}
	// metrics-server reports a pod after two scrapes (a CPU rate needs two
	// samples): within a few resolutions.
	var out string
	eventually(t, 90*time.Second, "kubectl top pod shows the pod with its 64 MiB", func() bool {
		out, err = kubectl("top", "pod", p.Name, "--no-headers", "--containers")
		if err != nil {
			return false
		}
		f := strings.Fields(out) // POD NAME CPU MEMORY
		if len(f) != 4 || f[0] != p.Name || f[1] != "mem" || !strings.HasSuffix(f[3], "Mi") {
			return false
		}
		mib, err := strconv.Atoi(strings.TrimSuffix(f[3], "Mi"))
		return err == nil && mib >= 64 && mib < 96
	})
	t.Logf("kubectl top pod: %s", strings.TrimSpace(out))
	eventually(t, 60*time.Second, "kubectl top node shows the node", func() bool {
		out, err = kubectl("top", "node", a.node, "--no-headers")
		f := strings.Fields(out) // NAME CPU(cores) CPU% MEMORY(bytes) MEMORY%
		return err == nil && len(f) >= 5 && f[0] == a.node && strings.HasSuffix(f[3], "Mi")
	})
	t.Logf("kubectl top node: %s", strings.TrimSpace(out))
}

// hostAddressFacing is this host's IPv4 address on the network that holds
// ip (the CNI bridge's gateway for a pod IP).
func hostAddressFacing(t *testing.T, ip net.IP) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.Contains(ip) {
			return n.IP
		}
	}
	t.Fatalf("no host address on the network of %s", ip)
	return nil
}
