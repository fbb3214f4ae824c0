package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The default config file `make install` puts at /etc/nodeagent/config.yaml
// loads with no field unimplemented, and its settings take effect.
func TestDeployConfigLoads(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "..", "deploy", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseWithConfig(t, string(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.configWarnings) != 0 {
		t.Errorf("deploy/config.yaml names fields nodeagent does not implement: %v", o.configWarnings)
	}
	if o.StaticPodPath != "/etc/kubernetes/manifests" || o.ContainerRuntimeEndpoint != "unix:///run/containerd/containerd.sock" ||
		o.FileCheckFrequency.Duration.String() != "20s" || o.EvictionHard["memory.available"] != "100Mi" {
		t.Errorf("settings not taken: staticPodPath %q, endpoint %q, fileCheckFrequency %v, evictionHard %v",
			o.StaticPodPath, o.ContainerRuntimeEndpoint, o.FileCheckFrequency.Duration, o.EvictionHard)
	}
}
