package podsource

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestValidateVolumeMounts(t *testing.T) {
	mount := func(f func(m *v1.VolumeMount)) func(p *v1.Pod) {
		return func(p *v1.Pod) { f(&app(p).VolumeMounts[0]) }
	}
	runValidateCases(t, []validateCase{
		{name: "relative subPath", mutate: mount(func(m *v1.VolumeMount) { m.SubPath = "logs/app" })},
		{name: "subPath with dots that are not an element", mutate: mount(func(m *v1.VolumeMount) { m.SubPath = "a..b/..c" })},
		{
			name:   "subPath climbing out of the volume",
			mutate: mount(func(m *v1.VolumeMount) { m.SubPath = "../../etc" }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].volumeMounts[0].subPath"}},
		},
		{
			name:   "subPath with a .. element in the middle",
			mutate: mount(func(m *v1.VolumeMount) { m.SubPath = "a/../../b" }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].volumeMounts[0].subPath"}},
		},
		{
			name:   "absolute subPath",
			mutate: mount(func(m *v1.VolumeMount) { m.SubPath = "/etc" }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].volumeMounts[0].subPath"}},
		},
		{
			name:   "absolute subPath with a .. element reports both",
			mutate: mount(func(m *v1.VolumeMount) { m.SubPath = "/a/.." }),
			want: []fieldErr{
				{tInvalid, "spec.containers[0].volumeMounts[0].subPath"},
				{tInvalid, "spec.containers[0].volumeMounts[0].subPath"},
			},
		},
		{
			name:   "subPathExpr climbing out of the volume",
			mutate: mount(func(m *v1.VolumeMount) { m.SubPathExpr = "$(POD_NAME)/.." }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].volumeMounts[0].subPathExpr"}},
		},
		{
			name:   "subPath and subPathExpr together",
			mutate: mount(func(m *v1.VolumeMount) { m.SubPath, m.SubPathExpr = "a", "$(POD_NAME)" }),
			want:   []fieldErr{{tInvalid, "spec.containers[0].volumeMounts[0].subPathExpr"}},
		},
		{
			name:   "two mounts at one path",
			mutate: func(p *v1.Pod) { app(p).VolumeMounts[1].MountPath = "/data" },
			want:   []fieldErr{{tInvalid, "spec.containers[0].volumeMounts[1].mountPath"}},
		},
		{
			name:   "the same path in two containers is fine",
			mutate: func(p *v1.Pod) { sidecar(p).VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}} },
		},
		{
			name:   "unknown mount propagation",
			mutate: mount(func(m *v1.VolumeMount) { m.MountPropagation = ptr.To[v1.MountPropagationMode]("Shared") }),
			want:   []fieldErr{{tNotSupported, "spec.containers[0].volumeMounts[0].mountPropagation"}},
		},
		{
			name:   "HostToContainer propagation",
			mutate: mount(func(m *v1.VolumeMount) { m.MountPropagation = ptr.To(v1.MountPropagationHostToContainer) }),
		},
		{
			name:   "Bidirectional propagation in an unprivileged container",
			mutate: mount(func(m *v1.VolumeMount) { m.MountPropagation = ptr.To(v1.MountPropagationBidirectional) }),
			want:   []fieldErr{{tForbidden, "spec.containers[0].volumeMounts[0].mountPropagation"}},
		},
		{
			name: "Bidirectional propagation in a privileged container",
			mutate: func(p *v1.Pod) {
				app(p).SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
				app(p).VolumeMounts[0].MountPropagation = ptr.To(v1.MountPropagationBidirectional)
			},
		},
		{
			name:   "recursive read-only on a writable mount",
			mutate: mount(func(m *v1.VolumeMount) { m.RecursiveReadOnly = ptr.To(v1.RecursiveReadOnlyEnabled) }),
			want:   []fieldErr{{tForbidden, "spec.containers[0].volumeMounts[0].recursiveReadOnly"}},
		},
		{
			name: "subPath of an image volume (allowed since 1.33)",
			mutate: func(p *v1.Pod) {
				p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "example.com/d:1", PullPolicy: v1.PullIfNotPresent}}
				app(p).VolumeMounts[0].SubPath = "x"
			},
		},
		{
			name: "bind mount options on an image volume",
			mutate: func(p *v1.Pod) {
				p.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "example.com/d:1", PullPolicy: v1.PullIfNotPresent}}
				app(p).VolumeMounts[0].BindMountOptions = []string{string(v1.BindMountOptionNoExec)}
			},
			want: []fieldErr{{tInvalid, "spec.containers[0].volumeMounts[0].bindMountOptions"}},
		},
		{
			name:   "block device from a volume that is not a claim",
			mutate: func(p *v1.Pod) { sidecar(p).VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}} },
			want:   []fieldErr{{tInvalid, "spec.containers[1].volumeDevices[0].name"}},
		},
	})
}

// The messages are the API server's, so operators find them documented.
func TestValidateSubPathMessages(t *testing.T) {
	tests := []struct {
		subPath string
		want    string
	}{
		{"../x", "must not contain '..'"},
		{"/x", "must be a relative path"},
	}
	for _, tt := range tests {
		t.Run(tt.subPath, func(t *testing.T) {
			p := validPod.DeepCopy()
			app(p).VolumeMounts[0].SubPath = tt.subPath
			errs := Validate(p)
			if len(errs) != 1 || errs[0].Detail != tt.want || errs[0].BadValue != tt.subPath {
				t.Errorf("Validate = %v, want one error %q about %q", errs, tt.want, tt.subPath)
			}
			if want := "spec.containers[0].volumeMounts[0].subPath: Invalid value: \"" + tt.subPath + "\": " + tt.want; errs[0].Error() != want {
				t.Errorf("error = %q, want %q", errs[0].Error(), want)
			}
		})
	}
}

func TestValidateVolumes(t *testing.T) {
	vol := func(i int, src v1.VolumeSource) func(p *v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Volumes[i].VolumeSource = src }
	}
	addVol := func(src v1.VolumeSource) func(p *v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "extra", VolumeSource: src}) }
	}
	runValidateCases(t, []validateCase{
		{
			name: "two sources in one volume",
			mutate: func(p *v1.Pod) {
				p.Spec.Volumes[0].HostPath = &v1.HostPathVolumeSource{Path: "/srv", Type: ptr.To(v1.HostPathUnset)}
			},
			want: []fieldErr{{tForbidden, "spec.volumes[0].hostPath"}},
		},
		{
			name:   "no source",
			mutate: vol(0, v1.VolumeSource{}),
			want:   []fieldErr{{tRequired, "spec.volumes[0]"}},
		},
		{
			name: "volume name that is not a DNS label",
			mutate: func(p *v1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "Bad_Vol", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
			},
			want: []fieldErr{{tInvalid, "spec.volumes[2].name"}},
		},
		{
			name:   "hostPath climbing up",
			mutate: func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Path = "/var/lib/../../etc" },
			want:   []fieldErr{{tInvalid, "spec.volumes[1].hostPath.path"}},
		},
		{
			name:   "hostPath type",
			mutate: func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Type = ptr.To(v1.HostPathType("Dir")) },
			want:   []fieldErr{{tNotSupported, "spec.volumes[1].hostPath.type"}},
		},
		{
			name:   "hostPath socket type",
			mutate: func(p *v1.Pod) { p.Spec.Volumes[1].HostPath.Type = ptr.To(v1.HostPathSocket) },
		},
		{
			name:   "negative emptyDir size limit",
			mutate: vol(0, v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("-1Gi"))}}),
			want:   []fieldErr{{tForbidden, "spec.volumes[0].emptyDir.sizeLimit"}},
		},
		{
			name:   "emptyDir in memory with a size limit",
			mutate: vol(0, v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("64Mi"))}}),
		},
		{
			name:   "unknown emptyDir medium",
			mutate: vol(0, v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: "memory"}}),
			want:   []fieldErr{{tNotSupported, "spec.volumes[0].emptyDir.medium"}},
		},
		{
			name:   "secret without a name",
			mutate: addVol(v1.VolumeSource{Secret: &v1.SecretVolumeSource{DefaultMode: ptr.To[int32](0o644)}}),
			want:   []fieldErr{{tRequired, "spec.volumes[2].secret.secretName"}},
		},
		{
			name: "configMap mode above 0777",
			mutate: addVol(v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "c"}, DefaultMode: ptr.To[int32](0o1777)}}),
			want: []fieldErr{{tInvalid, "spec.volumes[2].configMap.defaultMode"}},
		},
		{
			name: "configMap item escaping the volume",
			mutate: addVol(v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "c"}, DefaultMode: ptr.To[int32](0o644),
				Items: []v1.KeyToPath{{Key: "k", Path: "../k"}}}}),
			want: []fieldErr{{tInvalid, "spec.volumes[2].configMap.items[0].path"}},
		},
		{
			name: "downwardAPI item reading an unknown field",
			mutate: addVol(v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: ptr.To[int32](0o644),
				Items: []v1.DownwardAPIVolumeFile{{Path: "x", FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nodeName"}}}}}),
			want: []fieldErr{{tNotSupported, "spec.volumes[2].downwardAPI.items[0].fieldRef.fieldPath"}},
		},
		{
			name: "projected sources sharing a path",
			mutate: addVol(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []v1.VolumeProjection{
				{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "a"}, Items: []v1.KeyToPath{{Key: "k", Path: "f"}}}},
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "b"}, Items: []v1.KeyToPath{{Key: "k", Path: "f"}}}},
			}}}),
			want: []fieldErr{{tInvalid, "spec.volumes[2].projected"}},
		},
		{
			name:   "persistentVolumeClaim without a claim name",
			mutate: addVol(v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}),
			want:   []fieldErr{{tRequired, "spec.volumes[2].persistentVolumeClaim.claimName"}},
		},
	})
}
