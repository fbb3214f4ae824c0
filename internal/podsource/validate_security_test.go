package podsource

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestValidateSecurityContext(t *testing.T) {
	csc := func(f func(sc *v1.SecurityContext)) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			sc := &v1.SecurityContext{}
			f(sc)
			app(p).SecurityContext = sc
		}
	}
	runValidateCases(t, []validateCase{
		{
			name:   "negative runAsUser",
			mutate: csc(func(sc *v1.SecurityContext) { sc.RunAsUser = ptr.To[int64](-1) }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].securityContext.runAsUser"}},
		},
		{
			name:   "negative runAsGroup",
			mutate: csc(func(sc *v1.SecurityContext) { sc.RunAsGroup = ptr.To[int64](-1) }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].securityContext.runAsGroup"}},
		},
		{
			name:   "root is a valid user",
			mutate: csc(func(sc *v1.SecurityContext) { sc.RunAsUser, sc.RunAsGroup = ptr.To[int64](0), ptr.To[int64](0) }),
		},
		{
			name: "privileged without privilege escalation",
			mutate: csc(func(sc *v1.SecurityContext) {
				sc.Privileged, sc.AllowPrivilegeEscalation = ptr.To(true), ptr.To(false)
			}),
			want: []fieldErr{{tInvalid, "spec.containers[0].securityContext"}},
		},
		{
			name: "CAP_SYS_ADMIN without privilege escalation",
			mutate: csc(func(sc *v1.SecurityContext) {
				sc.AllowPrivilegeEscalation = ptr.To(false)
				sc.Capabilities = &v1.Capabilities{Add: []v1.Capability{"CAP_SYS_ADMIN"}}
			}),
			want: []fieldErr{{tInvalid, "spec.containers[0].securityContext"}},
		},
		{
			name: "capability names with and without CAP_",
			mutate: csc(func(sc *v1.SecurityContext) {
				sc.Capabilities = &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN", "CAP_SYS_TIME"}, Drop: []v1.Capability{"ALL"}}
			}),
		},
		{
			name:   "malformed capability",
			mutate: csc(func(sc *v1.SecurityContext) { sc.Capabilities = &v1.Capabilities{Drop: []v1.Capability{"NET ADMIN"}} }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].securityContext.capabilities.drop[0]"}},
		},
		{
			name:   "unknown procMount",
			mutate: csc(func(sc *v1.SecurityContext) { sc.ProcMount = ptr.To[v1.ProcMountType]("Masked") }),
			want:   []fieldErr{{tNotSupported, "spec.containers[0].securityContext.procMount"}},
		},
		{
			name:   "unmasked /proc in the host user namespace",
			mutate: csc(func(sc *v1.SecurityContext) { sc.ProcMount = ptr.To(v1.UnmaskedProcMount) }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].securityContext.procMount"}},
		},
		{
			name: "unmasked /proc in a user namespace",
			mutate: func(p *v1.Pod) {
				p.Spec.HostUsers = ptr.To(false)
				app(p).SecurityContext = &v1.SecurityContext{ProcMount: ptr.To(v1.UnmaskedProcMount)}
			},
		},
		{
			name:   "seccomp profile type",
			mutate: csc(func(sc *v1.SecurityContext) { sc.SeccompProfile = &v1.SeccompProfile{Type: "Default"} }),
			want:   []fieldErr{{tNotSupported, "spec.containers[0].securityContext.seccompProfile.type"}},
		},
		{
			name: "localhost seccomp profile without a file",
			mutate: csc(func(sc *v1.SecurityContext) {
				sc.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}
			}),
			want: []fieldErr{{tRequired, "spec.containers[0].securityContext.seccompProfile.localhostProfile"}},
		},
		{
			name: "localhost seccomp profile outside the profile root",
			mutate: csc(func(sc *v1.SecurityContext) {
				sc.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("../x.json")}
			}),
			want: []fieldErr{{tInvalid, "spec.containers[0].securityContext.seccompProfile.localhostProfile"}},
		},
		{
			name:   "AppArmor profile type",
			mutate: csc(func(sc *v1.SecurityContext) { sc.AppArmorProfile = &v1.AppArmorProfile{Type: "Complain"} }),
			want:   []fieldErr{{tNotSupported, "spec.containers[0].securityContext.appArmorProfile.type"}},
		},
		{
			name:   "negative fsGroup",
			mutate: func(p *v1.Pod) { p.Spec.SecurityContext.FSGroup = ptr.To[int64](-5) },
			want:   []fieldErr{{tInvalid, "spec.securityContext.fsGroup"}},
		},
		{
			name:   "pod runAsUser beyond the range",
			mutate: func(p *v1.Pod) { p.Spec.SecurityContext.RunAsUser = ptr.To[int64](1 << 32) },
			want:   []fieldErr{{tInvalid, "spec.securityContext.runAsUser"}},
		},
		{
			name: "valid sysctls",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext.Sysctls = []v1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}, {Name: "kernel/shm_rmid_forced", Value: "1"}}
			},
		},
		{
			name:   "malformed sysctl",
			mutate: func(p *v1.Pod) { p.Spec.SecurityContext.Sysctls = []v1.Sysctl{{Name: "net..ipv4", Value: "1"}} },
			want:   []fieldErr{{tInvalid, "spec.securityContext.sysctls[0].name"}},
		},
		{
			name: "sysctl set twice",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext.Sysctls = []v1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}, {Name: "kernel.shm_rmid_forced", Value: "0"}}
			},
			want: []fieldErr{{tDuplicate, "spec.securityContext.sysctls[1].name"}},
		},
		{
			name: "network sysctl on the host network",
			mutate: func(p *v1.Pod) {
				p.Spec.HostNetwork = true
				app(p).Ports[0].HostPort = 80
				p.Spec.SecurityContext.Sysctls = []v1.Sysctl{{Name: "net.ipv4.ip_local_port_range", Value: "1024 65535"}}
			},
			want: []fieldErr{{tInvalid, "spec.securityContext.sysctls[0].name"}},
		},
		{
			name: "user namespace with the host PID namespace",
			mutate: func(p *v1.Pod) {
				p.Spec.HostUsers = ptr.To(false)
				p.Spec.HostPID = true
			},
			want: []fieldErr{{tForbidden, "spec.hostPID"}},
		},
		{
			name: "shared process namespace with the host PID namespace",
			mutate: func(p *v1.Pod) {
				p.Spec.HostPID = true
				p.Spec.ShareProcessNamespace = ptr.To(true)
			},
			want: []fieldErr{{tInvalid, "spec.shareProcessNamespace"}},
		},
	})
}

func TestValidateScheduling(t *testing.T) {
	required := func(terms ...v1.NodeSelectorTerm) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: terms},
			}}
		}
	}
	expr := func(key string, op v1.NodeSelectorOperator, values ...string) v1.NodeSelectorTerm {
		return v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
	}
	na := "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
	spread := func(c v1.TopologySpreadConstraint) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			if c.LabelSelector == nil {
				c.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
			}
			p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
		}
	}
	tol := func(tl v1.Toleration) func(p *v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Tolerations = append([]v1.Toleration{tl}, p.Spec.Tolerations...) }
	}
	runValidateCases(t, []validateCase{
		{name: "node affinity In", mutate: required(expr("disk", v1.NodeSelectorOpIn, "ssd"))},
		{name: "required node affinity without terms", mutate: required(), want: []fieldErr{{tRequired, na}}},
		{
			name:   "unknown operator",
			mutate: required(expr("disk", "Like", "ssd")),
			want:   []fieldErr{{tInvalid, na + "[0].matchExpressions[0].operator"}},
		},
		{
			name:   "In without values",
			mutate: required(expr("disk", v1.NodeSelectorOpIn)),
			want:   []fieldErr{{tRequired, na + "[0].matchExpressions[0].values"}},
		},
		{
			name:   "Exists with values",
			mutate: required(expr("disk", v1.NodeSelectorOpExists, "ssd")),
			want:   []fieldErr{{tForbidden, na + "[0].matchExpressions[0].values"}},
		},
		{
			name:   "Gt with two values",
			mutate: required(expr("gpus", v1.NodeSelectorOpGt, "1", "2")),
			want:   []fieldErr{{tRequired, na + "[0].matchExpressions[0].values"}},
		},
		{
			name:   "key that is not a label name",
			mutate: required(expr("disk type", v1.NodeSelectorOpExists)),
			want:   []fieldErr{{tInvalid, na + "[0].matchExpressions[0].key"}},
		},
		{
			name:   "value that is not a label value",
			mutate: required(expr("disk", v1.NodeSelectorOpIn, "not a value")),
			want:   []fieldErr{{tInvalid, na + "[0].matchExpressions[0].values[0]"}},
		},
		{
			name: "matchFields on a field other than metadata.name",
			mutate: required(v1.NodeSelectorTerm{MatchFields: []v1.NodeSelectorRequirement{
				{Key: "metadata.namespace", Operator: v1.NodeSelectorOpIn, Values: []string{"x"}}}}),
			want: []fieldErr{{tInvalid, na + "[0].matchFields[0].key"}},
		},
		{
			name: "preferred term weight out of range",
			mutate: func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{
					{Weight: 0, Preference: expr("disk", v1.NodeSelectorOpExists)}}}}
			},
			want: []fieldErr{{tInvalid, "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"}},
		},
		{
			name: "pod anti-affinity without a topology key",
			mutate: func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
					{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}}
			},
			want: []fieldErr{{tRequired, "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"}},
		},
		{
			name: "pod affinity with a malformed selector",
			mutate: func(p *v1.Pod) {
				p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
					TopologyKey:   "kubernetes.io/hostname",
					LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn}}},
				}}}}
			},
			want: []fieldErr{{tRequired, "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values"}},
		},
		{name: "topology spread", mutate: spread(v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule})},
		{
			name:   "maxSkew zero",
			mutate: spread(v1.TopologySpreadConstraint{MaxSkew: 0, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule}),
			want:   []fieldErr{{tInvalid, "spec.topologySpreadConstraints[0].maxSkew"}},
		},
		{
			name:   "whenUnsatisfiable",
			mutate: spread(v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "Wait"}),
			want:   []fieldErr{{tNotSupported, "spec.topologySpreadConstraints[0].whenUnsatisfiable"}},
		},
		{
			name:   "spread without a topology key",
			mutate: spread(v1.TopologySpreadConstraint{MaxSkew: 1, WhenUnsatisfiable: v1.ScheduleAnyway}),
			want:   []fieldErr{{tRequired, "spec.topologySpreadConstraints[0].topologyKey"}},
		},
		{
			name: "two constraints for one key and action",
			mutate: func(p *v1.Pod) {
				c := v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.DoNotSchedule}
				spread(c)(p)
				spread(c)(p)
			},
			want: []fieldErr{{tDuplicate, "spec.topologySpreadConstraints[1].{topologyKey, whenUnsatisfiable}"}},
		},
		{
			name:   "minDomains with ScheduleAnyway",
			mutate: spread(v1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: v1.ScheduleAnyway, MinDomains: ptr.To[int32](2)}),
			want:   []fieldErr{{tInvalid, "spec.topologySpreadConstraints[0].minDomains"}},
		},
		{
			name:   "toleration with an empty key needs Exists",
			mutate: tol(v1.Toleration{Operator: v1.TolerationOpEqual, Value: "x"}),
			want:   []fieldErr{{tInvalid, "spec.tolerations[0].operator"}},
		},
		{
			name:   "tolerationSeconds without NoExecute",
			mutate: tol(v1.Toleration{Key: "k", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](10)}),
			want:   []fieldErr{{tInvalid, "spec.tolerations[0].effect"}},
		},
		{
			name:   "Exists with a value",
			mutate: tol(v1.Toleration{Key: "k", Operator: v1.TolerationOpExists, Value: "v"}),
			want:   []fieldErr{{tInvalid, "spec.tolerations[0].operator"}},
		},
		{
			name:   "unknown taint effect",
			mutate: tol(v1.Toleration{Key: "k", Operator: v1.TolerationOpExists, Effect: "NoRun"}),
			want:   []fieldErr{{tNotSupported, "spec.tolerations[0].effect"}},
		},
		{
			name:   "nodeSelector key",
			mutate: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"bad key": "x"} },
			want:   []fieldErr{{tInvalid, "spec.nodeSelector"}},
		},
		{
			name:   "scheduling gates",
			mutate: func(p *v1.Pod) { p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/wait"}} },
			want:   []fieldErr{{tForbidden, "spec.schedulingGates"}},
		},
	})
}
