package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// configzDoc is /configz's kubeletconfig as a JSON document.
func configzDoc(t *testing.T, o *options) map[string]any {
	t.Helper()
	b, err := json.Marshal(configz(o))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// A flag with a config field is registered onto that field: what it is
// given is what /configz shows, also over a config file's value.
func TestFlagsReachConfigz(t *testing.T) {
	file := configYAML("maxPods", "12") + "syncFrequency: 11s\nevictionHard: {memory.available: 1Gi}\n"
	tests := []struct {
		name string
		args []string
		path string
		want any
	}{
		{name: "int32", args: []string{"--max-pods", "7"}, path: "maxPods", want: 7.0},
		{name: "duration", args: []string{"--sync-frequency", "3s"}, path: "syncFrequency", want: "3s"},
		{name: "pointer", args: []string{"--healthz-port", "0"}, path: "healthzPort", want: 0.0},
		{name: "nested pointer", args: []string{"--anonymous-auth"}, path: "authentication.anonymous.enabled", want: true},
		{name: "alias", args: []string{"--pod-manifest-path", "/p"}, path: "staticPodPath", want: "/p"},
		{name: "threshold map", args: []string{"--eviction-hard", "memory.available<1Gi,nodefs.available<5%"}, path: "evictionHard",
			want: map[string]any{"memory.available": "1Gi", "nodefs.available": "5%"}},
		{name: "header map, values redacted", args: []string{"--manifest-url-header", "A:x,B:y"}, path: "staticPodURLHeader",
			want: map[string]any{"A": []any{"[redacted]"}, "B": []any{"[redacted]"}}},
		{name: "manifest URL, password and query values redacted", args: []string{"--manifest-url", "https://u:secret@example.invalid/p?sig=abc&x=1"}, path: "staticPodURL",
			want: "https://u:xxxxx@example.invalid/p?sig=xxxxx&x=xxxxx"},
		{name: "manifest URL, user-name token, bare query key and fragment redacted", args: []string{"--manifest-url", "https://tok3n@example.invalid/p?s3cret&a=1#fr4g"}, path: "staticPodURL",
			want: "https://xxxxx@example.invalid/p?a=xxxxx&xxxxx#xxxxx"},
		{name: "taints", args: []string{"--register-with-taints", "a=b:NoSchedule"}, path: "registerWithTaints",
			want: []any{map[string]any{"key": "a", "value": "b", "effect": "NoSchedule"}}},
		{name: "verbosity", args: []string{"-v", "4"}, path: "logging.verbosity", want: 4.0},
		{name: "default", args: nil, path: "crashLoopBackOff.maxContainerRestartPeriod", want: "5m0s"},
		{name: "file, flag not given", args: nil, path: "syncFrequency", want: "11s"},
		{name: "flag wins over the file", args: []string{"--max-pods", "3"}, path: "maxPods", want: 3.0},
		{name: "flag map replaces the file's", args: []string{"--eviction-hard", "nodefs.available<1%"}, path: "evictionHard",
			want: map[string]any{"nodefs.available": "1%"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseWithConfigArgs(t, file, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, valueAt(configzDoc(t, o), tt.path)); diff != "" {
				t.Errorf("/configz %s (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}

// A field nodeagent does not implement is warned about and left out of
// the effective configuration: /configz shows only what is in effect.
func TestUnimplementedFieldsLeaveConfigz(t *testing.T) {
	o, err := parseWithConfig(t, configYAML("providerID", "aws:///i-1")+"authentication: {webhook: {cacheTTL: 30s}}\n")
	if err != nil {
		t.Fatal(err)
	}
	doc := configzDoc(t, o)
	got := map[string]any{"providerID": valueAt(doc, "providerID"), "authentication.webhook.cacheTTL": valueAt(doc, "authentication.webhook.cacheTTL")}
	want := map[string]any{"providerID": nil, "authentication.webhook.cacheTTL": "2m0s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/configz (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"authentication.webhook.cacheTTL", "providerID"}, o.configWarnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// The kubelet's container GC flags (no config field): its defaults, and
// only a negative minimum age refused, as the kubelet's container GC.
func TestContainerGCFlags(t *testing.T) {
	type gc struct {
		minAge                time.Duration
		perContainer, maximum int32
	}
	tests := []struct {
		name    string
		args    []string
		want    gc
		wantErr string
	}{
		{name: "kubelet defaults", want: gc{0, 1, -1}},
		{name: "given", args: []string{"--minimum-container-ttl-duration", "1m", "--maximum-dead-containers-per-container", "2",
			"--maximum-dead-containers", "-1"}, want: gc{time.Minute, 2, -1}},
		{name: "node-wide limit not implemented", args: []string{"--maximum-dead-containers", "100"}, wantErr: "--maximum-dead-containers 100: only -1"},
		{name: "no per-container limit", args: []string{"--maximum-dead-containers-per-container", "-1"}, want: gc{0, -1, -1}},
		{name: "negative age", args: []string{"--minimum-container-ttl-duration", "-1s"}, wantErr: "invalid minimum garbage collection age"},
		{name: "not an int32", args: []string{"--maximum-dead-containers", "3000000000"}, wantErr: "value out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(append([]string{"--manifest-dir", "/m"}, tt.args...))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := gc{o.minimumContainerTTL, o.maxDeadPerContainer, o.maxDeadContainers}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(gc{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// --kube-api-qps stays a float flag: a fraction is kept for the client,
// while the config's int32 field shows it truncated.
func TestKubeAPIQPS(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    float32
		wantErr string
	}{
		{name: "default", want: 50},
		{name: "whole", args: []string{"--kube-api-qps", "20"}, want: 20},
		{name: "fraction", args: []string{"--kube-api-qps", "0.5"}, want: 0.5},
		{name: "zero", args: []string{"--kube-api-qps", "0"}, wantErr: "must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseOptions(append([]string{"--kubeconfig", "/k"}, tt.args...))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, o.kubeAPIQPS); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A file setting every honoured field at once reads back the same from
// /configz, field by field: file → effective config → /configz.
func TestConfigFileRoundTrip(t *testing.T) {
	doc := map[string]any{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration"}
	want := map[string]any{}
	for path, v := range fieldSamples {
		if exclusive[path] {
			continue
		}
		var sample any
		if err := yaml.Unmarshal([]byte(v), &sample); err != nil {
			t.Fatal(err)
		}
		want[path] = sample
		m, keys := doc, strings.Split(path, ".")
		for _, k := range keys[:len(keys)-1] {
			if m[k] == nil {
				m[k] = map[string]any{}
			}
			m = m[k].(map[string]any)
		}
		m[keys[len(keys)-1]] = sample
	}
	body, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseWithConfig(t, string(body))
	if err != nil {
		t.Fatal(err)
	}
	cz := configzDoc(t, o)
	// Credentials are shown redacted (the samples' header value).
	for path, shown := range configzShows {
		var v any
		if err := yaml.Unmarshal([]byte(shown), &v); err != nil {
			t.Fatal(err)
		}
		want[path] = v
	}
	got := map[string]any{}
	for path, sample := range want {
		got[path] = valueAt(cz, path)
		if got[path] == nil && isZero(sample) {
			got[path] = sample // omitted from /configz as its zero value
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/configz differs from the file (-file +configz):\n%s", diff)
	}
	if len(o.configWarnings) != 0 {
		t.Errorf("warned about %v", o.configWarnings)
	}
}
