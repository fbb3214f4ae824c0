//go:build integration

package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/admit"
)

// The rest of the container spec on containerd: the kubelet-managed
// /etc/hosts (pod IP with hostname and FQDN, hostAliases; the node's file
// with the aliases for a host-network pod) and the
// hostname containerd writes from the sandbox config; seccomp
// RuntimeDefault enforced (mode 2) while a pod without a profile runs
// unconfined; /proc paths masked and read-only; a failed container's log
// tail as its termination message (FallbackToLogsOnError); pods asking
// for a user namespace, or for AppArmor on a host without it, are refused
// at admission.
func TestContainerSpec(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("spec.yaml", `apiVersion: v1
kind: Pod
metadata: {name: spec}
spec:
  hostname: myhost
  subdomain: sub
  hostAliases:
  - {ip: 10.1.2.3, hostnames: [db.internal, db]}
  securityContext:
    seccompProfile: {type: RuntimeDefault}
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
  - name: plain
    image: `+busybox+`
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    securityContext:
      seccompProfile: {type: Unconfined}
`)
	a.write("fallback.yaml", `apiVersion: v1
kind: Pod
metadata: {name: fallback}
spec:
  restartPolicy: Never
  containers:
  - name: fails
    image: `+busybox+`
    command: ["sh", "-c", "echo starting up; echo 'fatal: no config found' >&2; exit 1"]
    terminationMessagePolicy: FallbackToLogsOnError
`)
	a.write("hostnet.yaml", `apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  hostAliases:
  - {ip: 10.9.8.7, hostnames: [registry.internal]}
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`)
	a.write("apparmor.yaml", `apiVersion: v1
kind: Pod
metadata: {name: apparmor}
spec:
  securityContext:
    appArmorProfile: {type: RuntimeDefault}
  containers:
  - {name: main, image: `+busybox+`, command: ["sleep", "3600"]}
`)
	a.write("userns.yaml", `apiVersion: v1
kind: Pod
metadata: {name: userns}
spec:
  hostUsers: false
  containers:
  - {name: main, image: `+busybox+`, command: ["sleep", "3600"]}
`)

	eventually(t, 60*time.Second, "both containers of the spec pod running with a pod IP", func() bool {
		p := a.status("spec")
		return p != nil && p.Status.PodIP != "" && a.running("spec", "main") != nil && a.running("spec", "plain") != nil
	})
	p := a.status("spec")
	main, plain := a.running("spec", "main"), a.running("spec", "plain")

	hosts := execIn(t, main.Id, "cat", "/etc/hosts")
	for _, want := range []string{
		"# Kubernetes-managed hosts file.\n",
		"127.0.0.1\tlocalhost\n",
		p.Status.PodIP + "\tmyhost.sub." + p.Namespace + ".svc.cluster.local\tmyhost\n",
		"# Entries added by HostAliases.\n10.1.2.3\tdb.internal\tdb\n",
	} {
		if !strings.Contains(hosts, want) {
			t.Errorf("/etc/hosts lacks %q:\n%s", want, hosts)
		}
	}
	if got := strings.TrimSpace(execIn(t, main.Id, "cat", "/etc/hostname")); got != "myhost" {
		t.Errorf("/etc/hostname = %q, want myhost", got)
	}
	if got := strings.TrimSpace(execIn(t, main.Id, "hostname")); got != "myhost" {
		t.Errorf("hostname = %q, want myhost", got)
	}
	if got := strings.TrimSpace(execIn(t, main.Id, "grep", "Seccomp:", "/proc/1/status")); got != "Seccomp:\t2" {
		t.Errorf("main (pod RuntimeDefault): %q, want Seccomp:\\t2 (filter)", got)
	}
	if got := strings.TrimSpace(execIn(t, plain.Id, "grep", "Seccomp:", "/proc/1/status")); got != "Seccomp:\t0" {
		t.Errorf("plain (container Unconfined): %q, want Seccomp:\\t0", got)
	}
	mounts := execIn(t, main.Id, "cat", "/proc/mounts")
	// runc masks only the paths the kernel has.
	checked := 0
	for _, path := range []string{"/proc/kcore", "/proc/keys", "/proc/timer_list"} {
		if _, err := os.Stat(path); err != nil {
			continue
		}
		checked++
		if !strings.Contains(mounts, " "+path+" ") {
			t.Errorf("%s is not masked:\n%s", path, mounts)
		}
	}
	if checked == 0 {
		t.Error("none of /proc/kcore, /proc/keys, /proc/timer_list exists on this host: masking unchecked")
	}
	for _, l := range strings.Split(mounts, "\n") {
		if f := strings.Fields(l); len(f) >= 4 && f[1] == "/proc/sys" && !strings.HasPrefix(f[3], "ro") {
			t.Errorf("/proc/sys is mounted %s, want read-only", f[3])
		}
	}
	if !strings.Contains(mounts, " /proc/sys ") {
		t.Errorf("/proc/sys is not a read-only mount:\n%s", mounts)
	}

	eventually(t, 60*time.Second, "the host-network pod running", func() bool { return a.running("hostnet", "main") != nil })
	nodeHosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	want := "# Kubernetes-managed hosts file (host network).\n" + string(nodeHosts) + "\n# Entries added by HostAliases.\n10.9.8.7\tregistry.internal\n"
	if got := execIn(t, a.running("hostnet", "main").Id, "cat", "/etc/hosts"); got != want {
		t.Errorf("host-network /etc/hosts = %q, want the node's with the aliases: %q", got, want)
	}

	var last *v1.ContainerStateTerminated
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("fallback container's last terminated state: %+v", last)
		}
	})
	eventually(t, 60*time.Second, "the failed container's log tail as its termination message", func() bool {
		p := a.status("fallback")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		last = p.Status.ContainerStatuses[0].State.Terminated
		// Both streams' lines; their order in the log is the runtime's, which
		// copies stdout and stderr concurrently: two lines written a few
		// microseconds apart may land either way.
		return last != nil && last.ExitCode == 1 &&
			(last.Message == "starting up\nfatal: no config found" || last.Message == "fatal: no config found\nstarting up")
	})

	refused := []struct{ pod, reason, message string }{{"userns", "UserNamespacesNotSupported", "hostUsers: false"}}
	if err := admit.AppArmorHost("/sys"); err != nil {
		refused = append(refused, struct{ pod, reason, message string }{"apparmor", "AppArmor", "Cannot enforce AppArmor: " + err.Error()})
	} else {
		eventually(t, 60*time.Second, "the AppArmor pod running on a host that enforces AppArmor", func() bool {
			return a.running("apparmor", "main") != nil
		})
	}
	for _, tc := range refused {
		eventually(t, 30*time.Second, tc.pod+" pod refused with reason "+tc.reason, func() bool {
			p := a.status(tc.pod)
			return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == tc.reason && strings.Contains(p.Status.Message, tc.message)
		})
		if len(a.sandboxes(tc.pod)) != 0 {
			t.Errorf("%s pod got a sandbox despite its refusal", tc.pod)
		}
	}
}
