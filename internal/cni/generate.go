package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// Marker is the top-level key nodeagent puts in the conflist it writes;
// a conflist without it is the operator's and is never touched. libcni and
// the runtime ignore unknown top-level keys.
const Marker = "generatedBy"

const markerValue = "nodeagent"

// ErrRefused wraps a generated conflist that does not validate: it is not
// written and the previous file stays.
var ErrRefused = errors.New("CNI config refused")

// NetworkConfig describes the node's default pod network.
type NetworkConfig struct {
	Name     string   // network name, "nodeagent"
	Bridge   string   // bridge device, "nabr0"
	PodCIDRs []string // the node's pod CIDRs, at most one per family
	DataDir  string   // host-local data dir; "" for host-local's default
	// CNIVersion of the list; "" picks the newest of 1.1.0 and 1.0.0 the
	// plugins support (Ensure) or 1.0.0 (ConfList).
	CNIVersion string
	// MACSpoofCheck turns on the bridge plugin's macspoofchk: a pod's
	// frames leave its veth only with its own MAC address (the plugin
	// installs nftables rules: it needs the nft command).
	MACSpoofCheck bool
}

// pluginTypes are the plugins the generated list runs, in order, plus
// its IPAM.
var pluginTypes = []string{"bridge", "host-local", "portmap", "bandwidth"}

// ConfList renders the node's conflist: bridge (gateway, masquerade,
// hairpin, MAC spoofing check when asked) with host-local IPAM, one range per pod CIDR; portmap for
// hostPorts; bandwidth for the ingress/egress-bandwidth annotations.
func ConfList(cfg NetworkConfig) ([]byte, error) {
	if cfg.Name == "" || cfg.Bridge == "" {
		return nil, errors.New("network name and bridge are required")
	}
	if len(cfg.PodCIDRs) == 0 {
		return nil, errors.New("no pod CIDR")
	}
	if len(cfg.PodCIDRs) > 2 {
		return nil, fmt.Errorf("pod CIDRs %q: at most two (one IPv4, one IPv6)", cfg.PodCIDRs)
	}
	var ranges [][]map[string]string
	var routes []map[string]string
	families := map[bool]bool{}
	for _, c := range cfg.PodCIDRs {
		ip, subnet, err := net.ParseCIDR(c)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", c, err)
		}
		v4 := ip.To4() != nil
		if families[v4] {
			return nil, fmt.Errorf("pod CIDRs %q: two of one family (dual stack is one IPv4 and one IPv6)", cfg.PodCIDRs)
		}
		families[v4] = true
		ones, bits := subnet.Mask.Size()
		if bits-ones < 2 {
			return nil, fmt.Errorf("pod CIDR %q: too small for a gateway and a pod", c)
		}
		ranges = append(ranges, []map[string]string{{"subnet": subnet.String()}})
		dst := "0.0.0.0/0"
		if !v4 {
			dst = "::/0"
		}
		routes = append(routes, map[string]string{"dst": dst})
	}
	ipam := map[string]any{"type": "host-local", "ranges": ranges, "routes": routes}
	if cfg.DataDir != "" {
		ipam["dataDir"] = cfg.DataDir
	}
	version := cfg.CNIVersion
	if version == "" {
		version = "1.0.0"
	}
	bridge := map[string]any{"type": "bridge", "bridge": cfg.Bridge, "isGateway": true, "ipMasq": true, "hairpinMode": true, "ipam": ipam}
	if cfg.MACSpoofCheck {
		bridge["macspoofchk"] = true
	}
	list := map[string]any{
		"cniVersion": version,
		"name":       cfg.Name,
		Marker:       markerValue,
		"plugins": []map[string]any{
			bridge,
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
			{"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true}},
		},
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Generated reports whether body is a conflist nodeagent wrote.
func Generated(body []byte) bool {
	var top map[string]any
	return json.Unmarshal(body, &top) == nil && top[Marker] == markerValue
}

// Written is what Ensure did.
type Written struct {
	File     string // the generated file, or the operator's that stays
	Wrote    bool   // the file was written (new or changed)
	Operator bool   // the conf dir holds the operator's config: left alone
}

// Ensure writes the generated conflist for cfg into confDir as
// 10-<name>.conflist when the dir holds no CNI config, or when that file
// is there and nodeagent wrote it (the pod CIDRs or plugins changed). An
// operator's config is left alone. The list is validated against binDir
// first (Validate); one that does not validate is refused (ErrRefused,
// with the plugin's error) and the previous file stays. The write is
// atomic. Idempotent.
func Ensure(ctx context.Context, confDir, binDir string, cfg NetworkConfig) (Written, error) {
	target := filepath.Join(confDir, "10-"+cfg.Name+".conflist")
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err != nil && !os.IsNotExist(err) {
		return Written{}, fmt.Errorf("read CNI config dir %s: %w", confDir, err)
	}
	old, rerr := os.ReadFile(target)
	ours := rerr == nil && Generated(old)
	if len(files) > 0 && !ours {
		return Written{File: files[0], Operator: true}, nil
	}
	if cfg.CNIVersion == "" {
		cfg.CNIVersion = "1.0.0"
		if supported(ctx, binDir, pluginTypes)["1.1.0"] {
			cfg.CNIVersion = "1.1.0" // STATUS and GC
		}
	}
	body, err := ConfList(cfg)
	if err != nil {
		return Written{}, err
	}
	list, err := libcni.ConfListFromBytes(body)
	if err != nil {
		return Written{}, fmt.Errorf("generated conflist does not load: %w", err)
	}
	if err := Validate(ctx, list, binDir); err != nil {
		return Written{File: target}, fmt.Errorf("%w (the previous config stays; install the CNI plugins in %s): %w", ErrRefused, binDir, err)
	}
	if ours && bytes.Equal(old, body) {
		return Written{File: target}, nil
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return Written{}, err
	}
	if err := atomicfile.Write(target, body, 0o644, true); err != nil {
		return Written{}, fmt.Errorf("write CNI config: %w", err)
	}
	return Written{File: target, Wrote: true}, nil
}
