package cni

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Trimmed verbose Status info, in the shapes containerd's CRI returns.
var (
	// containerd 1.6 / 1.7 / 2.0: one plugin dir.
	containerd16Info = map[string]string{
		"config":    `{"containerd":{"snapshotter":"overlayfs"},"cni":{"binDir":"/var/lib/rancher/k3s/data/current/bin","confDir":"/var/lib/rancher/k3s/agent/etc/cni/net.d","maxConfNum":1,"confTemplate":"","ipPref":""},"registry":{}}`,
		"golang":    `"go1.20.13"`,
		"cniconfig": `{"PluginDirs":["/var/lib/rancher/k3s/data/current/bin"],"PluginConfDir":"/var/lib/rancher/k3s/agent/etc/cni/net.d","PluginMaxConfNum":1,"Prefix":"eth","Networks":[]}`,
	}
	// containerd 2.1 and later: a list of plugin dirs.
	containerd2Info = map[string]string{
		"config":            `{"cni":{"binDirs":["/opt/cni/bin","/usr/libexec/cni"],"confDir":"/etc/cni/net.d","maxConfNum":1,"setupSerially":false,"confTemplate":"","ipPref":"","useInternalLoopback":false},"containerdRootDir":"/var/lib/containerd"}`,
		"lastCNILoadStatus": "OK",
	}
)

func TestRuntimeDirs(t *testing.T) {
	tests := []struct {
		name     string
		info     map[string]string
		wantConf string
		wantBins []string
	}{
		{name: "containerd 1.6 (k3s)", info: containerd16Info,
			wantConf: "/var/lib/rancher/k3s/agent/etc/cni/net.d", wantBins: []string{"/var/lib/rancher/k3s/data/current/bin"}},
		{name: "containerd 2.x", info: containerd2Info,
			wantConf: "/etc/cni/net.d", wantBins: []string{"/opt/cni/bin", "/usr/libexec/cni"}},
		{name: "only go-cni's view", info: map[string]string{"config": `{"cni":{}}`, "cniconfig": containerd16Info["cniconfig"]},
			wantConf: "/var/lib/rancher/k3s/agent/etc/cni/net.d", wantBins: []string{"/var/lib/rancher/k3s/data/current/bin"}},
		{name: "conf dir without plugin dirs", info: map[string]string{"config": `{"cni":{"confDir":"/etc/cni/net.d"}}`},
			wantConf: "/etc/cni/net.d"},
		{name: "not verbose", info: nil},
		{name: "another runtime's free-form info", info: map[string]string{"config": "[crio.network]\nnetwork_dir = \"/etc/cni/net.d/\"\n"}},
		{name: "unknown shape", info: map[string]string{"config": `{"network":{"confDir":"/x"}}`, "cniconfig": `null`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, bins := RuntimeDirs(tt.info)
			if conf != tt.wantConf {
				t.Errorf("conf dir %q, want %q", conf, tt.wantConf)
			}
			if d := cmp.Diff(tt.wantBins, bins); d != "" {
				t.Errorf("bin dirs (-want +got):\n%s", d)
			}
		})
	}
}
