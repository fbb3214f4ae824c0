package cri_test

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
)

// events records pod events as "reason: message".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Event(_ *v1.Pod, _, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, reason+": "+message)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// newImageHarness is newHarness with the image settings of cfg (pull
// secrets dir, node docker config files) and an event recorder.
func newImageHarness(t *testing.T, cfg cri.Config) (*harness, *events) {
	t.Helper()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	h := &harness{t: t, fake: critest.New(clk), clock: clk, logs: t.TempDir(), root: volumeRoot(t)}
	ev := &events{}
	cfg.Client, cfg.Logger, cfg.Clock, cfg.RootDir, cfg.PodLogsDir = h.fake, zaptest.NewLogger(t), clk, h.root, h.logs
	cfg.NodeName, cfg.Recorder = "node1", ev
	rt, err := cri.New(cfg)
	if err != nil {
		t.Fatalf("cri.New() error = %v", err)
	}
	h.rt = rt
	return h, ev
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func authOf(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// pullUsers lists the user names of the PullImage calls, "" for an
// anonymous one.
func pullUsers(calls []critest.Call) []string {
	var out []string
	for _, req := range only[*runtimeapi.PullImageRequest](calls, "PullImage") {
		out = append(out, req.Auth.GetUsername())
	}
	return out
}

// The Pulled event reads as the kubelet's, with the image size from the
// runtime.
func TestPulledEvent(t *testing.T) {
	h, ev := newImageHarness(t, cri.Config{})
	h.fake.SetImage("nginx:latest", critest.ImageRef("nginx:latest"), 1234, false)
	if res := h.sync(webPod); res.Err != nil || len(res.Waiting) != 0 {
		t.Fatalf("SyncPod() = %+v, want the container started", res)
	}
	want := []string{
		`Pulling: Pulling image "nginx:latest"`,
		`Pulled: Successfully pulled image "nginx:latest" in 0s (0s including waiting). Image size: 1234 bytes.`,
	}
	got := ev.list()
	if len(got) < 2 {
		t.Fatalf("events = %q, want at least %q", got, want)
	}
	if diff := cmp.Diff(want, got[:2]); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// Standalone mode reads imagePullSecrets from <dir>/<namespace>/<name>;
// the node-wide docker config follows them, the first readable file of
// DockerConfigPaths only.
func TestPullCredentialsStandalone(t *testing.T) {
	secrets, nodeDir := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(secrets, "default", "regcred"),
		`{"auths":{"registry.example.com:5000":{"auth":"`+authOf("alice", "pod")+`"}}}`)
	writeFile(t, filepath.Join(nodeDir, "root", "config.json"),
		`{"auths":{"https://registry.example.com:5000/v1/":{"auth":"`+authOf("node", "n")+`"},"other.example.com":{"username":"o","password":"o"}}}`)
	writeFile(t, filepath.Join(nodeDir, "home", ".docker", "config.json"),
		`{"auths":{"registry.example.com:5000":{"username":"shadowed","password":"x"}}}`)
	paths := cri.DefaultDockerConfigPaths(filepath.Join(nodeDir, "root"), filepath.Join(nodeDir, "home"))

	tests := []struct {
		name      string
		secrets   []v1.LocalObjectReference
		image     string
		paths     []string
		wantUsers []string
	}{
		{name: "pod secret, then node config", secrets: []v1.LocalObjectReference{{Name: "regcred"}},
			image: "registry.example.com:5000/team/app:1", paths: paths, wantUsers: []string{"alice", "node"}},
		{name: "node config only", image: "registry.example.com:5000/team/app:1", paths: paths, wantUsers: []string{"node"}},
		{name: "missing secret: node config", secrets: []v1.LocalObjectReference{{Name: "nope"}},
			image: "registry.example.com:5000/team/app:1", paths: paths, wantUsers: []string{"node"}},
		{name: "no match: anonymous", secrets: []v1.LocalObjectReference{{Name: "regcred"}},
			image: "ghcr.io/org/app:1", paths: paths, wantUsers: []string{""}},
		{name: "first readable file wins", image: "registry.example.com:5000/team/app:1",
			paths: paths[1:], wantUsers: []string{"shadowed"}},
		{name: "legacy .dockercfg", image: "registry.example.com:5000/team/app:1",
			paths: []string{writeDockercfg(t)}, wantUsers: []string{"legacy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newImageHarness(t, cri.Config{PullSecretsDir: secrets, DockerConfigPaths: tt.paths})
			// Every credential fails, so that each is tried in turn.
			h.fake.SetError("PullImage", errors.New("unauthorized"))
			p := webPod.DeepCopy()
			p.Spec.ImagePullSecrets = tt.secrets
			p.Spec.Containers[0].Image = tt.image
			res := h.sync(p)
			if w := res.Waiting["app"]; w.Reason != cri.ReasonErrImagePull {
				t.Errorf("Waiting[app] = %+v, want ErrImagePull", w)
			}
			if diff := cmp.Diff(tt.wantUsers, pullUsers(h.fake.Calls())); diff != "" {
				t.Errorf("PullImage attempts by user (-want +got):\n%s", diff)
			}
		})
	}
}

func writeDockercfg(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".dockercfg")
	writeFile(t, path, `{"registry.example.com:5000":{"auth":"`+authOf("legacy", "l")+`"}}`)
	return path
}
