package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// fieldSamples holds, for every honoured field, a value other than
// nodeagent's default.
var fieldSamples = map[string]string{
	"staticPodPath": "/etc/kubernetes/manifests", "staticPodURL": "http://127.0.0.1:1/pods", "localStorageCapacityIsolation": "false",
	"shutdownGracePeriod": "30s", "shutdownGracePeriodCriticalPods": "10s",
	"shutdownGracePeriodByPodPriority": "[{priority: 100, shutdownGracePeriodSeconds: 5}]",
	"staticPodURLHeader":               "{X-Token: [abc]}", "httpCheckFrequency": "7s", "fileCheckFrequency": "9s", "syncFrequency": "11s",
	"containerRuntimeEndpoint": "unix:///run/k3s/containerd/containerd.sock", "runtimeRequestTimeout": "1m0s", "podCIDR": "10.1.0.0/24",
	"cpuManagerPolicy": "static", "reservedSystemCPUs": "\"0-1\"", "cpuManagerReconcilePeriod": "5s",
	"cpuManagerPolicyOptions": "{full-pcpus-only: \"true\"}", "podLogsDir": "/var/log/other-pods", "clusterDomain": "example.org",
	"resolvConf": "/run/systemd/resolve/resolv.conf", "allowedUnsafeSysctls": "[net.core.somaxconn]", "clusterDNS": "[10.96.0.10]",
	"cgroupRoot": "/custom", "cgroupDriver": "systemd", "podPidsLimit": "512", "cgroupsPerQOS": "false", "enforceNodeAllocatable": "[none]",
	"seccompDefault": "true", "healthzBindAddress": "0.0.0.0", "healthzPort": "10249", "address": "127.0.0.1", "port": "10251",
	"readOnlyPort": "10255", "tlsCertFile": "/etc/kubelet.crt", "tlsPrivateKeyFile": "/etc/kubelet.key", "tlsMinVersion": "VersionTLS13",
	"tlsCipherSuites": "[TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]", "serverTLSBootstrap": "true",
	"authentication.x509.clientCAFile": "/etc/kubernetes/pki/ca.crt", "authentication.anonymous.enabled": "true",
	"authentication.webhook.enabled": "false", "authorization.mode": "AlwaysAllow",
	"crashLoopBackOff.maxContainerRestartPeriod": "1m0s", "maxPods": "12", "containerLogMaxSize": "5Mi", "containerLogMaxFiles": "3",
	"containerLogMaxWorkers": "2", "containerLogMonitorInterval": "20s", "serializeImagePulls": "false", "maxParallelImagePulls": "3",
	"imageGCHighThresholdPercent": "90", "imageGCLowThresholdPercent": "70", "imageMinimumGCAge": "3m0s", "imageMaximumGCAge": "48h0m0s",
	"evictionHard": "{memory.available: 200Mi}", "evictionSoft": "{memory.available: 300Mi}",
	"evictionSoftGracePeriod": "{memory.available: 1m30s}", "evictionPressureTransitionPeriod": "1m0s", "evictionMaxPodGracePeriod": "30",
	"kubeReserved": "{cpu: 100m}", "systemReserved": "{memory: 100Mi}", "registerNode": "false",
	"registerWithTaints": "[{key: dedicated, value: edge, effect: NoSchedule}]", "nodeStatusUpdateFrequency": "4s",
	"nodeStatusReportFrequency": "1m0s", "nodeLeaseDurationSeconds": "20", "kubeAPIQPS": "20", "kubeAPIBurst": "40",
	"rotateCertificates": "false", "logging.verbosity": "4",
}

// companions are fields a sample needs beside it to be valid.
var companions = map[string]string{
	"maxParallelImagePulls":           "serializeImagePulls: false\n",
	"evictionSoft":                    "evictionSoftGracePeriod: {memory.available: 1m0s}\n",
	"tlsCertFile":                     "tlsPrivateKeyFile: /k.key\n",
	"tlsPrivateKeyFile":               "tlsCertFile: /k.crt\n",
	"shutdownGracePeriodCriticalPods": "shutdownGracePeriod: 30s\n",
}

// exclusive are fields a file cannot set with all the others (each is
// still round-tripped alone by TestHonouredFieldsTakeEffect).
var exclusive = map[string]bool{
	"shutdownGracePeriodByPodPriority": true, // not with shutdownGracePeriod
}

// configYAML is a KubeletConfiguration setting the field at path to the
// YAML value v.
func configYAML(path, v string) string {
	keys := strings.Split(path, ".")
	var b strings.Builder
	b.WriteString("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
	for i, k := range keys {
		b.WriteString(strings.Repeat("  ", i) + k + ":")
		if i < len(keys)-1 {
			b.WriteString("\n")
		}
	}
	b.WriteString(" " + v + "\n")
	return b.String()
}

// parseWithConfig parses a config file holding body (plus --kubeconfig
// so that the options are valid).
func parseWithConfig(t *testing.T, body string) (*options, error) {
	t.Helper()
	return parseWithConfigArgs(t, body)
}

// parseWithConfigArgs is parseWithConfig with more flags.
func parseWithConfigArgs(t *testing.T, body string, args ...string) (*options, error) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return parseOptions(append([]string{"--config", cfg, "--kubeconfig", "/k"}, args...))
}

// valueAt is the value at a dotted path of a JSON document.
func valueAt(doc map[string]any, path string) any {
	var cur any = doc
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[k]
	}
	return cur
}

// Every honoured field, set alone in a config file, changes the
// effective options, is not warned about, and reads back the same from
// /configz: file → options → /configz cannot drift.
func TestHonouredFieldsTakeEffect(t *testing.T) {
	base, err := parseWithConfig(t, configYAML("maxPods", "110"))
	if err != nil {
		t.Fatal(err)
	}
	for path := range honouredFields {
		if path == "apiVersion" || path == "kind" {
			continue
		}
		t.Run(path, func(t *testing.T) {
			v, ok := fieldSamples[path]
			if !ok {
				t.Fatalf("no sample value for the honoured field %s", path)
			}
			o, err := parseWithConfig(t, configYAML(path, v)+companions[path])
			if err != nil && !strings.Contains(err.Error(), "systemd") {
				t.Fatalf("parse: %v", err)
			}
			if o == nil {
				return // refused with a reason (cgroupDriver systemd): not ignored
			}
			got, want := *o, *base
			got.configFile, want.configFile = "", ""
			if reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %s changed nothing", path, v)
			}
			if len(o.configWarnings) != 0 {
				t.Fatalf("warned about %v", o.configWarnings)
			}
			var sample any
			if shown, ok := configzShows[path]; ok {
				v = shown
			}
			if err := yaml.Unmarshal([]byte(v), &sample); err != nil {
				t.Fatal(err)
			}
			cz, err := json.Marshal(configz(o))
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			json.Unmarshal(cz, &doc)
			back := valueAt(doc, path)
			if back == nil && isZero(sample) {
				back = sample // omitted from /configz as its zero value
			}
			if !reflect.DeepEqual(back, sample) {
				t.Fatalf("/configz %s = %#v, want %#v as in the file", path, back, sample)
			}
		})
	}
}

// configzShows is what /configz shows of a field sample it redacts.
var configzShows = map[string]string{"staticPodURLHeader": "{X-Token: ['[redacted]']}"}

// Fields nodeagent does not implement are named, sorted, also inside
// nested structs; zero values (the default) and honoured fields are not.
func TestUnimplementedConfigFieldsAreNamed(t *testing.T) {
	o, err := parseWithConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failSwapOn: false
providerID: aws:///i-1
maxPods: 20
featureGates: {SomeGate: true}
authentication:
  webhook:
    enabled: true
    cacheTTL: 30s
  x509:
    clientCAFile: /ca.crt
shutdownGracePeriod: 0s
logging:
  flushFrequency: 0
  format: json
evictionHard: {memory.available: 50Mi}
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"authentication.webhook.cacheTTL", "featureGates", "logging.format", "providerID"}
	if !slices.Equal(o.configWarnings, want) {
		t.Fatalf("warnings %v, want %v", o.configWarnings, want)
	}
	if joinMap(o.EvictionHard, "<") != "memory.available<50Mi" || o.MaxPods != 20 {
		t.Fatalf("evictionHard %v maxPods %d", o.EvictionHard, o.MaxPods)
	}
}
