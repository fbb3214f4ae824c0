package cri_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/testing/protocmp"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// newSpecHarness is newHarness with the node's spec settings.
func newSpecHarness(t *testing.T, sc cri.SpecConfig) *harness {
	t.Helper()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &harness{t: t, fake: critest.New(clk), clock: clk, logs: t.TempDir(), root: volumeRoot(t)}
	rt, err := cri.New(cri.Config{
		Client: h.fake, Logger: zaptest.NewLogger(t), Clock: clk,
		RootDir: h.root, PodLogsDir: h.logs, NodeName: "node1", NodeIP: "192.168.1.10",
		SpecConfig: sc,
	})
	if err != nil {
		t.Fatalf("cri.New() error = %v", err)
	}
	h.rt = rt
	return h
}

func specStr(s string) *string { return &s }

func secProfile(t runtimeapi.SecurityProfile_ProfileType, ref string) *runtimeapi.SecurityProfile {
	return &runtimeapi.SecurityProfile{ProfileType: t, LocalhostRef: ref}
}

var (
	profRuntimeDefault = secProfile(runtimeapi.SecurityProfile_RuntimeDefault, "")
	profUnconfined     = secProfile(runtimeapi.SecurityProfile_Unconfined, "")
)

// TestContainerSecurityProfiles: seccomp (container over pod over
// --seccomp-default), AppArmor (container over the deprecated annotation
// over pod) and procMount, as CreateContainer receives them.
func TestContainerSecurityProfiles(t *testing.T) {
	unmasked, dflt := v1.UnmaskedProcMount, v1.DefaultProcMount
	tests := []struct {
		name           string
		seccompDefault bool
		pod            func(p *v1.Pod)
		wantSeccomp    *runtimeapi.SecurityProfile // relative LocalhostRef: beneath <root>/seccomp
		wantAppArmor   *runtimeapi.SecurityProfile
		wantAAString   string
		wantUnmasked   bool
		wantErr        string // CreateContainerConfigError message part
	}{
		{name: "nothing set", pod: func(*v1.Pod) {}, wantSeccomp: profUnconfined},
		{name: "nothing set, seccomp default", seccompDefault: true, pod: func(*v1.Pod) {}, wantSeccomp: profRuntimeDefault},
		{
			name: "pod RuntimeDefault",
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
			},
			wantSeccomp: profRuntimeDefault,
		},
		{
			name: "container Unconfined wins over pod RuntimeDefault and the default", seccompDefault: true,
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
			},
			wantSeccomp: profUnconfined,
		},
		{
			name: "pod Unconfined wins over the default", seccompDefault: true,
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeUnconfined}}
			},
			wantSeccomp: profUnconfined,
		},
		{
			name: "container Localhost",
			pod: func(p *v1.Pod) {
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{
					Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: specStr("profiles/audit.json")}}
			},
			wantSeccomp: secProfile(runtimeapi.SecurityProfile_Localhost, "profiles/audit.json"),
		},
		{
			name: "Localhost without a profile",
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}
			},
			wantErr: "localhostProfile must be set",
		},
		{
			name: "Localhost outside the profile root",
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{
					Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: specStr("../../etc/passwd")}}
			},
			wantErr: "beneath",
		},
		{
			name: "pod AppArmor RuntimeDefault",
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
			},
			wantSeccomp: profUnconfined, wantAppArmor: profRuntimeDefault, wantAAString: "runtime/default",
		},
		{
			name: "container AppArmor Localhost wins over the pod's",
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{
					Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: specStr("k8s-deny-write")}}
			},
			wantSeccomp:  profUnconfined,
			wantAppArmor: secProfile(runtimeapi.SecurityProfile_Localhost, "k8s-deny-write"), wantAAString: "localhost/k8s-deny-write",
		},
		{
			name: "deprecated annotation wins over the pod's field",
			pod: func(p *v1.Pod) {
				p.Annotations["container.apparmor.security.beta.kubernetes.io/app"] = "unconfined"
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
			},
			wantSeccomp: profUnconfined, wantAppArmor: profUnconfined, wantAAString: "unconfined",
		},
		{
			name: "AppArmor Localhost without a name",
			pod: func(p *v1.Pod) {
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost}}
			},
			wantErr: "localhostProfile must be set",
		},
		{
			name: "procMount Unmasked",
			pod: func(p *v1.Pod) {
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: &unmasked}
			},
			wantSeccomp: profUnconfined, wantUnmasked: true,
		},
		{
			name: "procMount Default",
			pod: func(p *v1.Pod) {
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: &dflt}
			},
			wantSeccomp: profUnconfined,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSpecHarness(t, cri.SpecConfig{SeccompDefault: tt.seccompDefault})
			p := webPod.DeepCopy()
			tt.pod(p)
			res := h.sync(p)
			if tt.wantErr != "" {
				w := res.Waiting["app"]
				if w.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(w.Message, tt.wantErr) {
					t.Fatalf("waiting = %+v, want %s with %q", w, cri.ReasonCreateContainerConfigError, tt.wantErr)
				}
				if len(only[*runtimeapi.CreateContainerRequest](h.fake.Calls(), "CreateContainer")) != 0 {
					t.Fatal("container created despite an invalid profile")
				}
				return
			}
			if res.Err != nil {
				t.Fatalf("SyncPod() = %+v", res)
			}
			sc := h.latest("app").Config.Linux.SecurityContext
			want := tt.wantSeccomp
			if want.ProfileType == runtimeapi.SecurityProfile_Localhost {
				want = secProfile(want.ProfileType, filepath.Join(h.root, "seccomp", want.LocalhostRef))
			}
			if diff := cmp.Diff(want, sc.Seccomp, protocmp.Transform()); diff != "" {
				t.Errorf("seccomp (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAppArmor, sc.Apparmor, protocmp.Transform()); diff != "" {
				t.Errorf("apparmor (-want +got):\n%s", diff)
			}
			if sc.ApparmorProfile != tt.wantAAString {
				t.Errorf("deprecated apparmor profile = %q, want %q", sc.ApparmorProfile, tt.wantAAString)
			}
			if tt.wantUnmasked {
				if len(sc.MaskedPaths) != 0 || len(sc.ReadonlyPaths) != 0 {
					t.Errorf("masked %v, readonly %v; want none for procMount Unmasked", sc.MaskedPaths, sc.ReadonlyPaths)
				}
			} else {
				for _, want := range []string{"/proc/kcore", "/proc/keys", "/sys/firmware"} {
					if !slices.Contains(sc.MaskedPaths, want) {
						t.Errorf("masked paths %v lack %s", sc.MaskedPaths, want)
					}
				}
				if diff := cmp.Diff([]string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}, sc.ReadonlyPaths); diff != "" {
					t.Errorf("readonly paths (-want +got):\n%s", diff)
				}
			}
			sb := h.fake.Sandboxes()[0].Config.Linux.SecurityContext
			if diff := cmp.Diff(profRuntimeDefault, sb.Seccomp, protocmp.Transform()); diff != "" {
				t.Errorf("sandbox seccomp (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEtcHostsMount: the kubelet-managed /etc/hosts of each container.
func TestEtcHostsMount(t *testing.T) {
	nodeHosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(nodeHosts, []byte("127.0.0.1\tlocalhost\n10.0.0.5\tnode1.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aliases := []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db", "db.local"}}, {IP: "10.1.2.4", Hostnames: []string{"cache"}}}
	const header = "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
		"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"
	const aliasLines = "\n# Entries added by HostAliases.\n10.1.2.3\tdb\tdb.local\n10.1.2.4\tcache\n"
	tests := []struct {
		name string
		pod  func(p *v1.Pod)
		// want is the file's content, with {IP} for the pod's IP; "" =
		// no hosts mount.
		want string
	}{
		{name: "pod network", pod: func(*v1.Pod) {}, want: header + "{IP}\tweb-node1\n"},
		{
			name: "hostname, subdomain and aliases",
			pod: func(p *v1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain, p.Spec.HostAliases = "web", "svc", aliases
			},
			want: header + "{IP}\tweb.svc.default.svc.corp.example\tweb\n" + aliasLines,
		},
		{
			name: "host network copies the node's file",
			pod:  func(p *v1.Pod) { p.Spec.HostNetwork, p.Spec.HostAliases = true, aliases },
			want: "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n10.0.0.5\tnode1.example\n" + aliasLines,
		},
		{
			name: "container mounts its own /etc/hosts",
			pod: func(p *v1.Pod) {
				p.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
				p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts"}}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSpecHarness(t, cri.SpecConfig{ClusterDomain: "corp.example", NodeHostsFile: nodeHosts})
			p := webPod.DeepCopy()
			tt.pod(p)
			if res := h.sync(p); res.Err != nil {
				t.Fatalf("SyncPod() = %+v", res)
			}
			var hosts []*runtimeapi.Mount
			for _, m := range h.latest("app").Config.Mounts {
				if m.ContainerPath == "/etc/hosts" {
					hosts = append(hosts, m)
				}
			}
			if tt.want == "" {
				if len(hosts) != 1 || strings.HasSuffix(hosts[0].HostPath, "etc-hosts") {
					t.Fatalf("/etc/hosts mounts = %v, want only the container's own volume", hosts)
				}
				return
			}
			if len(hosts) != 1 {
				t.Fatalf("/etc/hosts mounts = %v, want one", hosts)
			}
			if want := filepath.Join(h.root, "pods", "uid-1", "etc-hosts"); hosts[0].HostPath != want || hosts[0].Readonly {
				t.Errorf("/etc/hosts mount = %v, want %s read-write", hosts[0], want)
			}
			b, err := os.ReadFile(hosts[0].HostPath)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tt.want, "{IP}", h.fake.Sandboxes()[0].IP)
			if diff := cmp.Diff(want, string(b)); diff != "" {
				t.Errorf("hosts file (-want +got):\n%s", diff)
			}
		})
	}
}

// criLog renders lines as the runtime writes them.
func criLog(lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		stream := "stdout"
		if i%2 == 1 {
			stream = "stderr"
		}
		b.WriteString("2026-01-02T03:04:05.000000006Z " + stream + " " + l + "\n")
	}
	return b.String()
}

// TestTerminationMessage: the message file, and with
// FallbackToLogsOnError the log's tail when the container failed and
// wrote no message.
func TestTerminationMessage(t *testing.T) {
	var many []string
	for i := 0; i < 100; i++ {
		many = append(many, "F line "+strings.Repeat("x", i%3))
	}
	var manyWant strings.Builder
	for _, l := range many[20:] {
		manyWant.WriteString(strings.TrimPrefix(l, "F ") + "\n")
	}
	tests := []struct {
		name     string
		policy   v1.TerminationMessagePolicy
		exitCode int32
		file     string // the message file's content
		log      string
		want     string
	}{
		{name: "file", policy: v1.TerminationMessageReadFile, exitCode: 1, file: "disk full", log: criLog("F boom"), want: "disk full"},
		{name: "read file policy ignores the log", policy: v1.TerminationMessageReadFile, exitCode: 1, log: criLog("F boom")},
		{name: "fallback: file wins", policy: v1.TerminationMessageFallbackToLogsOnError, exitCode: 2, file: "from file", log: criLog("F boom"), want: "from file"},
		{name: "fallback: success keeps no message", policy: v1.TerminationMessageFallbackToLogsOnError, log: criLog("F all good")},
		{
			name: "fallback: log tail, both streams, partial lines joined", policy: v1.TerminationMessageFallbackToLogsOnError, exitCode: 1,
			log: "2026-01-02T03:04:05.000000001Z stdout F starting\n" +
				"2026-01-02T03:04:05.000000002Z stderr P error: con\n" +
				"2026-01-02T03:04:05.000000003Z stdout F between\n" +
				"2026-01-02T03:04:05.000000004Z stderr P nection \n" +
				"2026-01-02T03:04:05.000000005Z stderr F refused\n" + "garbage line\n",
			want: "starting\nbetween\nerror: connection refused\n",
		},
		{name: "fallback: the last 80 lines", policy: v1.TerminationMessageFallbackToLogsOnError, exitCode: 1, log: criLog(many...), want: manyWant.String()},
		{
			name: "fallback: the last 2 KiB", policy: v1.TerminationMessageFallbackToLogsOnError, exitCode: 1,
			log:  criLog("F "+strings.Repeat("a", 3000), "F "+strings.Repeat("b", 100)),
			want: strings.Repeat("a", 2048-102) + "\n" + strings.Repeat("b", 100) + "\n",
		},
		{name: "fallback: empty log", policy: v1.TerminationMessageFallbackToLogsOnError, exitCode: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			p := webPod.DeepCopy()
			p.Spec.Containers[0].TerminationMessagePolicy = tt.policy
			if res := h.sync(p); res.Err != nil {
				t.Fatalf("SyncPod() = %+v", res)
			}
			c := h.latest("app")
			var file string
			for _, m := range c.Config.Mounts {
				if m.ContainerPath == v1.TerminationMessagePathDefault {
					file = m.HostPath
				}
			}
			if err := os.WriteFile(file, []byte(tt.file), 0o644); err != nil {
				t.Fatal(err)
			}
			logFile := filepath.Join(h.logs, "default_web-node1_uid-1", c.Config.LogPath)
			if err := os.WriteFile(logFile, []byte(tt.log), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := h.fake.ExitContainer(c.ID, tt.exitCode, ""); err != nil {
				t.Fatal(err)
			}
			got := h.status(p).Latest("app", false)
			if got == nil || got.State != pod.ContainerExited {
				t.Fatalf("status = %+v, want app exited", got)
			}
			if diff := cmp.Diff(tt.want, got.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTerminationMessageFileMode: the file mounted at the container's
// terminationMessagePath is writable by a non-root container user even
// under a restrictive umask (the kubelet chmods it 0666).
func TestTerminationMessageFileMode(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	h := newHarness(t)
	p := webPod.DeepCopy()
	p.Spec.Containers[0].TerminationMessagePath = "/dev/termination-custom-log"
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsUser: ptr.To(int64(10000))}
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("SyncPod() = %+v", res)
	}
	var file string
	for _, m := range h.latest("app").Config.Mounts {
		if m.ContainerPath == "/dev/termination-custom-log" {
			file = m.HostPath
		}
	}
	if file == "" {
		t.Fatal("no mount at the termination message path")
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o666 {
		t.Errorf("termination message file mode = %v, want -rw-rw-rw-", fi.Mode())
	}
}

// TestTerminationMessageLogSymlink: a log file replaced by a symlink out
// of the pod's log directory is not followed for the fallback message.
func TestTerminationMessageLogSymlink(t *testing.T) {
	h := newHarness(t)
	p := webPod.DeepCopy()
	p.Spec.Containers[0].TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("SyncPod() = %+v", res)
	}
	c := h.latest("app")
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("2026-01-02T03:04:05.000000001Z stdout F SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(h.logs, "default_web-node1_uid-1", c.Config.LogPath)
	os.Remove(logFile)
	if err := os.Symlink(secret, logFile); err != nil {
		t.Fatal(err)
	}
	if err := h.fake.ExitContainer(c.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	got := h.status(p).Latest("app", false)
	if got == nil || strings.Contains(got.Message, "SECRET") || !strings.Contains(got.Message, "unsafe log path") {
		t.Errorf("message %q: want the refusal of the symlink, not its target", got.Message)
	}
}
