package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
)

// probeCost measures what probing costs: 50 pods × 2 containers, each a
// busybox httpd, held by an idle agent, first without probes, then with
// a readiness httpGet and a liveness tcpSocket probe on every container
// every 10 s (the default period: 20 probes a second), then with an exec
// readiness probe every 10 s on every container (10 ExecSyncs a second:
// the agent's cost and containerd's, whose exec dominates). At a 1 s
// period this 2-core box saturates (load ~120: a runc exec per probe, a
// forked httpd child per request), and probes time out. CPU is the agent's user +
// system time over the window; for exec, containerd's (and its shims')
// too when its PID is known.
func probeCost(ctx context.Context) {
	const pods = 50
	window := *idle / 2
	variants := []struct{ name, probes string }{
		{"no probes", ""},
		{"httpGet readiness + tcpSocket liveness, period 10s", `
    readinessProbe: {httpGet: {path: /, port: %d}, periodSeconds: 10}
    livenessProbe: {tcpSocket: {port: %d}, periodSeconds: 10}`},
		{"exec readiness, period 10s", `
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 10}`},
	}
	fmt.Printf("probes — %d pods × 2 containers (100 containers), agent CPU over %v\n", pods, window)
	ctrd := containerdPID()
	for _, v := range variants {
		node := "benchprobe"
		a := startAgent(node)
		names := map[string]bool{}
		for i := 0; i < pods; i++ {
			name := fmt.Sprintf("p%d", i)
			a.writeBody(name, probedManifest(name, v.probes))
			names[name+"-"+node] = true
		}
		for name := range names {
			startedAt(ctx, name, 180*time.Second)
		}
		time.Sleep(5 * time.Second) // let start-up work and the first probes settle
		c0, _ := procStat(a.cmd.Process.Pid)
		r0 := treeCPU(ctrd)
		time.Sleep(window)
		c1, rss := procStat(a.cmd.Process.Pid)
		r1 := treeCPU(ctrd)
		ready := readyCount(a, names)
		line := fmt.Sprintf("  %-52s agent CPU %.2f s (%.2f%% of a core), RSS %.1f MiB", v.name+":", (c1 - c0).Seconds(),
			100*(c1-c0).Seconds()/window.Seconds(), float64(rss)/1024)
		if ctrd > 0 {
			line += fmt.Sprintf("; containerd+shims %.2f s", (r1 - r0).Seconds())
		}
		fmt.Printf("%s; %d/%d pods Ready\n", line, ready, pods)
		for i := 0; i < pods; i++ {
			a.remove(fmt.Sprintf("p%d", i))
		}
		gone(ctx, names, 180*time.Second)
		a.stop()
		os.RemoveAll(filepath.Join(work, node))
	}
	fmt.Println()
}

// probedManifest is a pod of two busybox httpd containers (ports 8080
// and 8081) with probes (a format with the container's port twice).
func probedManifest(name, probes string) string {
	body := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n", name)
	for i, port := range []int{8080, 8081} {
		body += fmt.Sprintf(`  - name: c%d
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p %d -h /www"]`, i, image, port)
		if probes != "" {
			if strings.Contains(probes, "%d") {
				body += fmt.Sprintf(probes, port, port)
			} else {
				body += probes
			}
		}
		body += "\n"
	}
	return body
}

// readyCount counts the pods whose published status is Ready.
func readyCount(a *agentProc, names map[string]bool) int {
	n := 0
	for name := range names {
		b, err := os.ReadFile(filepath.Join(a.dir, "root", "status", "default_"+name+".json"))
		p := &v1.Pod{}
		if err != nil || json.Unmarshal(b, p) != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// containerdPID is the rig's containerd, from its pid file (0 if unknown).
func containerdPID() int {
	b, err := os.ReadFile(filepath.Join(os.Getenv("NODEAGENT_RIG_DIR"), "containerd.pid"))
	if err != nil {
		return 0
	}
	var pid int
	fmt.Sscan(strings.TrimSpace(string(b)), &pid)
	return pid
}

// treeCPU is the CPU time of pid and of the containerd shims (processes
// named containerd-shim*), which run the execs.
func treeCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	total := cpuOf(pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var p int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(comm)), "containerd-shim") {
			total += cpuOf(p)
		}
	}
	return total
}

// cpuOf is a process's user + system time; 0 once it is gone.
func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(b), ')')
	if err != nil || i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, st int
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &st)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
}
