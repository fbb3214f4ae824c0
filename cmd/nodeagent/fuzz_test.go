package main

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzConfigFile feeds arbitrary bytes to the KubeletConfiguration loader
// as a --config file, the way parseOptions reads it: it may refuse the
// file but must never panic. Seeds: testdata/fuzz/FuzzConfigFile.
func FuzzConfigFile(f *testing.F) {
	f.Add([]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /etc/kubernetes/manifests\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		o, err := parseOptions([]string{"--config", path})
		if err == nil && o == nil {
			t.Fatal("parseOptions returned neither options nor an error")
		}
	})
}
