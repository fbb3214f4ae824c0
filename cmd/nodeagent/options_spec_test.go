package main

import (
	"os"
	"path/filepath"
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
			if o.clusterDomain != tt.clusterDomain || o.seccompDefault != tt.seccompDefault {
				t.Errorf("clusterDomain %q seccompDefault %v, want %q %v", o.clusterDomain, o.seccompDefault, tt.clusterDomain, tt.seccompDefault)
			}
		})
	}
}
