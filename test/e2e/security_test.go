//go:build integration

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/status"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// The subPath container escape: an init container plants symlinks out of
// an emptyDir (absolute to /, relative up the tree); containers mounting
// them by subPath must never get the host. They are refused with
// CreateContainerConfigError, and nothing is written on the host.
func TestSubPathSymlinkEscape(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	marker := "nodeagent-escape-" + a.node
	hostFile := filepath.Join("/tmp", marker)
	t.Cleanup(func() { os.Remove(hostFile) })
	a.write("evil.yaml", `apiVersion: v1
kind: Pod
metadata: {name: evil}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  volumes:
  - {name: vol, emptyDir: {}}
  initContainers:
  - name: plant
    image: `+busybox+`
    command: ["sh", "-c", "ln -s / /vol/abs && ln -s ../../../../../../../../.. /vol/rel && mkdir /vol/d && ln -s ../../../../../../../../../tmp /vol/d/up"]
    volumeMounts: [{name: vol, mountPath: /vol}]
  containers:
  - name: abs
    image: `+busybox+`
    command: ["sh", "-c", "touch /host/tmp/`+marker+`"]
    volumeMounts: [{name: vol, mountPath: /host, subPath: abs}]
  - name: rel
    image: `+busybox+`
    command: ["sh", "-c", "touch /host/tmp/`+marker+`"]
    volumeMounts: [{name: vol, mountPath: /host, subPath: rel}]
  - name: nested
    image: `+busybox+`
    command: ["sh", "-c", "touch /host/`+marker+`"]
    volumeMounts: [{name: vol, mountPath: /host, subPath: d/up}]
`)
	eventually(t, 60*time.Second, "every app container refused CreateContainerConfigError", func() bool {
		p := a.status("evil")
		if p == nil || len(p.Status.ContainerStatuses) != 3 {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			w := cs.State.Waiting
			if w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, "outside the volume") {
				return false
			}
		}
		return true
	})
	if _, err := os.Stat(hostFile); err == nil {
		t.Fatalf("a container wrote %s on the host", hostFile)
	}
	for _, name := range []string{"abs", "rel", "nested"} {
		if cs := a.containers("evil", name); len(cs) != 0 {
			t.Fatalf("container %s was created: %v", name, cs)
		}
	}
}

// A subPath with ".." is refused by validation, with the field path, and
// nothing is created on the host.
func TestSubPathDotDotRefused(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	hostDir := filepath.Join("/tmp", "nodeagent-dotdot-"+a.node)
	t.Cleanup(func() { os.RemoveAll(hostDir) })
	a.write("dotdot.yaml", `apiVersion: v1
kind: Pod
metadata: {name: dotdot}
spec:
  volumes:
  - {name: vol, emptyDir: {}}
  containers:
  - name: main
    image: `+busybox+`
    command: ["sleep", "1000"]
    volumeMounts: [{name: vol, mountPath: /x, subPath: "../../../../../../../../..`+hostDir+`"}]
`)
	eventually(t, 30*time.Second, "the problem published with its field path", func() bool {
		probs, _ := status.ReadSourceProblems(filepath.Join(a.root, "status"))
		return strings.Contains(probs["file"]["dotdot.yaml"], "spec.containers[0].volumeMounts[0].subPath")
	})
	if len(a.sandboxes("dotdot")) != 0 {
		t.Fatal("the pod was started")
	}
	if _, err := os.Stat(hostDir); err == nil {
		t.Fatalf("%s was created on the host", hostDir)
	}
}

// Legitimate subPaths work: a directory and a file inside the volume, one
// reached through a symlink that stays inside; the bind mounts go with the
// pod.
func TestSubPathLegitimate(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("ok.yaml", `apiVersion: v1
kind: Pod
metadata: {name: subok}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  volumes:
  - {name: vol, emptyDir: {}}
  initContainers:
  - name: prep
    image: `+busybox+`
    command: ["sh", "-c", "mkdir -p /vol/data/dir && echo hello > /vol/data/file && ln -s data/dir /vol/link"]
    volumeMounts: [{name: vol, mountPath: /vol}]
  containers:
  - name: check
    image: `+busybox+`
    command: ["sh", "-c", "test \"$(cat /f)\" = hello && test -d /d/dir && echo via-link > /l/x && test \"$(cat /d/dir/x)\" = via-link && test -d /fresh && exec sleep 1000"]
    volumeMounts:
    - {name: vol, mountPath: /d, subPath: data}
    - {name: vol, mountPath: /f, subPath: data/file}
    - {name: vol, mountPath: /l, subPath: link}
    - {name: vol, mountPath: /fresh, subPath: not/yet/there}
`)
	// The checks passed once the container sleeps; its four subPath
	// bind mounts are then under the root dir (while it runs: a finished
	// pod's volumes are torn down, as the kubelet's).
	var mounts []string
	eventually(t, 60*time.Second, "checks passed, the container running on its subPaths", func() bool {
		p := a.status("subok")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		if term := p.Status.ContainerStatuses[0].State.Terminated; term != nil {
			t.Fatalf("check failed: exit %d (%s)", term.ExitCode, term.Reason)
		}
		mounts, _ = volume.MountsUnder(a.root)
		return p.Status.ContainerStatuses[0].State.Running != nil && len(mounts) == 4
	})
	a.remove("ok.yaml")
	eventually(t, 30*time.Second, "pod gone", func() bool { return len(a.sandboxes("subok")) == 0 })
	eventually(t, 10*time.Second, "its bind mounts and directory gone", func() bool {
		mounts, _ := volume.MountsUnder(a.root)
		entries, _ := os.ReadDir(filepath.Join(a.root, "pods"))
		return len(mounts) == 0 && len(entries) == 0
	})
}

// Every manifest that gives no pod is listed by `nodeagent pods` with its
// reason; the good pod runs.
func TestSkippedFilesListed(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a.write("a-good.yaml", sleeper("good", "g"))
	a.write("b-dup.yaml", sleeper("good", "other"))
	a.write("kind.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
	a.write("long.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: "+strings.Repeat("l", 240)+"}\nspec:\n  containers: [{name: main, image: "+busybox+"}]\n")
	must(syscall.Mkfifo(filepath.Join(a.manifests, "fifo.yaml"), 0o644))
	must(os.Symlink("/dev/zero", filepath.Join(a.manifests, "zero.yaml")))
	must(os.Symlink("loop.yaml", filepath.Join(a.manifests, "loop.yaml")))
	eventually(t, 60*time.Second, "good running", func() bool { return a.running("good", "main") != nil })
	want := map[string]string{
		"b-dup.yaml": "is already defined by a-good.yaml",
		"kind.yaml":  "no Pod in the manifest",
		"long.yaml":  "metadata.name: too long",
		"fifo.yaml":  "not a regular file (named pipe)",
		"zero.yaml":  "not a regular file (character device)",
		"loop.yaml":  "too many levels of symbolic links",
	}
	eventually(t, 10*time.Second, "every skipped file listed by `nodeagent pods`", func() bool {
		out := a.pods()
		for file, why := range want {
			if !regexp.MustCompile(`file ` + regexp.QuoteMeta(file) + `: .*` + regexp.QuoteMeta(why)).MatchString(out) {
				return false
			}
		}
		return true
	})
	if c := a.running("good", "main"); c == nil {
		t.Fatal("the good pod stopped")
	}
}

// Resources at the API server's level: negative limits are refused with
// their field path; a pod with only limits gets requests = limits (the
// API's defaulting) and so is refused OutOfcpu on this small node.
func TestResourceValidationAndDefaulting(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	res := func(name, resources string) string {
		return "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers:\n  - name: main\n    image: " + busybox +
			"\n    command: [sleep, \"1000\"]\n    resources: " + resources + "\n"
	}
	a.write("negative.yaml", res("negative", `{limits: {cpu: "-1", memory: "-5Mi"}}`))
	a.write("huge.yaml", res("huge", `{limits: {cpu: "100", memory: 64Gi}}`))
	eventually(t, 10*time.Second, "negative limits refused with the field paths", func() bool {
		probs, _ := status.ReadSourceProblems(filepath.Join(a.root, "status"))
		why := probs["file"]["negative.yaml"]
		return strings.Contains(why, "spec.containers[0].resources.limits[cpu]") &&
			strings.Contains(why, "spec.containers[0].resources.limits[memory]")
	})
	eventually(t, 10*time.Second, "limits-only pod refused OutOfcpu", func() bool {
		p := a.status("huge")
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "OutOfcpu"
	})
	if len(a.sandboxes("negative")) != 0 || len(a.sandboxes("huge")) != 0 {
		t.Fatal("a refused pod reached the runtime")
	}
}

// runAsNonRoot is verified against the image's user (the rig's busybox
// has none: root), a numeric runAsUser wins; the fsGroup and
// supplementalGroups reach the process; supplementalGroupsPolicy: Strict
// runs where the runtime applies it and is refused at admission where it
// cannot (the kubelet's SupplementalGroupsPolicyNotSupported), never
// downgraded; recursiveReadOnly: Enabled makes a volume's submounts
// read-only too where the runtime can, and is refused where it cannot.
func TestSecurityContextIdentity(t *testing.T) {
	t.Parallel()
	f, err := cri.ReadFeatures(context.Background(), conn, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("NODEAGENT_RIG_CONTAINERD") == "v2" && (!f.SupplementalGroupsPolicy || !f.RecursiveReadOnlyMounts) {
		t.Fatalf("containerd 2 reports features %+v; want supplementalGroupsPolicy and recursive read-only mounts", f)
	}
	// A volume with a submount: the host directory and a tmpfs beneath it.
	host := t.TempDir()
	sub := filepath.Join(host, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(sub, syscall.MNT_DETACH) })
	a := newAgent(t)
	a.start()
	a.write("root.yaml", `apiVersion: v1
kind: Pod
metadata: {name: root}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true}
  containers:
  - {name: c, image: `+busybox+`, command: [sleep, "3600"]}
`)
	a.write("user.yaml", `apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000, supplementalGroups: [3000]}
  containers:
  - {name: c, image: `+busybox+`, command: [sh, -c, "echo ids $(id -u) $(id -G); exec sleep 3600"]}
`)
	a.write("strict.yaml", `apiVersion: v1
kind: Pod
metadata: {name: strict}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000, runAsGroup: 1000, supplementalGroups: [3000], supplementalGroupsPolicy: Strict}
  containers:
  - {name: c, image: `+busybox+`, command: [sh, -c, "echo ids $(id -u) $(id -G); exec sleep 3600"]}
`)
	a.write("rro.yaml", `apiVersion: v1
kind: Pod
metadata: {name: rro}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: h, hostPath: {path: `+host+`}}]
  containers:
  - name: c
    image: `+busybox+`
    command: [sh, -c, "if touch /h/sub/f 2>/dev/null; then echo sub writable; else echo sub read-only; fi; exec sleep 3600"]
    volumeMounts: [{name: h, mountPath: /h, readOnly: true, recursiveReadOnly: Enabled}]
`)
	eventually(t, 60*time.Second, "root refused, user running", func() bool {
		p, u := a.status("root"), a.status("user")
		if p == nil || u == nil || len(p.Status.ContainerStatuses) != 1 || u.Status.Phase != v1.PodRunning {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == "CreateContainerConfigError" &&
			strings.Contains(w.Message, `container has runAsNonRoot and image will run as root (pod: "root-`+a.node+`_default(`)
	})
	if cs := a.containers("root", "c"); len(cs) != 0 {
		t.Fatalf("the runAsNonRoot container on a root image was created: %v", cs)
	}
	eventually(t, 30*time.Second, "the user pod's ids logged", func() bool {
		return strings.Contains(a.logsOK(t, "user"), "ids 1000 0 2000 3000")
	})
	if f.SupplementalGroupsPolicy {
		eventually(t, 60*time.Second, "Strict applied: only the pod's groups", func() bool {
			return strings.Contains(a.logsOK(t, "strict"), "ids 1000 1000 3000")
		})
	} else {
		eventually(t, 60*time.Second, "Strict refused at admission", func() bool {
			p := a.status("strict")
			return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "SupplementalGroupsPolicyNotSupported" &&
				p.Status.Message == "Pod was rejected: SupplementalGroupsPolicy=Strict is not supported in this node"
		})
	}
	if f.RecursiveReadOnlyMounts {
		eventually(t, 60*time.Second, "the submount read-only in the container", func() bool {
			return strings.Contains(a.logsOK(t, "rro"), "sub read-only")
		})
	} else {
		eventually(t, 60*time.Second, "recursiveReadOnly: Enabled refused", func() bool {
			p := a.status("rro")
			if p == nil || len(p.Status.ContainerStatuses) != 1 {
				return false
			}
			w := p.Status.ContainerStatuses[0].State.Waiting
			return w != nil && w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, "not supported by the runtime")
		})
	}
	if _, err := os.Stat(filepath.Join(sub, "f")); err == nil {
		t.Fatal("the container wrote into a recursively read-only volume's submount")
	}
}

// Memory is memory, and files a container can write are read back with
// a bound: a medium: Memory emptyDir is a tmpfs of its sizeLimit (of the
// pod's memory limit without one); a container that writes 1 GiB into
// its /etc/hosts and exits is restarted with a fresh hosts file and the
// agent's peak RSS does not move; a non-root container writes its
// termination message and it is reported.
func TestMemoryVolumesAndWritableFiles(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("mem.yaml", `apiVersion: v1
kind: Pod
metadata: {name: mem}
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - {name: sized, emptyDir: {medium: Memory, sizeLimit: 7Mi}}
  - {name: unsized, emptyDir: {medium: Memory}}
  containers:
  - name: main
    image: `+busybox+`
    command: [sleep, "3600"]
    volumeMounts: [{name: sized, mountPath: /sized}, {name: unsized, mountPath: /unsized}]
    resources: {limits: {memory: 64Mi}}
`)
	a.write("nonroot.yaml", `apiVersion: v1
kind: Pod
metadata: {name: nonroot}
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 1000, runAsNonRoot: true}
  containers:
  - {name: main, image: `+busybox+`, command: [sh, -c, "echo -n written by $(id -u) > /dev/termination-log"]}
`)
	eventually(t, 60*time.Second, "mem running", func() bool { return a.running("mem", "main") != nil })
	mounts := execIn(t, a.running("mem", "main").Id, "cat", "/proc/mounts")
	for _, want := range []string{"tmpfs /sized tmpfs ", "size=7168k", "tmpfs /unsized tmpfs ", "size=65536k"} {
		if !strings.Contains(mounts, want) {
			t.Errorf("/proc/mounts lacks %q:\n%s", want, mounts)
		}
	}
	eventually(t, 60*time.Second, "the non-root container's termination message", func() bool {
		p := a.status("nonroot")
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			return false
		}
		return p.Status.ContainerStatuses[0].State.Terminated.Message == "written by 1000"
	})
	hwm := func() int64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				return n >> 10 // MiB
			}
		}
		t.Fatal("no VmHWM")
		return 0
	}
	before := hwm()
	a.write("hosts.yaml", `apiVersion: v1
kind: Pod
metadata: {name: hosts}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: d, emptyDir: {}}]
  containers:
  - name: main
    image: `+busybox+`
    command: [sh, -c, "[ -e /d/done ] && exec sleep 3600; touch /d/done; dd if=/dev/zero bs=1M count=1024 | tr '\\0' 'x' >> /etc/hosts; [ $(wc -c < /etc/hosts) -gt 1073741824 ] || exit 3"]
    volumeMounts: [{name: d, mountPath: /d}]
`)
	eventually(t, 120*time.Second, "the hosts filler restarted", func() bool {
		p := a.status("hosts")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1 && a.running("hosts", "main") != nil
	})
	// The first run wrote its GiB (it exits 3 otherwise).
	if last := a.status("hosts").Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 0 {
		t.Fatalf("the first run did not fill /etc/hosts: %+v", last)
	}
	if got := execIn(t, a.running("hosts", "main").Id, "sh", "-c", "wc -c < /etc/hosts"); strings.TrimSpace(got) == "" || len(strings.TrimSpace(got)) > 5 {
		t.Errorf("/etc/hosts after the restart is %s bytes; want it rewritten", got)
	}
	if after := hwm(); after > before+64 {
		t.Fatalf("the agent's peak RSS went from %d MiB to %d MiB around a 1 GiB /etc/hosts", before, after)
	} else {
		t.Logf("peak RSS %d MiB before, %d MiB after a 1 GiB /etc/hosts", before, after)
	}
}
