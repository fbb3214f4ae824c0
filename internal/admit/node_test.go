package admit

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeHandlers(t *testing.T) {
	priv := true
	noExec := []v1.Taint{{Key: "dedicated", Value: "db", Effect: v1.TaintEffectNoExecute}, {Key: "soft", Effect: v1.TaintEffectNoSchedule}}
	mk := func(f func(p *v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1", Annotations: map[string]string{}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
		f(p)
		return p
	}
	sysctl := func(names ...string) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{}
			for _, n := range names {
				p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
			}
		}
	}
	tests := []struct {
		name   string
		h      Handler
		pod    *v1.Pod
		reason string // "" admits
	}{
		{"untolerated NoExecute taint", Taints(noExec), mk(func(*v1.Pod) {}), "TaintToleration"},
		{"tolerated NoExecute, NoSchedule ignored", Taints(noExec), mk(func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "dedicated", Operator: v1.TolerationOpEqual, Value: "db", Effect: v1.TaintEffectNoExecute}}
		}), ""},
		{"static pods' toleration of everything", Taints(noExec), mk(func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}}
		}), ""},
		{"safe sysctl", Sysctls(nil), mk(sysctl("net.ipv4.ip_local_port_range")), ""},
		{"unsafe sysctl", Sysctls(nil), mk(sysctl("kernel.msgmax")), "SysctlForbidden"},
		{"unsafe sysctl allowed by pattern", Sysctls([]string{"kernel.msg*"}), mk(sysctl("kernel.msgmax")), ""},
		{"slash-separated name", Sysctls(nil), mk(sysctl("net/ipv4/tcp_syncookies")), ""},
		{"net sysctl on the host network", Sysctls(nil), mk(func(p *v1.Pod) { sysctl("net.ipv4.tcp_syncookies")(p); p.Spec.HostNetwork = true }), "SysctlForbidden"},
		{"ipc sysctl with host IPC", Sysctls([]string{"kernel.shm*"}), mk(func(p *v1.Pod) { sysctl("kernel.shmmax")(p); p.Spec.HostIPC = true }), "SysctlForbidden"},
		{"other OS", PodOS(), mk(func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }), "PodOSNotSupported"},
		{"linux OS", PodOS(), mk(func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Linux} }), ""},
		{"os selector mismatch", PodOS(), mk(func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{v1.LabelOSStable: "windows"} }), "PodOSSelectorNodeLabelDoesNotMatch"},
		{"privileged disallowed", Privileged(false), mk(func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", SecurityContext: &v1.SecurityContext{Privileged: &priv}}}
		}), "Forbidden"},
		{"privileged allowed", Privileged(true), mk(func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &priv}
		}), ""},
		{"host network from a disallowed source", HostNamespaces(HostNamespaceSources{Network: []string{"file"}}), mk(func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Annotations[sourceAnnotation] = "api"
		}), "Forbidden"},
		{"host network from an allowed source", HostNamespaces(HostNamespaceSources{Network: []string{"file"}}), mk(func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Annotations[sourceAnnotation] = "file"
		}), ""},
		{"host PID, every source", HostNamespaces(HostNamespaceSources{PID: []string{"*"}}), mk(func(p *v1.Pod) { p.Spec.HostPID = true }), ""},
		{"host IPC, no source", HostNamespaces(HostNamespaceSources{}), mk(func(p *v1.Pod) { p.Spec.HostIPC = true }), "Forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.h.Admit(&Attributes{Pod: tt.pod})
			if (tt.reason == "") != r.Admit || r.Reason != tt.reason {
				t.Fatalf("result %+v, want reason %q", r, tt.reason)
			}
			if !r.Admit && r.Message == "" {
				t.Fatal("a refusal without a message")
			}
		})
	}
}

func TestPressureAdmission(t *testing.T) {
	under := map[v1.NodeConditionType]bool{}
	h := Pressure(func(c v1.NodeConditionType) bool { return under[c] })
	be := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "be", Annotations: map[string]string{sourceAnnotation: "api"}}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	burst := be.DeepCopy()
	burst.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
	static := be.DeepCopy()
	static.Annotations[sourceAnnotation] = "file"
	check := func(p *v1.Pod, admit bool) {
		t.Helper()
		if r := h.Admit(&Attributes{Pod: p}); r.Admit != admit || (!admit && r.Reason != "Evicted") {
			t.Fatalf("%s under %v: %+v, want admit %v", p.Name, under, r, admit)
		}
	}
	check(be, true)
	under[v1.NodeMemoryPressure] = true
	check(be, false)
	check(burst, true)
	under[v1.NodeDiskPressure] = true
	check(burst, false)
	check(static, true)
}
