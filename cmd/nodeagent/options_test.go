package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestConfigFileFillsWhatFlagsDoNotSet(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
fileCheckFrequency: 7s
maxPods: 12
podCIDR: 10.1.0.0/24
staticPodURL: http://127.0.0.1:1/pods
staticPodURLHeader: {X-Token: [abc]}
crashLoopBackOff: {maxContainerRestartPeriod: 60s}
`), 0o644)
	// sources is what the test reads of the options.
	type sources struct {
		Dir, URL   string
		Check      time.Duration
		MaxPods    int32
		PodCIDR    string
		MaxRestart time.Duration
		Headers    map[string][]string
		Labels     map[string]string
	}
	fromFile := sources{Dir: "/etc/kubernetes/manifests", URL: "http://127.0.0.1:1/pods", Check: 7 * time.Second, MaxPods: 12,
		PodCIDR: "10.1.0.0/24", MaxRestart: time.Minute, Headers: map[string][]string{"X-Token": {"abc"}}}
	tests := []struct {
		name string
		args []string
		want sources
	}{
		{name: "file only", args: []string{"--config", cfg}, want: fromFile},
		{name: "flags win", args: []string{"--config", cfg, "--pod-manifest-path", "/m", "--max-pods", "3", "--file-check-frequency", "1s"},
			want: sources{Dir: "/m", URL: fromFile.URL, Check: time.Second, MaxPods: 3, PodCIDR: fromFile.PodCIDR, MaxRestart: time.Minute, Headers: fromFile.Headers}},
		{name: "node labels and headers", args: []string{"--manifest-dir", "/m", "--node-labels", "a=1,b=2", "--manifest-url-header", "A:x,B:y"},
			want: sources{Dir: "/m", Check: 20 * time.Second, MaxPods: 110, MaxRestart: 300 * time.Second,
				Headers: map[string][]string{"A": {"x"}, "B": {"y"}}, Labels: map[string]string{"a": "1", "b": "2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			got := sources{Dir: o.StaticPodPath, URL: o.StaticPodURL, Check: o.FileCheckFrequency.Duration, MaxPods: o.MaxPods,
				PodCIDR: o.PodCIDR, MaxRestart: o.CrashLoopBackOff.MaxContainerRestartPeriod.Duration, Headers: o.StaticPodURLHeader, Labels: o.nodeLabels}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestOptionErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: v1\nkind: Pod\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no source", nil, "give --manifest-dir"},
		{"unknown cpu policy", []string{"--manifest-dir", "/m", "--cpu-manager-policy", "dynamic"}, "want none or static"},
		{"bad reserved cpus", []string{"--manifest-dir", "/m", "--cpu-manager-policy", "static", "--reserved-cpus", "0-"}, "want a CPU list"},
		{"bad cpu reconcile period", []string{"--manifest-dir", "/m", "--cpu-manager-reconcile-period", "0s"}, "--cpu-manager-reconcile-period must be > 0"},
		{"bootstrap without kubeconfig", []string{"--manifest-dir", "/m", "--bootstrap-kubeconfig", "/b"}, "needs --kubeconfig"},
		{"server certificate CSR without kubeconfig", []string{"--manifest-dir", "/m", "--rotate-server-certificates"}, "--rotate-server-certificates needs --kubeconfig"},
		{"restricted node label", []string{"--kubeconfig", "/k", "--node-labels", "node-role.kubernetes.io/worker=,node.kubernetes.io/pool=a"}, "node-role.kubernetes.io/worker"},
		{"bad taint", []string{"--kubeconfig", "/k", "--register-with-taints", "a=b:Sometimes"}, "effect must be"},
		{"bad reservation", []string{"--kubeconfig", "/k", "--kube-reserved", "memory=-1Gi"}, "non-negative quantity"},
		{"bad eviction threshold", []string{"--kubeconfig", "/k", "--eviction-hard", "memory.available<lots"}, "bad quantity"},
		{"wrong config kind", []string{"--config", bad}, "want kind KubeletConfiguration"},
		{"bad label", []string{"--manifest-dir", "/m", "--node-labels", "novalue"}, "malformed pair, expect string=string"},
		{"RSA-only suites for an ECDSA serving key", []string{"--kubeconfig", "/k", "--rotate-server-certificates", "--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "ECDHE_ECDSA"},
		{"bad read-only port", []string{"--manifest-dir", "/m", "--read-only-port", "70000"}, "--read-only-port 70000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseOptions(tt.args)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestAPIModeOptions(t *testing.T) {
	o, err := parseOptions([]string{"--kubeconfig", "/k", "--register-with-taints", "dedicated=edge:NoSchedule,gpu:NoExecute",
		"--kube-reserved", "cpu=100m,memory=256Mi", "--system-reserved", "memory=128Mi"})
	if err != nil {
		t.Fatal(err)
	}
	want := []v1.Taint{{Key: "dedicated", Value: "edge", Effect: v1.TaintEffectNoSchedule}, {Key: "gpu", Effect: v1.TaintEffectNoExecute}}
	if len(o.RegisterWithTaints) != 2 || o.RegisterWithTaints[0] != want[0] || o.RegisterWithTaints[1] != want[1] {
		t.Fatalf("taints = %+v", o.RegisterWithTaints)
	}
	if o.kubeAPIQPS != 50 || o.KubeAPIBurst != 100 || !*o.RegisterNode || o.NodeStatusReportFrequency.Duration != 5*time.Minute {
		t.Fatalf("defaults: qps %v burst %d register %v report %v", o.kubeAPIQPS, o.KubeAPIBurst, *o.RegisterNode, o.NodeStatusReportFrequency.Duration)
	}
	if m := o.reserved[0][v1.ResourceMemory]; m.String() != "256Mi" || len(o.hardThresholds) != 4 {
		t.Fatalf("reserved %v thresholds %v", o.reserved, o.hardThresholds)
	}
	if o.ReadOnlyPort != 0 {
		t.Fatalf("read-only port %d by default; want 0 (off)", o.ReadOnlyPort)
	}
}
