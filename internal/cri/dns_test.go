package cri_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/dns"
)

// The sandbox is created with the DNS config the pod's policy forms; an
// unreadable host resolver file fails the sandbox, not the agent.
func TestSandboxDNSConfig(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.168.1.1\nsearch lan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(c *cri.Config) {
		c.DNS = &dns.Config{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: resolv}
	})
	if res := h.sync(webPod.DeepCopy()); res.Err != nil {
		t.Fatalf("sync: %+v", res)
	}
	sbs := h.fake.Sandboxes()
	if len(sbs) != 1 || sbs[0].Config.DnsConfig == nil {
		t.Fatalf("sandboxes %+v: want one with a DNS config", sbs)
	}
	d := sbs[0].Config.DnsConfig
	if strings.Join(d.Servers, ",") != "10.96.0.10" || strings.Join(d.Searches, " ") != "default.svc.cluster.local svc.cluster.local cluster.local lan" ||
		strings.Join(d.Options, ",") != "ndots:5" {
		t.Fatalf("DNS config %v", d)
	}

	h = newHarness(t, func(c *cri.Config) { c.DNS = &dns.Config{ResolvConf: filepath.Join(t.TempDir(), "missing")} })
	res := h.sync(webPod.DeepCopy())
	if res.SandboxError == "" || !strings.Contains(res.SandboxError, "resolv.conf") || len(h.fake.Sandboxes()) != 0 {
		t.Fatalf("result %+v, sandboxes %d: want FailedCreatePodSandBox about resolv.conf and no sandbox", res, len(h.fake.Sandboxes()))
	}
}
