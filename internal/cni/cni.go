package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

var confExtensions = []string{".conf", ".conflist", ".json"}

// Network is what Check found.
type Network struct {
	Name    string
	File    string
	Plugins []string
}

// Check loads the first CNI config of confDir (lexical order, as the
// runtime does) and verifies that each plugin binary exists in binDir.
func Check(confDir, binDir string) (Network, error) {
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err != nil {
		return Network{}, fmt.Errorf("read CNI config dir %s: %w", confDir, err)
	}
	if len(files) == 0 {
		return Network{}, fmt.Errorf("no CNI config in %s: pods cannot get a network; write a conflist there or start with --pod-cidr to have one written", confDir)
	}
	file := files[0]
	var list *libcni.NetworkConfigList
	if strings.HasSuffix(file, ".conflist") {
		list, err = libcni.ConfListFromFile(file)
	} else {
		var one *libcni.PluginConfig
		one, err = libcni.NetworkPluginConfFromBytes(mustRead(file))
		if err == nil {
			list, err = libcni.ConfListFromConf(one)
		}
	}
	if err != nil {
		return Network{}, fmt.Errorf("CNI config %s is invalid: %w", file, err)
	}
	n := Network{Name: list.Name, File: file}
	var missing []string
	for _, p := range list.Plugins {
		n.Plugins = append(n.Plugins, p.Network.Type)
		if _, err := os.Stat(filepath.Join(binDir, p.Network.Type)); err != nil {
			missing = append(missing, p.Network.Type)
		}
	}
	if len(missing) > 0 {
		return n, fmt.Errorf("CNI config %s names plugins missing from %s: %s", file, binDir, strings.Join(missing, ", "))
	}
	return n, nil
}

func mustRead(f string) []byte {
	b, _ := os.ReadFile(f)
	return b
}

// BridgeConfig describes the default network.
type BridgeConfig struct {
	Name    string // network name, "nodeagent"
	Bridge  string // bridge device, "nabr0"
	PodCIDR string // the node's pod CIDR
	DataDir string // host-local lease directory
}

// BridgeConfList renders a bridge + host-local conflist for cfg.
func BridgeConfList(cfg BridgeConfig) ([]byte, error) {
	ip, subnet, err := net.ParseCIDR(cfg.PodCIDR)
	if err != nil {
		return nil, fmt.Errorf("pod CIDR %q: %w", cfg.PodCIDR, err)
	}
	if ip.To4() == nil {
		return nil, errors.New("pod CIDR: only IPv4 is supported by the default network")
	}
	ipam := map[string]any{
		"type":   "host-local",
		"ranges": [][]map[string]string{{{"subnet": subnet.String()}}},
		"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
	}
	if cfg.DataDir != "" {
		ipam["dataDir"] = cfg.DataDir
	}
	list := map[string]any{
		"cniVersion": "1.0.0",
		"name":       cfg.Name,
		"plugins": []map[string]any{
			{"type": "bridge", "bridge": cfg.Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true, "ipam": ipam},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(list, "", "  ")
}

// EnsureDefault writes the default conflist into confDir when it holds no
// CNI config yet; an existing config is left alone. It reports whether it
// wrote one.
func EnsureDefault(confDir string, cfg BridgeConfig) (bool, error) {
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err == nil && len(files) > 0 {
		return false, nil
	}
	body, err := BridgeConfList(cfg)
	if err != nil {
		return false, err
	}
	if _, err := libcni.ConfListFromBytes(body); err != nil {
		return false, fmt.Errorf("default conflist does not load: %w", err)
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return false, err
	}
	return true, os.WriteFile(filepath.Join(confDir, "10-"+cfg.Name+".conflist"), body, 0o644)
}
