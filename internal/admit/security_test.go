package admit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAppArmorHost(t *testing.T) {
	tests := []struct {
		name    string
		fs      map[string]string // path under sysfs → content ("" = directory)
		enabled bool
	}{
		{name: "enabled", fs: map[string]string{"kernel/security/apparmor": "", "module/apparmor/parameters/enabled": "Y\n"}, enabled: true},
		{name: "module says N", fs: map[string]string{"kernel/security/apparmor": "", "module/apparmor/parameters/enabled": "N\n"}},
		{name: "no securityfs entry", fs: map[string]string{"module/apparmor/parameters/enabled": "Y\n"}},
		{name: "no module", fs: map[string]string{"kernel/security/apparmor": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, content := range tt.fs {
				full := filepath.Join(root, p)
				if content == "" {
					if err := os.MkdirAll(full, 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := AppArmorHost(root); (err == nil) != tt.enabled {
				t.Errorf("AppArmorHost() = %v, want enabled %v", err, tt.enabled)
			}
		})
	}
}

func appArmor(typ v1.AppArmorProfileType, name string) *v1.AppArmorProfile {
	ap := &v1.AppArmorProfile{Type: typ}
	if name != "" {
		ap.LocalhostProfile = &name
	}
	return ap
}

func TestAppArmorAdmit(t *testing.T) {
	disabled := errors.New("AppArmor is not enabled on the host")
	tests := []struct {
		name    string
		host    error
		pod     func(p *v1.Pod)
		wantMsg string // "" = admitted
	}{
		{name: "no profile, disabled host", host: disabled, pod: func(*v1.Pod) {}},
		{
			name: "pod Unconfined, disabled host", host: disabled,
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: appArmor(v1.AppArmorProfileTypeUnconfined, "")}
			},
		},
		{
			name: "pod RuntimeDefault, disabled host", host: disabled,
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: appArmor(v1.AppArmorProfileTypeRuntimeDefault, "")}
			},
			wantMsg: "Cannot enforce AppArmor: AppArmor is not enabled on the host",
		},
		{
			name: "init container Localhost, disabled host", host: disabled,
			pod: func(p *v1.Pod) {
				p.Spec.InitContainers = []v1.Container{{Name: "init", SecurityContext: &v1.SecurityContext{AppArmorProfile: appArmor(v1.AppArmorProfileTypeLocalhost, "x")}}}
			},
			wantMsg: "Cannot enforce AppArmor: AppArmor is not enabled on the host",
		},
		{
			name: "deprecated annotation, disabled host", host: disabled,
			pod: func(p *v1.Pod) {
				p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/app": "runtime/default"}
			},
			wantMsg: "Cannot enforce AppArmor",
		},
		{
			name: "deprecated annotation unconfined, disabled host", host: disabled,
			pod: func(p *v1.Pod) {
				p.Annotations = map[string]string{"container.apparmor.security.beta.kubernetes.io/app": "unconfined"}
			},
		},
		{
			name: "RuntimeDefault, enabled host",
			pod: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: appArmor(v1.AppArmorProfileTypeRuntimeDefault, "")}
			},
		},
		{
			name: "Localhost without a name, enabled host",
			pod: func(p *v1.Pod) {
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: appArmor(v1.AppArmorProfileTypeLocalhost, " ")}
			},
			wantMsg: "invalid empty AppArmor profile name",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podWith(tt.pod)
			r := AppArmor(tt.host).Admit(&Attributes{Pod: p})
			if tt.wantMsg == "" {
				if !r.Admit {
					t.Fatalf("Admit() = %+v, want admitted", r)
				}
				return
			}
			if r.Admit || r.Reason != "AppArmor" || !strings.Contains(r.Message, tt.wantMsg) {
				t.Errorf("Admit() = %+v, want refused with reason AppArmor and %q", r, tt.wantMsg)
			}
		})
	}
}

func TestUserNamespacesAdmit(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name      string
		runtime   error
		hostUsers *bool
		wantMsg   string // "" = admitted
	}{
		{name: "hostUsers unset", runtime: errors.New("unsupported")},
		{name: "hostUsers true", runtime: errors.New("unsupported"), hostUsers: &yes},
		{name: "hostUsers false, runtime unsupported", runtime: errors.New("the runtime says no"), hostUsers: &no, wantMsg: "the runtime says no"},
		{name: "hostUsers false, runtime supports them", hostUsers: &no, wantMsg: "does not allocate user namespace ID ranges"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podWith(func(p *v1.Pod) { p.Spec.HostUsers = tt.hostUsers })
			r := UserNamespaces(tt.runtime).Admit(&Attributes{Pod: p})
			if tt.wantMsg == "" {
				if !r.Admit {
					t.Fatalf("Admit() = %+v, want admitted", r)
				}
				return
			}
			if r.Admit || r.Reason != "UserNamespacesNotSupported" || !strings.Contains(r.Message, "hostUsers: false") || !strings.Contains(r.Message, tt.wantMsg) {
				t.Errorf("Admit() = %+v, want refused (UserNamespacesNotSupported) with %q", r, tt.wantMsg)
			}
		})
	}
}

func TestSupplementalGroupsPolicyAdmit(t *testing.T) {
	strict, merge := v1.SupplementalGroupsPolicyStrict, v1.SupplementalGroupsPolicyMerge
	tests := []struct {
		name    string
		policy  *v1.SupplementalGroupsPolicy
		runtime bool
		err     error
		refused bool
	}{
		{name: "unset, unsupported"},
		{name: "Merge, unsupported", policy: &merge},
		{name: "Strict, supported", policy: &strict, runtime: true},
		{name: "Strict, unsupported", policy: &strict, refused: true},
		{name: "Strict, runtime unreadable", policy: &strict, runtime: true, err: errors.New("unavailable"), refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := podWith(func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: tt.policy} })
			r := SupplementalGroupsPolicy(func() (bool, error) { return tt.runtime, tt.err }).Admit(&Attributes{Pod: p})
			if !tt.refused {
				if !r.Admit {
					t.Fatalf("Admit() = %+v, want admitted", r)
				}
				return
			}
			if r.Admit || r.Reason != "SupplementalGroupsPolicyNotSupported" || r.Message != "SupplementalGroupsPolicy=Strict is not supported in this node" {
				t.Errorf("Admit() = %+v, want the kubelet's SupplementalGroupsPolicyNotSupported", r)
			}
		})
	}
}
