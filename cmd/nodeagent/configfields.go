package main

import (
	"sort"
)

// honouredFields are the KubeletConfiguration fields (JSON paths) that
// nodeagent implements (loadConfigFile keeps them, and only them); a field under one of them is honoured too.
// TestHonouredFieldsTakeEffect sets each and checks it changes the
// options, so this list cannot claim more than is done.
var honouredFields = map[string]bool{
	"apiVersion": true, "kind": true,
	"staticPodPath": true, "staticPodURL": true, "staticPodURLHeader": true, "httpCheckFrequency": true, "fileCheckFrequency": true,
	"syncFrequency": true, "containerRuntimeEndpoint": true, "runtimeRequestTimeout": true, "podCIDR": true,
	"cpuManagerPolicy": true, "reservedSystemCPUs": true, "cpuManagerReconcilePeriod": true, "cpuManagerPolicyOptions": true,
	"podLogsDir": true, "clusterDomain": true, "resolvConf": true, "allowedUnsafeSysctls": true, "clusterDNS": true,
	"cgroupRoot": true, "cgroupDriver": true, "podPidsLimit": true, "cgroupsPerQOS": true, "enforceNodeAllocatable": true, "seccompDefault": true,
	"healthzBindAddress": true, "healthzPort": true, "address": true, "port": true, "readOnlyPort": true,
	"tlsCertFile": true, "tlsPrivateKeyFile": true, "tlsMinVersion": true, "tlsCipherSuites": true, "serverTLSBootstrap": true,
	"authentication.x509.clientCAFile": true, "authentication.anonymous.enabled": true, "authentication.webhook.enabled": true,
	"authorization.mode": true, "crashLoopBackOff.maxContainerRestartPeriod": true, "maxPods": true,
	"containerLogMaxSize": true, "containerLogMaxFiles": true, "containerLogMaxWorkers": true, "containerLogMonitorInterval": true,
	"serializeImagePulls": true, "maxParallelImagePulls": true, "imageGCHighThresholdPercent": true, "imageGCLowThresholdPercent": true,
	"imageMinimumGCAge": true, "imageMaximumGCAge": true,
	"evictionHard": true, "evictionSoft": true, "evictionSoftGracePeriod": true, "evictionPressureTransitionPeriod": true,
	"evictionMaxPodGracePeriod": true, "kubeReserved": true, "systemReserved": true,
	"registerNode": true, "registerWithTaints": true, "nodeStatusUpdateFrequency": true, "nodeStatusReportFrequency": true,
	"nodeLeaseDurationSeconds": true, "kubeAPIQPS": true, "kubeAPIBurst": true, "rotateCertificates": true,
	"logging.verbosity": true, "localStorageCapacityIsolation": true,
	"shutdownGracePeriod": true, "shutdownGracePeriodCriticalPods": true, "shutdownGracePeriodByPodPriority": true,
}

// structFields are the config's struct-valued fields, looked into field
// by field; any other object (evictionHard, featureGates, …) is one value.
var structFields = map[string]bool{
	"authentication": true, "authentication.x509": true, "authentication.webhook": true, "authentication.anonymous": true,
	"authorization": true, "authorization.webhook": true, "crashLoopBackOff": true,
	"logging": true, "logging.options": true, "logging.options.json": true, "logging.options.text": true, "memorySwap": true,
}

// honouredOnly is a decoded config file with only its honoured fields:
// the effective configuration holds nothing nodeagent does not do.
func honouredOnly(prefix string, m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		if honouredFields[path] {
			out[k] = v
			continue
		}
		if sub, ok := v.(map[string]any); ok && structFields[path] {
			if kept := honouredOnly(path, sub); len(kept) > 0 {
				out[k] = kept
			}
		}
	}
	return out
}

// unimplementedFields lists the fields of a decoded config file that are
// set (to other than their zero value, which means "the default") and
// that nodeagent does not implement, sorted.
func unimplementedFields(raw map[string]any) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			if honouredFields[path] || isZero(v) {
				continue
			}
			if sub, ok := v.(map[string]any); ok && structFields[path] {
				walk(path, sub)
				continue
			}
			out = append(out, path)
		}
	}
	walk("", raw)
	sort.Strings(out)
	return out
}

// isZero reports a decoded YAML value that says nothing: null, false, 0,
// "", "0", "0s", or an empty list or object (or one of only such values).
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case float64:
		return x == 0
	case string:
		return x == "" || x == "0" || x == "0s"
	case []any:
		return len(x) == 0
	case map[string]any:
		for _, e := range x {
			if !isZero(e) {
				return false
			}
		}
		return true
	}
	return false
}
