package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestContainerLogOptions(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /m
containerLogMaxSize: 20Mi
containerLogMaxFiles: 3
containerLogMaxWorkers: 4
containerLogMonitorInterval: 30s
`), 0o644)
	type logOpts struct {
		bytes    int64
		files    int
		workers  int
		interval time.Duration
	}
	tests := []struct {
		name    string
		args    []string
		want    logOpts
		wantErr string
	}{
		{name: "defaults (the kubelet's)", args: []string{"--manifest-dir", "/m"},
			want: logOpts{10 << 20, 5, 1, 10 * time.Second}},
		{name: "flags", args: []string{"--manifest-dir", "/m", "--container-log-max-size", "1Mi", "--container-log-max-files", "2",
			"--container-log-max-workers", "2", "--container-log-monitor-interval", "1s"},
			want: logOpts{1 << 20, 2, 2, time.Second}},
		{name: "decimal quantity", args: []string{"--manifest-dir", "/m", "--container-log-max-size", "5M"},
			want: logOpts{5_000_000, 5, 1, 10 * time.Second}},
		{name: "config file", args: []string{"--config", cfg},
			want: logOpts{20 << 20, 3, 4, 30 * time.Second}},
		{name: "flags win over the file", args: []string{"--config", cfg, "--container-log-max-size", "1Mi", "--container-log-max-files", "6"},
			want: logOpts{1 << 20, 6, 4, 30 * time.Second}},
		{name: "one file", args: []string{"--manifest-dir", "/m", "--container-log-max-files", "1"}, wantErr: "--container-log-max-files must be >= 2"},
		{name: "bad size", args: []string{"--manifest-dir", "/m", "--container-log-max-size", "ten"}, wantErr: `--container-log-max-size "ten"`},
		{name: "negative size", args: []string{"--manifest-dir", "/m", "--container-log-max-size", "-1"}, wantErr: "want a positive size"},
		{name: "no workers", args: []string{"--manifest-dir", "/m", "--container-log-max-workers", "0"}, wantErr: "--container-log-max-workers must be >= 1"},
		{name: "no interval", args: []string{"--manifest-dir", "/m", "--container-log-monitor-interval", "0s"}, wantErr: "--container-log-monitor-interval must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := logOpts{o.containerLogMaxBytes, int(*o.ContainerLogMaxFiles), int(*o.ContainerLogMaxWorkers), o.ContainerLogMonitorInterval.Duration}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
