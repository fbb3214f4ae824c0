//go:build integration

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make install puts the binary, the unit (Type=notify with a watchdog), a
// default config and the directories in place, keeps an edited config on
// a second install, and make uninstall removes the binary, the unit and
// the docs but leaves the config and the data.
func TestMakeInstall(t *testing.T) {
	t.Parallel()
	dest := t.TempDir()
	run := func(target string) {
		t.Helper()
		cmd := exec.Command("make", "-C", filepath.Join("..", ".."), target, "DESTDIR="+dest)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}
	run("install")
	mode := func(p string) os.FileMode {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dest, p))
		if err != nil {
			t.Fatalf("%s not installed: %v", p, err)
		}
		return fi.Mode()
	}
	for p, want := range map[string]os.FileMode{
		"usr/local/bin/nodeagent":                 0o755,
		"etc/systemd/system/nodeagent.service":    0o644,
		"etc/nodeagent/config.yaml":               0o644,
		"usr/local/share/doc/nodeagent/README.md": 0o644,
		"etc/kubernetes/manifests":                os.ModeDir | 0o755,
		"var/log/pods":                            os.ModeDir | 0o755,
		"var/lib/kubelet":                         os.ModeDir | 0o700,
	} {
		if got := mode(p); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(dest, "etc/systemd/system/nodeagent.service"))
	for _, want := range []string{"Type=notify", "WatchdogSec=", "--config=/etc/nodeagent/config.yaml", "KillMode=process"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("unit lacks %q", want)
		}
	}
	// The installed binary runs.
	if out, err := exec.Command(filepath.Join(dest, "usr/local/bin/nodeagent"), "--help").CombinedOutput(); !strings.Contains(string(out), "-config") {
		t.Errorf("installed binary --help: %v\n%s", err, out)
	}
	if err := deadMethodsEliminated(filepath.Join(dest, "usr/local/bin/nodeagent")); err != nil {
		t.Error(err)
	}
	cfg := filepath.Join(dest, "etc/nodeagent/config.yaml")
	if err := os.WriteFile(cfg, []byte("# edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("install")
	if b, _ := os.ReadFile(cfg); string(b) != "# edited\n" {
		t.Errorf("a second install replaced the edited config: %q", b)
	}
	run("uninstall")
	for _, p := range []string{"usr/local/bin/nodeagent", "etc/systemd/system/nodeagent.service", "usr/local/share/doc/nodeagent"} {
		if _, err := os.Stat(filepath.Join(dest, p)); err == nil {
			t.Errorf("%s left after uninstall", p)
		}
	}
	for _, p := range []string{"etc/nodeagent/config.yaml", "var/lib/kubelet"} {
		if _, err := os.Stat(filepath.Join(dest, p)); err != nil {
			t.Errorf("%s removed by uninstall: %v", p, err)
		}
	}
}
