package cri_test

import (
	"encoding/base64"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
)

var _ cri.Objects = (*critest.Objects)(nil)

// apiHarness is a harness whose runtime reads API objects from a fake.
type apiHarness struct {
	*harness
	objs *critest.Objects
}

func newAPIHarness(t *testing.T) *apiHarness {
	t.Helper()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &harness{t: t, fake: critest.New(clk), clock: clk, logs: t.TempDir(), root: volumeRoot(t)}
	objs := critest.NewObjects(clk)
	rt, err := cri.New(cri.Config{
		Client:     h.fake,
		Logger:     zaptest.NewLogger(t),
		Clock:      clk,
		RootDir:    h.root,
		PodLogsDir: h.logs,
		NodeName:   "node1",
		NodeIP:     "192.168.1.10",
		Objects:    objs,
	})
	if err != nil {
		t.Fatalf("cri.New() error = %v", err)
	}
	h.rt = rt
	return &apiHarness{harness: h, objs: objs}
}

// apiPod is webPod with a plain environment and no volumes; tests add
// what they exercise.
func apiPod() *v1.Pod {
	p := webPod.DeepCopy()
	p.Spec.Containers[0].Env = nil
	p.Spec.ServiceAccountName = "app-sa"
	return p
}

// volumeDir is where a rendered volume of webPod lives.
func (h *harness) volumeDir(plugin, name string) string {
	return filepath.Join(h.root, "pods", "uid-1", "volumes", plugin, name)
}

// files lists a rendered volume as a container sees it: path → "mode
// content", through the user-visible symlinks.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir(%s) error = %v", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		root, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("EvalSymlinks() error = %v", err)
		}
		err = filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[filepath.ToSlash(filepath.Join(e.Name(), rel))] = info.Mode().Perm().String() + " " + string(data)
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	return out
}

// created returns the config of the newest CreateContainer call for name.
func created(t *testing.T, calls []critest.Call, name string) *runtimeapi.ContainerConfig {
	t.Helper()
	reqs := only[*runtimeapi.CreateContainerRequest](calls, "CreateContainer")
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Config.Metadata.Name == name {
			return reqs[i].Config
		}
	}
	t.Fatalf("no CreateContainer for %q in %v", name, calls)
	return nil
}

func envOf(cfg *runtimeapi.ContainerConfig) []string {
	var env []string
	for _, kv := range cfg.Envs {
		env = append(env, kv.Key+"="+string(kv.Value))
	}
	return env
}

func mountAt(cfg *runtimeapi.ContainerConfig, path string) *runtimeapi.Mount {
	for _, m := range cfg.Mounts {
		if m.ContainerPath == path {
			return m
		}
	}
	return nil
}

func TestConfigMapVolume(t *testing.T) {
	h := newAPIHarness(t)
	h.objs.SetConfigMap(&v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg"},
		Data:       map[string]string{"a": "alpha", "b": "beta"},
		BinaryData: map[string][]byte{"bin": {0, 1, 2}},
	})
	p := apiPod()
	p.Spec.Volumes = []v1.Volume{
		{Name: "all", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "picked", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"},
			DefaultMode:          ptr.To[int32](0o440),
			Items: []v1.KeyToPath{
				{Key: "a", Path: "conf/a.txt", Mode: ptr.To[int32](0o600)},
				{Key: "bin", Path: "bin.dat"},
			},
		}}},
		{Name: "missing", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: ptr.To(true)}}},
		{Name: "missing-key", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Optional: ptr.To(true),
			Items: []v1.KeyToPath{{Key: "a", Path: "a"}, {Key: "zzz", Path: "zzz"}}}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{
		{Name: "all", MountPath: "/etc/all"},
		{Name: "picked", MountPath: "/etc/picked"},
		{Name: "missing", MountPath: "/etc/missing"},
		{Name: "missing-key", MountPath: "/etc/missing-key"},
	}
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() = %+v, want the container started", res)
	}
	want := map[string]map[string]string{
		"all":         {"a": "-rw-r--r-- alpha", "b": "-rw-r--r-- beta", "bin": "-rw-r--r-- \x00\x01\x02"},
		"picked":      {"conf/a.txt": "-rw------- alpha", "bin.dat": "-r--r----- \x00\x01\x02"},
		"missing":     {},
		"missing-key": {"a": "-rw-r--r-- alpha"},
	}
	cfg := created(t, h.fake.Calls(), "app")
	for name, wantFiles := range want {
		dir := h.volumeDir("kubernetes.io~configmap", name)
		if diff := cmp.Diff(wantFiles, files(t, dir)); diff != "" {
			t.Errorf("volume %s (-want +got):\n%s", name, diff)
		}
		m := mountAt(cfg, "/etc/"+name)
		if m == nil || m.HostPath != dir || !m.Readonly {
			t.Errorf("mount of %s = %v, want %s read-only", name, m, dir)
		}
	}
}

func TestConfigMapVolumeMissingThenCreated(t *testing.T) {
	h := newAPIHarness(t)
	p := apiPod()
	p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/app"}}

	// Missing: a config error on every sync, never a CrashLoopBackOff, and
	// no container is created.
	for i := range 3 {
		res := h.sync(p)
		w := res.Waiting["app"]
		if w.Reason != cri.ReasonCreateContainerConfigError || w.Message != `volume "cfg": configmap "app-config" not found` {
			t.Fatalf("sync %d: Waiting[app] = %+v, want CreateContainerConfigError `configmap \"app-config\" not found`", i, w)
		}
		if res.RetryAfter <= 0 || res.RetryAfter > 10*time.Second {
			t.Errorf("sync %d: RetryAfter = %v, want a retry within 10s", i, res.RetryAfter)
		}
		if slices.Contains(h.fake.Methods(), "CreateContainer") {
			t.Fatalf("sync %d: CreateContainer called with a config error: %v", i, h.fake.Methods())
		}
		h.clock.Step(10 * time.Second)
	}

	// The object appears: the next sync starts the container.
	h.objs.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-config"},
		Data: map[string]string{"app.conf": "v1"}})
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() after the ConfigMap appeared = %+v, want the container started", res)
	}
	if got := h.fake.Methods(); !slices.Contains(got, "StartContainer") {
		t.Fatalf("CRI calls %v, want the container started", got)
	}
	dir := h.volumeDir("kubernetes.io~configmap", "cfg")
	if diff := cmp.Diff(map[string]string{"app.conf": "-rw-r--r-- v1"}, files(t, dir)); diff != "" {
		t.Errorf("volume (-want +got):\n%s", diff)
	}

	// An edit reaches the running container's file on the next sync,
	// without restarting it; an unchanged object writes nothing.
	h.objs.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-config"},
		Data: map[string]string{"app.conf": "v2", "extra": "x"}})
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() after the edit = %+v", res)
	}
	if got := h.fake.Methods(); slices.Contains(got, "CreateContainer") {
		t.Errorf("CRI calls %v after a ConfigMap edit, want the container left running", got)
	}
	if diff := cmp.Diff(map[string]string{"app.conf": "-rw-r--r-- v2", "extra": "-rw-r--r-- x"}, files(t, dir)); diff != "" {
		t.Errorf("volume after the edit (-want +got):\n%s", diff)
	}
	before, _ := os.Readlink(filepath.Join(dir, "..data"))
	h.sync(p)
	if after, _ := os.Readlink(filepath.Join(dir, "..data")); after != before {
		t.Errorf("unchanged ConfigMap rewrote the volume: ..data %s -> %s", before, after)
	}
}

func TestSecretVolumeAndOptional(t *testing.T) {
	h := newAPIHarness(t)
	h.objs.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tls"},
		Data: map[string][]byte{"tls.crt": []byte("CERT"), "tls.key": []byte("KEY")}})
	p := apiPod()
	p.Spec.Volumes = []v1.Volume{
		{Name: "tls", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "tls",
			Items: []v1.KeyToPath{{Key: "tls.key", Path: "key.pem", Mode: ptr.To[int32](0o400)}}}}},
		{Name: "opt", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "none", Optional: ptr.To(true)}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "tls", MountPath: "/tls"}, {Name: "opt", MountPath: "/opt"}}
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() = %+v, want the container started", res)
	}
	if diff := cmp.Diff(map[string]string{"key.pem": "-r-------- KEY"}, files(t, h.volumeDir("kubernetes.io~secret", "tls"))); diff != "" {
		t.Errorf("secret volume (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{}, files(t, h.volumeDir("kubernetes.io~secret", "opt"))); diff != "" {
		t.Errorf("optional missing secret volume (-want +got):\n%s", diff)
	}

	// A required key that is missing.
	p2 := apiPod()
	p2.Spec.Volumes = []v1.Volume{{Name: "tls", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "tls",
		Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}}}
	p2.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "tls", MountPath: "/tls"}}
	h2 := newAPIHarness(t)
	h2.objs.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tls"}, Data: map[string][]byte{"tls.crt": nil}})
	res := h2.sync(p2)
	if w := res.Waiting["app"]; w.Reason != cri.ReasonCreateContainerConfigError || w.Message != `volume "tls": references non-existent secret key: ca.crt` {
		t.Errorf("Waiting[app] = %+v, want the kubelet's non-existent key error", w)
	}
}

func TestEnvFromAPIObjects(t *testing.T) {
	h := newAPIHarness(t)
	h.objs.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "app-config"},
		Data: map[string]string{"LOG_LEVEL": "debug", "PORT": "80"}})
	h.objs.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Data: map[string][]byte{"USER": []byte("u"), "PASS": []byte("p")}})
	p := apiPod()
	c := &p.Spec.Containers[0]
	c.EnvFrom = []v1.EnvFromSource{
		{Prefix: "CFG_", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}},
		{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "db"}}},
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: ptr.To(true)}},
	}
	c.Env = []v1.EnvVar{
		{Name: "CFG_PORT", Value: "8080"},
		{Name: "DSN", Value: "$(USER):$(PASS)@db:$(CFG_PORT)"},
		{Name: "LEVEL", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}, Key: "LOG_LEVEL"}}},
		{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "PASS"}}},
		{Name: "OPTIONAL", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "db"}, Key: "nope", Optional: ptr.To(true)}}},
	}
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() = %+v, want the container started", res)
	}
	want := []string{
		"CFG_LOG_LEVEL=debug", "CFG_PORT=8080", "PASS=p", "USER=u",
		"DSN=u:p@db:8080", "LEVEL=debug", "PASSWORD=p",
	}
	if diff := cmp.Diff(want, envOf(created(t, h.fake.Calls(), "app"))); diff != "" {
		t.Errorf("container env (-want +got):\n%s", diff)
	}
}

func TestEnvAPIObjectErrors(t *testing.T) {
	secretKey := func(name, key string) v1.EnvVar {
		return v1.EnvVar{Name: "X", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key}}}
	}
	tests := []struct {
		name    string
		env     []v1.EnvVar
		envFrom []v1.EnvFromSource
		want    string
	}{
		{name: "secret key missing", env: []v1.EnvVar{secretKey("db", "password")},
			want: "couldn't find key password in Secret default/db"},
		{name: "secret missing", env: []v1.EnvVar{secretKey("nope", "k")}, want: `secret "nope" not found`},
		{name: "configMap key missing", env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "k"}}}},
			want: "couldn't find key k in ConfigMap default/cm"},
		{name: "envFrom configMap missing", envFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "gone"}}}},
			want: `configmap "gone" not found`},
		{name: "optional envFrom does not excuse a required ref", envFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Optional: ptr.To(true)}}},
			env:  []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "gone"}, Key: "k"}}}},
			want: `configmap "gone" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAPIHarness(t)
			h.objs.SetSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}, Data: map[string][]byte{"user": []byte("u")}})
			h.objs.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}})
			p := apiPod()
			p.Spec.Containers[0].Env, p.Spec.Containers[0].EnvFrom = tt.env, tt.envFrom
			res := h.sync(p)
			if w := res.Waiting["app"]; w.Reason != cri.ReasonCreateContainerConfigError || w.Message != tt.want {
				t.Errorf("Waiting[app] = %+v, want CreateContainerConfigError %q", w, tt.want)
			}
		})
	}
}

func TestServiceEnv(t *testing.T) {
	master := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	tests := []struct {
		name  string
		links *bool
		want  []string
	}{
		{
			name:  "service links off: only the kubernetes service",
			links: ptr.To(false),
			want: []string{"API=https://10.96.0.1:443", "WEB_SERVICE_PORT=9999",
				"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"},
		},
		{
			name: "service links default on: the namespace's services too",
			want: []string{"API=https://10.96.0.1:443", "WEB_SERVICE_PORT=9999",
				"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "WEB_SERVICE_HOST=10.96.0.5"},
		},
		{
			name:  "service links on",
			links: ptr.To(true),
			want: []string{"API=https://10.96.0.1:443", "WEB_SERVICE_PORT=9999",
				"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "WEB_SERVICE_HOST=10.96.0.5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newAPIHarness(t)
			h.objs.SetMasterEnv(master)
			h.objs.SetServiceEnv("default", map[string]string{"WEB_SERVICE_HOST": "10.96.0.5", "WEB_SERVICE_PORT": "80"})
			h.objs.SetServiceEnv("other", map[string]string{"DB_SERVICE_HOST": "10.96.0.9"})
			p := apiPod()
			p.Spec.EnableServiceLinks = tt.links
			p.Spec.Containers[0].Env = []v1.EnvVar{
				{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
				{Name: "WEB_SERVICE_PORT", Value: "9999"}, // the container's own value wins
			}
			if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
				t.Fatalf("SyncPod() = %+v", res)
			}
			if diff := cmp.Diff(tt.want, envOf(created(t, h.fake.Calls(), "app"))); diff != "" {
				t.Errorf("container env (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceEnvError(t *testing.T) {
	h := newAPIHarness(t)
	h.objs.SetError("ServiceEnv", errors.New("services not synced yet"))
	res := h.sync(apiPod())
	if w := res.Waiting["app"]; w.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(w.Message, "services not synced yet") {
		t.Errorf("Waiting[app] = %+v, want CreateContainerConfigError about services", w)
	}
}

// tokenPod has a projected volume with two service account tokens, a
// ConfigMap and downward API fields, as kube-api-access-* volumes do.
func tokenPod() *v1.Pod {
	p := apiPod()
	p.Spec.Volumes = []v1.Volume{{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: ptr.To[int32](0o440),
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}},
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "vault/token", Audience: "vault", ExpirationSeconds: ptr.To[int64](600)}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"},
				Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	return p
}

func TestProjectedTokenRefresh(t *testing.T) {
	h := newAPIHarness(t)
	h.objs.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kube-root-ca.crt"},
		Data: map[string]string{"ca.crt": "CA"}})
	p := tokenPod()
	dir := h.volumeDir("kubernetes.io~projected", "kube-api-access")
	check := func(step string, want map[string]string, requests int) {
		t.Helper()
		if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
			t.Fatalf("%s: SyncPod() = %+v", step, res)
		}
		if diff := cmp.Diff(want, files(t, dir)); diff != "" {
			t.Errorf("%s: volume (-want +got):\n%s", step, diff)
		}
		if got := len(h.objs.TokenRequests()); got != requests {
			t.Errorf("%s: %d token requests, want %d", step, got, requests)
		}
	}
	vol := func(api, vault string) map[string]string {
		return map[string]string{
			"token": "-r--r----- " + api, "vault/token": "-r--r----- " + vault,
			"ca.crt": "-r--r----- CA", "namespace": "-r--r----- default",
		}
	}
	check("first sync", vol("token-1-uid-1-", "token-2-uid-1-vault"), 2)
	wantReqs := []critest.TokenRequest{
		{Namespace: "default", Pod: "web-node1", ServiceAccount: "app-sa", UID: "uid-1", Audience: "", ExpirationSeconds: 3600},
		{Namespace: "default", Pod: "web-node1", ServiceAccount: "app-sa", UID: "uid-1", Audience: "vault", ExpirationSeconds: 600},
	}
	if diff := cmp.Diff(wantReqs, h.objs.TokenRequests()); diff != "" {
		t.Errorf("token requests (-want +got):\n%s", diff)
	}

	h.clock.Step(7 * time.Minute) // < 80% of 600s
	check("before 80% of the short token's life", vol("token-1-uid-1-", "token-2-uid-1-vault"), 2)
	h.clock.Step(2 * time.Minute) // 9m > 8m: the vault token is renewed, not the 1h one
	check("after 80% of the short token's life", vol("token-1-uid-1-", "token-3-uid-1-vault"), 3)
	h.clock.Step(39 * time.Minute) // 48m: 80% of an hour
	check("after 80% of the long token's life", vol("token-4-uid-1-", "token-5-uid-1-vault"), 5)

	// A failed refresh keeps the cached token while it is valid.
	h.objs.SetError("ServiceAccountToken", errors.New("apiserver down"))
	h.clock.Step(9 * time.Minute) // 57m: the vault token is due (56m), valid until 58m
	calls := len(h.objs.Calls())
	check("refresh failing", vol("token-4-uid-1-", "token-5-uid-1-vault"), 5)
	if !slices.Contains(h.objs.Calls()[calls:], "ServiceAccountToken default/web-node1") {
		t.Errorf("no token refresh attempted: %v", h.objs.Calls()[calls:])
	}

	// A new container start with no valid token left fails the start.
	h.clock.Step(2 * time.Minute) // vault token expired
	if err := h.fake.ExitContainer(h.latest("app").ID, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	res := h.sync(p)
	if w := res.Waiting["app"]; w.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(w.Message, "apiserver down") {
		t.Errorf("Waiting[app] = %+v, want a config error about the token", w)
	}
}

func TestStandaloneVolumes(t *testing.T) {
	tests := []struct {
		name    string
		source  v1.VolumeSource
		wantErr string
	}{
		{name: "configMap", source: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "x"}}},
			wantErr: `volume "v": configMap volumes need an API server: nodeagent runs standalone (no --kubeconfig)`},
		{name: "secret", source: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}},
			wantErr: `volume "v": secret volumes need an API server: nodeagent runs standalone (no --kubeconfig)`},
		{name: "projected token", source: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}},
			wantErr: `volume "v": projected volumes with sources other than downwardAPI need an API server`},
		{name: "nfs", source: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}},
			wantErr: `volume "v": volume type not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			p := apiPod()
			p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: tt.source}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v"}}
			res := h.sync(p)
			if w := res.Waiting["app"]; w.Reason != cri.ReasonCreateContainerConfigError || !strings.HasPrefix(w.Message, tt.wantErr) {
				t.Errorf("Waiting[app] = %+v, want CreateContainerConfigError %q", w, tt.wantErr)
			}
		})
	}
}

// A claim that cannot be mounted (here: no API server) keeps the
// container ContainerCreating with the kubelet's FailedMount event.
func TestClaimNotReadyWaitsInContainerCreating(t *testing.T) {
	h, ev := newImageHarness(t, cri.Config{})
	p := apiPod()
	p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v"}}
	res := h.sync(p)
	if w := res.Waiting["app"]; w.Reason != "ContainerCreating" {
		t.Errorf("Waiting[app] = %+v, want ContainerCreating", w)
	}
	found := false
	for _, e := range ev.list() {
		found = found || strings.HasPrefix(e, `FailedMount: MountVolume.SetUp failed for volume "v" : error processing PVC default/x`)
	}
	if !found {
		t.Errorf("no FailedMount event: %q", ev.list())
	}
}

func TestDownwardAPIVolumeStandalone(t *testing.T) {
	h := newHarness(t)
	p := apiPod()
	p.Labels = map[string]string{"app": "web", "tier": "front"}
	p.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
	}
	items := []v1.DownwardAPIVolumeFile{
		{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		{Path: "uid", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}},
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}, Mode: ptr.To[int32](0o600)},
		{Path: "limits/cpu_millis", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu", Divisor: resource.MustParse("1m")}},
		{Path: "limits/cpu", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu"}},
		{Path: "limits/mem_mi", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
		{Path: "requests/cpu_millis", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "requests.cpu", Divisor: resource.MustParse("1m")}},
	}
	p.Spec.Volumes = []v1.Volume{
		{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}},
		{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{DownwardAPI: &v1.DownwardAPIProjection{Items: items[:1]}}}}}},
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "info", MountPath: "/info"}, {Name: "proj", MountPath: "/proj"}}
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() = %+v, want the container started", res)
	}
	want := map[string]string{
		"name":                "-rw-r--r-- web-node1",
		"uid":                 "-rw-r--r-- uid-1",
		"labels":              "-rw------- app=\"web\"\ntier=\"front\"",
		"limits/cpu_millis":   "-rw-r--r-- 500",
		"limits/cpu":          "-rw-r--r-- 1",
		"limits/mem_mi":       "-rw-r--r-- 64",
		"requests/cpu_millis": "-rw-r--r-- 250",
	}
	if diff := cmp.Diff(want, files(t, h.volumeDir("kubernetes.io~downward-api", "info"))); diff != "" {
		t.Errorf("downwardAPI volume (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"name": "-rw-r--r-- web-node1"}, files(t, h.volumeDir("kubernetes.io~projected", "proj"))); diff != "" {
		t.Errorf("projected downwardAPI volume (-want +got):\n%s", diff)
	}

	// New labels reach the running container.
	p.Labels["tier"] = "back"
	h.sync(p)
	if got := files(t, h.volumeDir("kubernetes.io~downward-api", "info"))["labels"]; got != "-rw------- app=\"web\"\ntier=\"back\"" {
		t.Errorf("labels after the change = %q", got)
	}
}

func TestUnsupportedProjections(t *testing.T) {
	h := newAPIHarness(t)
	p := apiPod()
	p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("b"), Path: "b"}},
		{PodCertificate: &v1.PodCertificateProjection{SignerName: "s", KeyType: "ED25519"}},
	}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "v", MountPath: "/v"}}
	res := h.sync(p)
	w := res.Waiting["app"]
	if w.Reason != cri.ReasonCreateContainerConfigError || !strings.Contains(w.Message, "clusterTrustBundle projections are not supported") ||
		!strings.Contains(w.Message, "podCertificate projections are not supported") {
		t.Errorf("Waiting[app] = %+v, want both unsupported projections reported", w)
	}
}

// dockerConfigJSON is a kubernetes.io/dockerconfigjson secret.
func dockerConfigJSON(name, body string) *v1.Secret {
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(body)},
	}
}

func TestImagePullSecrets(t *testing.T) {
	h := newAPIHarness(t)
	alice := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	h.objs.SetSecret(dockerConfigJSON("regcred", `{"auths":{"https://registry.example.com:5000/v1/":{"auth":"`+alice+`"}}}`))
	h.objs.SetSecret(&v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "legacy"},
		Type:       v1.SecretTypeDockercfg,
		Data:       map[string][]byte{v1.DockerConfigKey: []byte(`{"quay.io":{"username":"bob","password":"pw"}}`)},
	})
	h.objs.SetSecret(dockerConfigJSON("hub", `{"auths":{"https://index.docker.io/v1/":{"identitytoken":"hub-token"}}}`))
	quayImage := "quay.io/org/tool@sha256:" + strings.Repeat("0123456789abcdef", 4)
	p := apiPod()
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}, {Name: "missing"}, {Name: "legacy"}, {Name: "hub"}}
	p.Spec.Containers = []v1.Container{
		{Name: "private", Image: "registry.example.com:5000/team/app:1.0", ImagePullPolicy: v1.PullAlways},
		{Name: "quay", Image: quayImage, ImagePullPolicy: v1.PullAlways},
		{Name: "hub", Image: "nginx:1.27", ImagePullPolicy: v1.PullAlways},
		{Name: "elsewhere", Image: "ghcr.io/someone/thing:v1", ImagePullPolicy: v1.PullAlways},
		{Name: "other-port", Image: "registry.example.com/team/app:1.0", ImagePullPolicy: v1.PullAlways},
	}
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() = %+v, want every container started", res)
	}
	got := map[string]*runtimeapi.AuthConfig{}
	for _, req := range only[*runtimeapi.PullImageRequest](h.fake.Calls(), "PullImage") {
		got[req.Image.Image] = req.Auth
	}
	want := map[string]*runtimeapi.AuthConfig{
		"registry.example.com:5000/team/app:1.0": {Username: "alice", Password: "s3cret"},
		quayImage:                                {Username: "bob", Password: "pw"},
		"nginx:1.27":                             {IdentityToken: "hub-token"},
		"ghcr.io/someone/thing:v1":               nil,
		"registry.example.com/team/app:1.0":      nil,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(runtimeapi.AuthConfig{})); diff != "" {
		t.Errorf("PullImage auth by image (-want +got):\n%s", diff)
	}
}

func TestImagePullSecretsTriedInTurn(t *testing.T) {
	h := newAPIHarness(t)
	h.objs.SetSecret(dockerConfigJSON("a", `{"auths":{"registry.example.com":{"username":"host","password":"1"}}}`))
	h.objs.SetSecret(dockerConfigJSON("b", `{"auths":{"registry.example.com/team":{"username":"team","password":"2"}}}`))
	h.fake.SetError("PullImage", errors.New("unauthorized"))
	p := apiPod()
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "a"}, {Name: "b"}}
	p.Spec.Containers[0].Image = "registry.example.com/team/app:1"
	res := h.sync(p)
	var users []string
	for _, req := range only[*runtimeapi.PullImageRequest](h.fake.Calls(), "PullImage") {
		users = append(users, req.Auth.GetUsername())
	}
	// The more specific path first; no anonymous attempt after them.
	if diff := cmp.Diff([]string{"team", "host"}, users); diff != "" {
		t.Errorf("PullImage attempts by user (-want +got):\n%s", diff)
	}
	if w := res.Waiting["app"]; w.Reason != cri.ReasonErrImagePull || !strings.Contains(w.Message, "unauthorized") {
		t.Errorf("Waiting[app] = %+v, want ErrImagePull", w)
	}
}

func TestImagePullSecretsStandalone(t *testing.T) {
	h := newHarness(t)
	p := apiPod()
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() = %+v, want the pull to go ahead without the secret", res)
	}
	if reqs := only[*runtimeapi.PullImageRequest](h.fake.Calls(), "PullImage"); len(reqs) != 1 || reqs[0].Auth != nil {
		t.Errorf("PullImage requests = %v, want one anonymous pull", reqs)
	}
}

// A container restarted while the API server does not answer gets its
// volume's last content; a missing object (an answer) stays an error.
func TestVolumeKeepsItsLastContentWhileTheAPIServerIsAway(t *testing.T) {
	h := newAPIHarness(t)
	h.objs.SetConfigMap(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cfg"}, Data: map[string]string{"a": "alpha"}})
	p := apiPod()
	p.Spec.RestartPolicy = v1.RestartPolicyAlways
	p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}}
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("first sync: %+v", res)
	}
	h.objs.SetError("ConfigMap", &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/namespaces/default/configmaps/cfg", Err: errors.New("connection refused")})
	cs := h.fake.Containers()
	if err := h.fake.ExitContainer(cs[0].ID, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	if res := h.sync(p); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("restart with the API server away: %+v, want the container started with the last content", res)
	}
	if got := files(t, h.volumeDir("kubernetes.io~configmap", "cfg")); got["a"] != "-rw-r--r-- alpha" {
		t.Fatalf("volume %v", got)
	}
	// The ConfigMap deleted (the API answers NotFound): an error.
	h.objs.SetError("ConfigMap", nil)
	h.objs.DeleteConfigMap("default", "cfg")
	cs = h.fake.Containers()
	if err := h.fake.ExitContainer(cs[len(cs)-1].ID, 1, "Error"); err != nil {
		t.Fatal(err)
	}
	h.clock.Step(time.Minute) // past the crash-loop backoff
	if res := h.sync(p); res.Err == nil || !strings.Contains(res.Err.Error(), `configmap "cfg" not found`) {
		t.Fatalf("sync with the ConfigMap gone: %+v", res)
	}
}
