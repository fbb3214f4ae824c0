package dns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const hostResolv = `# generated
nameserver 192.168.1.1
nameserver 192.168.1.2 ; second
search lan. corp.example
options edns0 ndots:2
`

func dnsPod(policy v1.DNSPolicy, hostNet bool, dc *v1.PodDNSConfig) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: dc}}
}

func TestPodDNS(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(hostResolv), 0o644); err != nil {
		t.Fatal(err)
	}
	cluster := Config{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local", ResolvConf: resolv}
	noCluster := Config{ClusterDomain: "cluster.local", ResolvConf: resolv}
	host := &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "192.168.1.2"}, Searches: []string{"lan", "corp.example"}, Options: []string{"edns0", "ndots:2"}}
	clusterCfg := &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"},
		Searches: []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "lan", "corp.example"}, Options: []string{"ndots:5"}}
	two := "2"
	tests := []struct {
		name   string
		cfg    Config
		pod    *v1.Pod
		want   *runtimeapi.DNSConfig
		reason string // of the one warning expected
	}{
		{"ClusterFirst", cluster, dnsPod(v1.DNSClusterFirst, false, nil), clusterCfg, ""},
		{"empty policy is ClusterFirst", cluster, dnsPod("", false, nil), clusterCfg, ""},
		{"ClusterFirst on the host network is Default", cluster, dnsPod(v1.DNSClusterFirst, true, nil), host, ""},
		{"ClusterFirstWithHostNet", cluster, dnsPod(v1.DNSClusterFirstWithHostNet, true, nil), clusterCfg, ""},
		{"Default", cluster, dnsPod(v1.DNSDefault, false, nil), host, ""},
		{"no cluster DNS: Default with a warning", noCluster, dnsPod(v1.DNSClusterFirst, false, nil), host, "MissingClusterDNS"},
		{"no resolv.conf: Default is empty", Config{}, dnsPod(v1.DNSDefault, false, nil), &runtimeapi.DNSConfig{}, ""},
		{"None with dnsConfig", cluster, dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{
			Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}),
			&runtimeapi.DNSConfig{Servers: []string{"1.2.3.4"}, Searches: []string{"a.example"}, Options: []string{"ndots:2"}}, ""},
		{"dnsConfig merged into ClusterFirst", cluster, dnsPod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{
			Nameservers: []string{"10.96.0.10", "8.8.8.8"}, Searches: []string{"lan", "extra.example"},
			Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "single-request"}}}),
			&runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "8.8.8.8"},
				Searches: append(append([]string{}, clusterCfg.Searches...), "extra.example"), Options: []string{"ndots:2", "single-request"}}, ""},
		{"too many nameservers cut to 3", cluster, dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"}}),
			&runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}}, "DNSConfigForming"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warns, err := tt.cfg.PodDNS(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b *runtimeapi.DNSConfig) bool {
				return cmp.Equal(a.Servers, b.Servers) && cmp.Equal(a.Searches, b.Searches) && cmp.Equal(a.Options, b.Options)
			})); diff != "" {
				t.Errorf("PodDNS (-want +got):\n%s\ngot %v", diff, got)
			}
			switch {
			case tt.reason == "" && len(warns) > 0:
				t.Errorf("unexpected warnings %v", warns)
			case tt.reason != "" && (len(warns) != 1 || warns[0].Reason != tt.reason):
				t.Errorf("warnings %v, want one %s", warns, tt.reason)
			}
		})
	}
}

func TestSearchLimits(t *testing.T) {
	var many []string
	for i := 0; i < 40; i++ {
		many = append(many, strings.Repeat("x", 60)+string(rune('a'+i%26))+strings.Repeat("y", i))
	}
	got, warns, err := Config{}.PodDNS(dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{Searches: many}))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Searches) > MaxSearchDomains || len(strings.Join(got.Searches, " ")) > MaxSearchChars {
		t.Fatalf("search line of %d domains, %d chars: over the limits", len(got.Searches), len(strings.Join(got.Searches, " ")))
	}
	if len(warns) != 1 || !strings.Contains(warns[0].Message, "Search Line limits were exceeded") {
		t.Fatalf("warnings %v", warns)
	}
}

func TestUnreadableResolvConf(t *testing.T) {
	if _, _, err := (Config{ResolvConf: filepath.Join(t.TempDir(), "missing")}).PodDNS(dnsPod(v1.DNSDefault, false, nil)); err == nil {
		t.Fatal("no error for a missing resolv.conf")
	}
}
