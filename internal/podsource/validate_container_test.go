package podsource

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestValidateResources(t *testing.T) {
	runValidateCases(t, []validateCase{
		{
			name:   "negative cpu limit",
			mutate: func(p *v1.Pod) { sidecar(p).Resources.Limits = rl("cpu", "-1") },
			want:   []fieldErr{{tInvalid, "spec.containers[1].resources.limits[cpu]"}},
		},
		{
			name:   "negative memory limit",
			mutate: func(p *v1.Pod) { sidecar(p).Resources.Limits = rl("memory", "-5Mi") },
			want:   []fieldErr{{tInvalid, "spec.containers[1].resources.limits[memory]"}},
		},
		{
			name: "negative limit copied to the request by defaulting",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources = v1.ResourceRequirements{Limits: rl("cpu", "-1"), Requests: rl("cpu", "-1")}
			},
			want: []fieldErr{
				{tInvalid, "spec.containers[1].resources.limits[cpu]"},
				{tInvalid, "spec.containers[1].resources.requests[cpu]"},
			},
		},
		{
			name:   "negative init container request",
			mutate: func(p *v1.Pod) { setup(p).Resources.Requests = rl("ephemeral-storage", "-1Gi") },
			want:   []fieldErr{{tInvalid, "spec.initContainers[0].resources.requests[ephemeral-storage]"}},
		},
		{
			name:   "memory request above limit",
			mutate: func(p *v1.Pod) { app(p).Resources.Requests[v1.ResourceMemory] = resource.MustParse("65Mi") },
			want:   []fieldErr{{tInvalid, "spec.containers[0].resources.requests[memory]"}},
		},
		{
			name:   "resource name without a domain that is not standard",
			mutate: func(p *v1.Pod) { sidecar(p).Resources.Requests = rl("gpu", "1") },
			want:   []fieldErr{{tInvalid, "spec.containers[1].resources.requests[gpu]"}},
		},
		{
			name: "resource name that is not a qualified name",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources.Limits = v1.ResourceList{"example.com/a b": resource.MustParse("1")}
			},
			want: []fieldErr{{tInvalid, "spec.containers[1].resources.limits[example.com/a b]"}},
		},
		{
			name: "valid extended resource: integer, request equal to limit",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources = v1.ResourceRequirements{Limits: rl("example.com/gpu", "2"), Requests: rl("example.com/gpu", "2")}
			},
		},
		{
			name: "extended resource request below its limit",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources = v1.ResourceRequirements{Limits: rl("example.com/gpu", "2"), Requests: rl("example.com/gpu", "1")}
			},
			want: []fieldErr{{tInvalid, "spec.containers[1].resources.requests[example.com/gpu]"}},
		},
		{
			name:   "extended resource request without a limit",
			mutate: func(p *v1.Pod) { sidecar(p).Resources.Requests = rl("example.com/gpu", "1") },
			want:   []fieldErr{{tRequired, "spec.containers[1].resources.limits[example.com/gpu]"}},
		},
		{
			name: "fractional extended resource",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources = v1.ResourceRequirements{Limits: rl("example.com/gpu", "500m"), Requests: rl("example.com/gpu", "500m")}
			},
			want: []fieldErr{
				{tInvalid, "spec.containers[1].resources.limits[example.com/gpu]"},
				{tInvalid, "spec.containers[1].resources.requests[example.com/gpu]"},
			},
		},
		{
			name: "valid hugepages beside memory",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources = v1.ResourceRequirements{
					Limits:   rl("hugepages-2Mi", "4Mi", "memory", "64Mi"),
					Requests: rl("hugepages-2Mi", "4Mi", "memory", "64Mi"),
				}
			},
		},
		{
			name: "hugepages not a whole number of pages",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources = v1.ResourceRequirements{
					Limits:   rl("hugepages-2Mi", "3Mi", "memory", "64Mi"),
					Requests: rl("hugepages-2Mi", "3Mi", "memory", "64Mi"),
				}
			},
			want: []fieldErr{
				{tInvalid, "spec.containers[1].resources.limits[hugepages-2Mi]"},
				{tInvalid, "spec.containers[1].resources.requests[hugepages-2Mi]"},
			},
		},
		{
			name: "hugepages without cpu or memory",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources = v1.ResourceRequirements{Limits: rl("hugepages-1Gi", "1Gi"), Requests: rl("hugepages-1Gi", "1Gi")}
			},
			want: []fieldErr{{tForbidden, "spec.containers[1].resources"}},
		},
		{
			name: "hugepages request below its limit",
			mutate: func(p *v1.Pod) {
				sidecar(p).Resources = v1.ResourceRequirements{
					Limits:   rl("hugepages-2Mi", "4Mi", "cpu", "1"),
					Requests: rl("hugepages-2Mi", "2Mi", "cpu", "1"),
				}
			},
			want: []fieldErr{{tInvalid, "spec.containers[1].resources.requests[hugepages-2Mi]"}},
		},
		{
			name:   "hugepages of page size zero",
			mutate: func(p *v1.Pod) { sidecar(p).Resources.Limits = rl("hugepages-0", "2Mi", "cpu", "1") },
			want:   []fieldErr{{tInvalid, "spec.containers[1].resources.limits[hugepages-0]"}},
		},
		{
			name:   "hugepages of a page size beyond int64",
			mutate: func(p *v1.Pod) { sidecar(p).Resources.Limits = rl("hugepages-1e30", "2Mi", "cpu", "1") },
			want:   []fieldErr{{tInvalid, "spec.containers[1].resources.limits[hugepages-1e30]"}},
		},
		{
			name:   "claim not among the pod's resource claims",
			mutate: func(p *v1.Pod) { sidecar(p).Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}} },
			want:   []fieldErr{{tNotFound, "spec.containers[1].resources.claims[0]"}},
		},
		{
			name: "pod-level resource that cannot be set for a pod",
			mutate: func(p *v1.Pod) {
				p.Spec.Resources = &v1.ResourceRequirements{Limits: rl("ephemeral-storage", "1Gi"), Requests: rl("ephemeral-storage", "1Gi")}
			},
			want: []fieldErr{
				{tNotSupported, "spec.resources.limits[ephemeral-storage]"},
				{tNotSupported, "spec.resources.requests[ephemeral-storage]"},
			},
		},
		{
			name:   "pod-level request below the containers' requests",
			mutate: func(p *v1.Pod) { p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "50m")} },
			want:   []fieldErr{{tInvalid, "spec.resources.requests[cpu]"}},
		},
		{
			name: "pod-level limit below a container's limit",
			mutate: func(p *v1.Pod) {
				p.Spec.Resources = &v1.ResourceRequirements{Limits: rl("cpu", "150m"), Requests: rl("cpu", "150m")}
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].resources.limits[cpu]"}},
		},
		{
			name:   "negative overhead",
			mutate: func(p *v1.Pod) { p.Spec.Overhead = rl("cpu", "-100m") },
			want:   []fieldErr{{tInvalid, "spec.overhead[cpu]"}},
		},
	})
}

func TestValidateProbesAndLifecycle(t *testing.T) {
	runValidateCases(t, []validateCase{
		{name: "http liveness probe on a named port", mutate: func(p *v1.Pod) { app(p).LivenessProbe = httpProbe(intstr.FromString("http")) }},
		{
			name: "probe without a handler",
			mutate: func(p *v1.Pod) {
				app(p).LivenessProbe = httpProbe(intstr.FromInt32(80))
				app(p).LivenessProbe.HTTPGet = nil
			},
			want: []fieldErr{{tRequired, "spec.containers[0].livenessProbe"}},
		},
		{
			name: "probe with two handlers",
			mutate: func(p *v1.Pod) {
				app(p).LivenessProbe = httpProbe(intstr.FromInt32(80))
				app(p).LivenessProbe.TCPSocket = &v1.TCPSocketAction{Port: intstr.FromInt32(80)}
			},
			want: []fieldErr{{tForbidden, "spec.containers[0].livenessProbe.tcpSocket"}},
		},
		{
			name:   "httpGet port out of range",
			mutate: func(p *v1.Pod) { app(p).ReadinessProbe = httpProbe(intstr.FromInt32(65536)) },
			want:   []fieldErr{{tInvalid, "spec.containers[0].readinessProbe.httpGet.port"}},
		},
		{
			name:   "httpGet port name that is not an IANA service name",
			mutate: func(p *v1.Pod) { app(p).ReadinessProbe = httpProbe(intstr.FromString("Web_Port")) },
			want:   []fieldErr{{tInvalid, "spec.containers[0].readinessProbe.httpGet.port"}},
		},
		{
			name: "httpGet scheme",
			mutate: func(p *v1.Pod) {
				app(p).ReadinessProbe = httpProbe(intstr.FromInt32(80))
				app(p).ReadinessProbe.HTTPGet.Scheme = "FTP"
			},
			want: []fieldErr{{tNotSupported, "spec.containers[0].readinessProbe.httpGet.scheme"}},
		},
		{
			name: "tcpSocket port zero",
			mutate: func(p *v1.Pod) {
				pr := httpProbe(intstr.FromInt32(80))
				pr.HTTPGet, pr.TCPSocket = nil, &v1.TCPSocketAction{Port: intstr.FromInt32(0)}
				app(p).StartupProbe = pr
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].startupProbe.tcpSocket.port"}},
		},
		{
			name: "grpc port out of range",
			mutate: func(p *v1.Pod) {
				pr := httpProbe(intstr.FromInt32(80))
				pr.HTTPGet, pr.GRPC = nil, &v1.GRPCAction{Port: 70000}
				app(p).LivenessProbe = pr
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].livenessProbe.grpc.port"}},
		},
		{
			name: "exec without a command",
			mutate: func(p *v1.Pod) {
				pr := httpProbe(intstr.FromInt32(80))
				pr.HTTPGet, pr.Exec = nil, &v1.ExecAction{}
				app(p).LivenessProbe = pr
			},
			want: []fieldErr{{tRequired, "spec.containers[0].livenessProbe.exec.command"}},
		},
		{
			name: "liveness successThreshold above 1",
			mutate: func(p *v1.Pod) {
				app(p).LivenessProbe = httpProbe(intstr.FromInt32(80))
				app(p).LivenessProbe.SuccessThreshold = 2
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].livenessProbe.successThreshold"}},
		},
		{
			name: "startup successThreshold above 1",
			mutate: func(p *v1.Pod) {
				app(p).StartupProbe = httpProbe(intstr.FromInt32(80))
				app(p).StartupProbe.SuccessThreshold = 3
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].startupProbe.successThreshold"}},
		},
		{
			name: "readiness successThreshold above 1 is fine",
			mutate: func(p *v1.Pod) {
				app(p).ReadinessProbe = httpProbe(intstr.FromInt32(80))
				app(p).ReadinessProbe.SuccessThreshold = 3
			},
		},
		{
			name: "zero period and negative initial delay",
			mutate: func(p *v1.Pod) {
				app(p).ReadinessProbe = httpProbe(intstr.FromInt32(80))
				app(p).ReadinessProbe.PeriodSeconds = 0
				app(p).ReadinessProbe.InitialDelaySeconds = -1
			},
			want: []fieldErr{
				{tInvalid, "spec.containers[0].readinessProbe.initialDelaySeconds"},
				{tInvalid, "spec.containers[0].readinessProbe.periodSeconds"},
			},
		},
		{
			name: "grace period on a readiness probe",
			mutate: func(p *v1.Pod) {
				app(p).ReadinessProbe = httpProbe(intstr.FromInt32(80))
				app(p).ReadinessProbe.TerminationGracePeriodSeconds = ptr.To[int64](5)
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].readinessProbe.terminationGracePeriodSeconds"}},
		},
		{
			name: "zero grace period on a liveness probe",
			mutate: func(p *v1.Pod) {
				app(p).LivenessProbe = httpProbe(intstr.FromInt32(80))
				app(p).LivenessProbe.TerminationGracePeriodSeconds = ptr.To[int64](0)
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].livenessProbe.terminationGracePeriodSeconds"}},
		},
		{
			name:   "probe on a regular init container",
			mutate: func(p *v1.Pod) { setup(p).ReadinessProbe = httpProbe(intstr.FromInt32(80)) },
			want:   []fieldErr{{tForbidden, "spec.initContainers[0].readinessProbe"}},
		},
		{
			name: "probes and lifecycle on a sidecar init container",
			mutate: func(p *v1.Pod) {
				setup(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
				setup(p).StartupProbe = httpProbe(intstr.FromInt32(80))
				setup(p).Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 5}}}
			},
		},
		{
			name: "sidecar probe checked like any other",
			mutate: func(p *v1.Pod) {
				setup(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways)
				setup(p).LivenessProbe = httpProbe(intstr.FromInt32(0))
			},
			want: []fieldErr{{tInvalid, "spec.initContainers[0].livenessProbe.httpGet.port"}},
		},
		{
			name: "lifecycle on a regular init container",
			mutate: func(p *v1.Pod) {
				setup(p).Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
			},
			want: []fieldErr{{tForbidden, "spec.initContainers[0].lifecycle"}},
		},
		{
			name:   "postStart without a handler",
			mutate: func(p *v1.Pod) { app(p).Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{}} },
			want:   []fieldErr{{tRequired, "spec.containers[0].lifecycle.postStart"}},
		},
		{
			name: "preStop sleep longer than the grace period",
			mutate: func(p *v1.Pod) {
				app(p).Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 31}}}
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].lifecycle.preStop.sleep.seconds"}},
		},
		{
			name: "negative preStop sleep",
			mutate: func(p *v1.Pod) {
				app(p).Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: -1}}}
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].lifecycle.preStop.sleep.seconds"}},
		},
		{
			name: "preStop sleep of zero",
			mutate: func(p *v1.Pod) {
				app(p).Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}}}
			},
		},
		{
			name: "postStart with exec and httpGet",
			mutate: func(p *v1.Pod) {
				app(p).Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{
					Exec:    &v1.ExecAction{Command: []string{"true"}},
					HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: v1.URISchemeHTTP},
				}}
			},
			want: []fieldErr{{tForbidden, "spec.containers[0].lifecycle.postStart.httpGet"}},
		},
	})
}

func TestValidateContainerFields(t *testing.T) {
	runValidateCases(t, []validateCase{
		{
			name:   "init container restartPolicy other than Always",
			mutate: func(p *v1.Pod) { setup(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicyOnFailure) },
			want:   []fieldErr{{tNotSupported, "spec.initContainers[0].restartPolicy"}},
		},
		{
			name:   "regular container with a restartPolicy",
			mutate: func(p *v1.Pod) { app(p).RestartPolicy = ptr.To(v1.ContainerRestartPolicyAlways) },
			want:   []fieldErr{{tForbidden, "spec.containers[0].restartPolicy"}},
		},
		{
			name: "ephemeral containers",
			mutate: func(p *v1.Pod) {
				p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
			},
			want: []fieldErr{{tForbidden, "spec.ephemeralContainers"}},
		},
		{
			name:   "terminationMessagePolicy",
			mutate: func(p *v1.Pod) { app(p).TerminationMessagePolicy = "Always" },
			want:   []fieldErr{{tNotSupported, "spec.containers[0].terminationMessagePolicy"}},
		},
		{
			name:   "relative terminationMessagePath",
			mutate: func(p *v1.Pod) { app(p).TerminationMessagePath = "dev/termination-log" },
			want:   []fieldErr{{tInvalid, "spec.containers[0].terminationMessagePath"}},
		},
		{
			name:   "overlong terminationMessagePath",
			mutate: func(p *v1.Pod) { app(p).TerminationMessagePath = "/" + strings.Repeat("x", 4096) },
			want:   []fieldErr{{tTooLong, "spec.containers[0].terminationMessagePath"}},
		},
		{
			name:   "image with surrounding blanks",
			mutate: func(p *v1.Pod) { app(p).Image = " nginx:1.25" },
			want:   []fieldErr{{tInvalid, "spec.containers[0].image"}},
		},
		{
			name: "env with both a value and a source",
			mutate: func(p *v1.Pod) {
				app(p).Env[0].ValueFrom = &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].env[0].valueFrom"}},
		},
		{
			name: "env reading a field the downward API does not offer",
			mutate: func(p *v1.Pod) {
				app(p).Env[0] = v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.hostNetwork"}}}
			},
			want: []fieldErr{{tNotSupported, "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath"}},
		},
		{
			name: "env reading a label",
			mutate: func(p *v1.Pod) {
				app(p).Env[0] = v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['app']"}}}
			},
		},
		{
			name: "env reading a resource that does not exist",
			mutate: func(p *v1.Pod) {
				app(p).Env[0] = v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.gpu"}}}
			},
			want: []fieldErr{{tNotSupported, "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource"}},
		},
		{
			name:   "envFrom without a source",
			mutate: func(p *v1.Pod) { app(p).EnvFrom = []v1.EnvFromSource{{Prefix: "X_"}} },
			want:   []fieldErr{{tInvalid, "spec.containers[0].envFrom[0]"}},
		},
		{
			name:   "port without a protocol",
			mutate: func(p *v1.Pod) { app(p).Ports[0].Protocol = "" },
			want:   []fieldErr{{tRequired, "spec.containers[0].ports[0].protocol"}},
		},
		{
			name: "host port used by two containers",
			mutate: func(p *v1.Pod) {
				sidecar(p).Ports = []v1.ContainerPort{{ContainerPort: 81, HostPort: 8080, Protocol: v1.ProtocolTCP}}
			},
			want: []fieldErr{{tDuplicate, "spec.containers[1].ports[0].hostPort"}},
		},
		{
			name: "same host port for an init container and a container",
			mutate: func(p *v1.Pod) {
				setup(p).Ports = []v1.ContainerPort{{ContainerPort: 81, HostPort: 8080, Protocol: v1.ProtocolTCP}}
			},
		},
		{
			name: "resize policy for a resource that cannot be resized",
			mutate: func(p *v1.Pod) {
				app(p).ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: "ephemeral-storage", RestartPolicy: v1.NotRequired}}
			},
			want: []fieldErr{{tNotSupported, "spec.containers[0].resizePolicy[0].resourceName"}},
		},
	})
}

func httpProbe(port intstr.IntOrString) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:   v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: port, Scheme: v1.URISchemeHTTP}},
		TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
	}
}
