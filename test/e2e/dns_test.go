//go:build integration

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// /etc/resolv.conf inside containers follows each dnsPolicy as the
// kubelet forms it (no DNS traffic: the file is read).
func TestDNSPolicies(t *testing.T) {
	t.Parallel()
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch example.test.\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, "--cluster-dns", "10.96.0.10", "--resolv-conf", resolv)
	a.start()
	pod := func(name, extra string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
` + extra + `  containers:
  - name: main
    image: ` + busybox + `
    command: ["sh", "-c", "` + sleepLoop + `"]
---
`
	}
	a.write("dns.yaml", pod("cf", "")+pod("def", "  dnsPolicy: Default\n")+
		pod("none", "  dnsPolicy: None\n  dnsConfig: {nameservers: [192.0.2.1], searches: [a.test], options: [{name: ndots, value: \"1\"}]}\n")+
		pod("hostcf", "  hostNetwork: true\n")+
		pod("hostcfhn", "  hostNetwork: true\n  dnsPolicy: ClusterFirstWithHostNet\n"))
	want := map[string][]string{
		"cf":       {"nameserver 10.96.0.10", "search default.svc.cluster.local svc.cluster.local cluster.local example.test", "options ndots:5"},
		"def":      {"nameserver 192.0.2.53", "search example.test", "options edns0"},
		"none":     {"nameserver 192.0.2.1", "search a.test", "options ndots:1"},
		"hostcf":   {"nameserver 192.0.2.53", "search example.test"},
		"hostcfhn": {"nameserver 10.96.0.10", "options ndots:5"},
	}
	for name, lines := range want {
		eventually(t, 60*time.Second, name+" running", func() bool { return a.running(name, "main") != nil })
		got := execIn(t, a.running(name, "main").Id, "cat", "/etc/resolv.conf")
		for _, l := range lines {
			if !strings.Contains(got, l) {
				t.Errorf("%s: /etc/resolv.conf lacks %q:\n%s", name, l, got)
			}
		}
		if name == "none" && strings.Contains(got, "192.0.2.53") {
			t.Errorf("dnsPolicy None got the host's nameserver:\n%s", got)
		}
	}
}
