package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCgroupOptions(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /m
cgroupRoot: /agent
cgroupsPerQOS: false
enforceNodeAllocatable: [none]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       []string
		perQOS     bool
		root       string
		driver     string
		enforce    []string
		wantErrSub string
	}{
		{name: "kubelet defaults", args: []string{"--manifest-dir", "/m"}, perQOS: true, root: "/", driver: "cgroupfs", enforce: []string{"pods"}},
		{name: "flags", args: []string{"--manifest-dir", "/m", "--cgroup-root", "/e2e", "--cgroup-driver", "systemd", "--enforce-node-allocatable", "none"},
			perQOS: true, root: "/e2e", driver: "systemd", enforce: []string{"none"}},
		{name: "config file", args: []string{"--config", cfg}, perQOS: false, root: "/agent", driver: "cgroupfs", enforce: []string{"none"}},
		{name: "flags win over the file", args: []string{"--config", cfg, "--cgroups-per-qos", "--cgroup-root", "/x"}, perQOS: true, root: "/x", driver: "cgroupfs", enforce: []string{"none"}},
		{name: "per-qos off, enforcement left at its default", args: []string{"--manifest-dir", "/m", "--cgroups-per-qos=false"}, root: "/", driver: "cgroupfs", enforce: []string{"pods"}},
		{name: "bad driver", args: []string{"--manifest-dir", "/m", "--cgroup-driver", "lxc"}, wantErrSub: "--cgroup-driver"},
		{name: "relative root", args: []string{"--manifest-dir", "/m", "--cgroup-root", "agent"}, wantErrSub: "--cgroup-root"},
		{name: "reserved cgroups unsupported", args: []string{"--manifest-dir", "/m", "--enforce-node-allocatable", "pods,system-reserved"}, wantErrSub: "system-reserved: not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseOptions(tc.args)
			if tc.wantErrSub != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrSub) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErrSub)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *o.CgroupsPerQOS != tc.perQOS || o.CgroupRoot != tc.root || o.CgroupDriver != tc.driver || !slices.Equal(o.EnforceNodeAllocatable, tc.enforce) {
				t.Fatalf("cgroupsPerQOS %v root %q driver %q enforce %v", *o.CgroupsPerQOS, o.CgroupRoot, o.CgroupDriver, o.EnforceNodeAllocatable)
			}
		})
	}
}
