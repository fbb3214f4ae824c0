package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSpecOptions(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDomain: corp.example
seccompDefault: true
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		args           []string
		clusterDomain  string
		seccompDefault bool
	}{
		{name: "defaults", args: []string{"--manifest-dir", "/m"}, clusterDomain: "cluster.local"},
		{name: "flags", args: []string{"--manifest-dir", "/m", "--cluster-domain", "k8s.test", "--seccomp-default"}, clusterDomain: "k8s.test", seccompDefault: true},
		{name: "config file", args: []string{"--config", cfg, "--manifest-dir", "/m"}, clusterDomain: "corp.example", seccompDefault: true},
		{name: "flags win", args: []string{"--config", cfg, "--manifest-dir", "/m", "--cluster-domain", "k8s.test", "--seccomp-default=false"}, clusterDomain: "k8s.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if o.ClusterDomain != tt.clusterDomain || *o.SeccompDefault != tt.seccompDefault {
				t.Errorf("clusterDomain %q seccompDefault %v, want %q %v", o.ClusterDomain, *o.SeccompDefault, tt.clusterDomain, tt.seccompDefault)
			}
		})
	}
}

func TestDNSOptions(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
clusterDNS: [10.96.0.10, fd00::a]
resolvConf: /run/systemd/resolve/resolv.conf
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dns, resolv string
		wantErr           bool
	}{
		{name: "defaults", resolv: "/etc/resolv.conf"},
		{name: "flags", dns: "10.0.0.10,10.0.0.11", resolv: ""},
		{name: "config file", dns: "10.96.0.10,fd00::a", resolv: "/run/systemd/resolve/resolv.conf"},
		{name: "not an IP", wantErr: true},
	}
	args := map[string][]string{
		"defaults":    {"--manifest-dir", "/m"},
		"flags":       {"--manifest-dir", "/m", "--cluster-dns", "10.0.0.10, 10.0.0.11", "--resolv-conf", ""},
		"config file": {"--config", cfg, "--manifest-dir", "/m"},
		"not an IP":   {"--manifest-dir", "/m", "--cluster-dns", "dns.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(args[tt.name])
			if tt.wantErr {
				if err == nil {
					t.Fatal("accepted a cluster DNS that is not an IP")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(o.ClusterDNS, ","); got != tt.dns || *o.ResolverConfig != tt.resolv {
				t.Errorf("clusterDNS %q resolvConf %q, want %q %q", got, *o.ResolverConfig, tt.dns, tt.resolv)
			}
		})
	}
}
