//go:build integration

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	v1 "k8s.io/api/core/v1"
)

// fakeLogind plays systemd-logind's Manager on a private bus: it hands
// out delay locks (the read end of a pipe the agent gets the write end
// of) and reports InhibitDelayMaxUSec.
type fakeLogind struct {
	locks chan *os.File // the read ends, one per lock taken
	keep  chan *os.File // the write ends, closed once the agent holds them
}

func (f *fakeLogind) Inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	if what != "shutdown" || mode != "delay" {
		return -1, dbus.MakeFailedError(fmt.Errorf("unexpected inhibitor %s/%s", what, mode))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, dbus.MakeFailedError(err)
	}
	f.locks <- r
	f.keep <- w
	return dbus.UnixFD(w.Fd()), nil
}

type logindProps struct{}

func (logindProps) Get(iface, prop string) (dbus.Variant, *dbus.Error) {
	if iface == "org.freedesktop.login1.Manager" && prop == "InhibitDelayMaxUSec" {
		return dbus.MakeVariant(uint64(30 * time.Second / time.Microsecond)), nil
	}
	if iface == "org.freedesktop.login1.Manager" && prop == "PreparingForShutdown" {
		return dbus.MakeVariant(false), nil
	}
	return dbus.Variant{}, dbus.MakeFailedError(fmt.Errorf("no property %s.%s", iface, prop))
}

// privateBus starts a dbus-daemon of the test's own and returns its
// address.
func privateBus(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	cfg := filepath.Join(dir, "bus.conf")
	os.WriteFile(cfg, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=`+sock+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`), 0o644)
	cmd := exec.Command("dbus-daemon", "--config-file="+cfg, "--nofork", "--nopidfile", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("dbus-daemon: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon's address: %v", err)
	}
	return strings.TrimSpace(addr)
}

// holds reports whether process pid has a descriptor on the pipe of r.
func holds(t *testing.T, pid int, r *os.File) bool {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	want := "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}

// Graceful node shutdown against logind's D-Bus API (a private bus and a
// logind of the test's own: this machine has no systemd): the agent
// takes a delay lock at start; on PrepareForShutdown regular pods are
// stopped first, with their preStop hooks, then critical ones (priority
// 2000001000), each Failed with the kubelet's reason and message; new
// pods are refused (NodeShutdown); then the lock is released.
func TestGracefulNodeShutdown(t *testing.T) {
	t.Parallel()
	addr := privateBus(t)
	bus, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer bus.Close()
	logind := &fakeLogind{locks: make(chan *os.File, 4), keep: make(chan *os.File, 4)}
	if err := bus.Export(logind, "/org/freedesktop/login1", "org.freedesktop.login1.Manager"); err != nil {
		t.Fatal(err)
	}
	if err := bus.Export(logindProps{}, "/org/freedesktop/login1", "org.freedesktop.DBus.Properties"); err != nil {
		t.Fatal(err)
	}
	if reply, err := bus.RequestName("org.freedesktop.login1", dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own org.freedesktop.login1: %v %v", reply, err)
	}
	marks := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nshutdownGracePeriod: 20s\nshutdownGracePeriodCriticalPods: 8s\n"), 0o644)
	a := newAgent(t, "--config", cfg)
	a.env = append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS="+addr)
	a.start()
	pod := func(name, priority string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  ` + priority + `
  terminationGracePeriodSeconds: 30
  volumes: [{name: marks, hostPath: {path: ` + marks + `}}]
  containers:
  - name: main
    image: ` + busybox + `
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts: [{name: marks, mountPath: /marks}]
    lifecycle:
      preStop: {exec: {command: [sh, -c, "echo ` + name + ` >> /marks/order"]}}
`
	}
	a.write("regular.yaml", pod("regular", ""))
	a.write("critical.yaml", pod("critical", "priority: 2000001000"))
	eventually(t, 60*time.Second, "both pods running", func() bool {
		return a.running("regular", "main") != nil && a.running("critical", "main") != nil
	})
	var lock *os.File
	select {
	case lock = <-logind.locks:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent took no inhibitor lock")
	}
	w := <-logind.keep
	eventually(t, 10*time.Second, "the agent holds the lock", func() bool { return holds(t, a.cmd.Process.Pid, lock) })
	w.Close() // the agent's copy is the lock now
	if err := bus.Emit("/org/freedesktop/login1", "org.freedesktop.login1.Manager.PrepareForShutdown", true); err != nil {
		t.Fatal(err)
	}
	terminated := func(name string) func() bool {
		return func() bool {
			p := a.status(name)
			return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "Terminated" &&
				p.Status.Message == "Pod was terminated in response to imminent node shutdown."
		}
	}
	eventually(t, 60*time.Second, "both pods Terminated", func() bool { return terminated("regular")() && terminated("critical")() })
	eventually(t, 30*time.Second, "both pods' containers stopped", func() bool {
		return a.running("regular", "main") == nil && a.running("critical", "main") == nil
	})
	// Both preStop hooks ran, the regular pod's first.
	if b, err := os.ReadFile(filepath.Join(marks, "order")); err != nil || string(b) != "regular\ncritical\n" {
		t.Errorf("preStop hooks ran as %q (%v); want regular, then critical", b, err)
	}
	a.write("late.yaml", pod("late", ""))
	eventually(t, 30*time.Second, "a new pod refused", func() bool {
		p := a.status("late")
		return p != nil && p.Status.Phase == v1.PodFailed && p.Status.Reason == "NodeShutdown"
	})
	eventually(t, 30*time.Second, "the lock released", func() bool { return !holds(t, a.cmd.Process.Pid, lock) })
}
