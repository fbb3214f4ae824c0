package cni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

var confExtensions = []string{".conf", ".conflist", ".json"}

// Network is what Check found.
type Network struct {
	Name       string
	File       string
	CNIVersion string
	Plugins    []string
	list       *libcni.NetworkConfigList
}

// Check loads the first CNI config of confDir (lexical order, as the
// runtime picks it) and validates it against the plugins of binDirs,
// searched in order (see Validate). A config that loads but does not
// validate is returned with the error, so callers can still name it.
func Check(ctx context.Context, confDir string, binDirs ...string) (Network, error) {
	n, err := load(confDir)
	if err != nil {
		return n, err
	}
	if err := Validate(ctx, n.list, binDirs...); err != nil {
		return n, fmt.Errorf("CNI config %s: %w", n.File, err)
	}
	return n, nil
}

// load reads the config the runtime uses: the first file of confDir.
func load(confDir string) (Network, error) {
	files, err := libcni.ConfFiles(confDir, confExtensions)
	if err != nil {
		return Network{}, fmt.Errorf("read CNI config dir %s: %w", confDir, err)
	}
	if len(files) == 0 {
		return Network{}, fmt.Errorf("no CNI config in %s: pods cannot get a network; write a conflist there or start with --pod-cidr to have one written", confDir)
	}
	file := files[0]
	list, err := loadFile(file)
	if err != nil {
		return Network{File: file}, fmt.Errorf("CNI config %s is invalid: %w", file, err)
	}
	n := Network{Name: list.Name, File: file, CNIVersion: list.CNIVersion, list: list}
	for _, p := range list.Plugins {
		n.Plugins = append(n.Plugins, p.Network.Type)
	}
	return n, nil
}

func loadFile(file string) (*libcni.NetworkConfigList, error) {
	if strings.HasSuffix(file, ".conflist") {
		return libcni.ConfListFromFile(file)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	one, err := libcni.NetworkPluginConfFromBytes(b)
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromConf(one)
}

// Validate checks a network list the way the runtime will use it: every
// plugin is in one of binDirs and supports the list's cniVersion (libcni's
// ValidateNetworkList), the runtime's own loopback plugin is there, and,
// for cniVersion 1.1.0 and later, every plugin answers STATUS (libcni's
// GetStatusNetworkList; plugins without STATUS succeed). Errors carry the
// plugin's own message.
func Validate(ctx context.Context, list *libcni.NetworkConfigList, binDirs ...string) error {
	if list == nil {
		return errors.New("no network")
	}
	c := libcni.NewCNIConfig(binDirs, nil)
	var errs []error
	for _, p := range list.Plugins {
		// ValidateNetworkList joins every plugin's error into one "[...]";
		// one plugin at a time names each.
		one := &libcni.NetworkConfigList{Name: list.Name, CNIVersion: list.CNIVersion, Plugins: []*libcni.PluginConfig{p}}
		if _, err := c.ValidateNetworkList(ctx, one); err != nil {
			errs = append(errs, fmt.Errorf("plugin %q: %s", p.Network.Type, strings.Trim(err.Error(), "[]")))
		}
	}
	if _, err := c.GetVersionInfo(ctx, "loopback"); err != nil {
		errs = append(errs, fmt.Errorf("plugin \"loopback\" (the runtime sets up lo with it): %w", err))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := c.GetStatusNetworkList(ctx, list); err != nil {
		return fmt.Errorf("plugin STATUS: %w", err)
	}
	return nil
}

// supported reports the CNI versions every named plugin of binDir
// supports; nil when one cannot be asked.
func supported(ctx context.Context, binDir string, plugins []string) map[string]bool {
	c := libcni.NewCNIConfig([]string{binDir}, nil)
	var common map[string]bool
	for _, p := range plugins {
		info, err := c.GetVersionInfo(ctx, p)
		if err != nil {
			return nil
		}
		vs := map[string]bool{}
		for _, v := range info.SupportedVersions() {
			if common == nil || common[v] {
				vs[v] = true
			}
		}
		common = vs
	}
	return common
}
