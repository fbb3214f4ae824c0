package cni

import "encoding/json"

// RuntimeDirs reads where the runtime says it keeps its CNI config and
// plugins, from the Info map of its verbose CRI Status (StatusRequest
// with Verbose). containerd answers, in every release from 1.6 to 2.x:
//
//   - info["config"]: its CRI plugin config as JSON, whose "cni" object
//     has "confDir" and the plugin dir as "binDir" (1.6, 1.7, 2.0) or
//     "binDirs" (2.1 and later);
//   - info["cniconfig"], only once its CNI library is set up: go-cni's
//     view, with "PluginConfDir" and "PluginDirs".
//
// The first that names a conf dir wins. A runtime that says neither
// (CRI-O, a future shape, no verbose info at all) gives "": the caller
// does not know the dir. Never an error: the info is free-form.
func RuntimeDirs(info map[string]string) (confDir string, binDirs []string) {
	var cfg struct {
		CNI struct {
			ConfDir string   `json:"confDir"`
			BinDir  string   `json:"binDir"`
			BinDirs []string `json:"binDirs"`
		} `json:"cni"`
	}
	if json.Unmarshal([]byte(info["config"]), &cfg) == nil && cfg.CNI.ConfDir != "" {
		bins := nonEmpty(cfg.CNI.BinDirs)
		if len(bins) == 0 {
			bins = nonEmpty([]string{cfg.CNI.BinDir})
		}
		return cfg.CNI.ConfDir, bins
	}
	var gocni struct {
		PluginConfDir string
		PluginDirs    []string
	}
	if json.Unmarshal([]byte(info["cniconfig"]), &gocni) == nil && gocni.PluginConfDir != "" {
		return gocni.PluginConfDir, nonEmpty(gocni.PluginDirs)
	}
	return "", nil
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
