//go:build integration

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/status"
)

// The image tests use private docker-registry instances the test starts
// on free 127.0.0.1 ports, with a hosts.toml in the rig's certs.d so that
// containerd pulls from them over plain HTTP, and images made for the
// test alone (busybox with a unique config label, so a unique image ID):
// stopping a registry or collecting an image touches nothing another test
// uses.

// registry is one docker-registry process the test owns.
type registry struct {
	t       *testing.T
	addr    string // 127.0.0.1:port
	dir     string
	conf    string
	user    string // basic auth when set
	pass    string
	cmd     *exec.Cmd
	waitErr chan error
}

func newRegistry(t *testing.T, user, pass string) *registry {
	t.Helper()
	rig := os.Getenv("NODEAGENT_RIG_DIR")
	if rig == "" {
		t.Fatal("NODEAGENT_RIG_DIR is not set: source the rig's env (hack/rig.sh env)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := &registry{t: t, addr: addr, dir: t.TempDir(), user: user, pass: pass}
	auth := ""
	if user != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.DefaultCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(r.dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(user+":"+string(hash)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = "auth:\n  htpasswd:\n    realm: nodeagent-e2e\n    path: " + htpasswd + "\n"
	}
	r.conf = filepath.Join(r.dir, "registry.yml")
	conf := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`, filepath.Join(r.dir, "data"), addr, auth)
	if err := os.WriteFile(r.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// containerd reads certs.d at every pull: plain HTTP for this port.
	hosts := filepath.Join(rig, "certs.d", addr)
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		t.Fatal(err)
	}
	toml := fmt.Sprintf("# written by nodeagent's e2e tests\nserver = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n  skip_verify = true\n", addr, addr)
	if err := os.WriteFile(filepath.Join(hosts, "hosts.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.stop()
		os.RemoveAll(hosts)
	})
	r.start()
	return r
}

// start runs docker-registry on r's address and storage and waits until
// it answers.
func (r *registry) start() {
	r.t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REGISTRY_") {
			env = append(env, kv)
		}
	}
	out := &syncBuffer{}
	r.cmd = exec.Command("/usr/bin/docker-registry", "serve", r.conf)
	r.cmd.Env, r.cmd.Stdout, r.cmd.Stderr = env, out, out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start docker-registry: %v", err)
	}
	r.waitErr = make(chan error, 1)
	go func(c *exec.Cmd, ch chan error) { ch <- c.Wait() }(r.cmd, r.waitErr)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + r.addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case err := <-r.waitErr:
			r.cmd = nil
			r.t.Fatalf("docker-registry exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("docker-registry did not answer on %s within 15s\n%s", r.addr, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the registry (SIGTERM, then SIGKILL after 10s).
func (r *registry) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.waitErr:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-r.waitErr
	}
	r.cmd = nil
}

// do sends one registry API request with r's credentials.
func (r *registry) do(method, u string, body []byte, contentType string) (*http.Response, error) {
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if r.user != "" {
		req.SetBasicAuth(r.user, r.pass)
	}
	return http.DefaultClient.Do(req)
}

// pushBlob uploads one blob (monolithic upload).
func (r *registry) pushBlob(repo string, blob []byte) (string, error) {
	digest := fmt.Sprintf("sha256:%x", sha256.Sum256(blob))
	resp, err := r.do(http.MethodPost, "http://"+r.addr+"/v2/"+repo+"/blobs/uploads/", nil, "")
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("start upload: %s", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return "", err
	}
	loc = (&url.URL{Scheme: "http", Host: r.addr}).ResolveReference(loc)
	q := loc.Query()
	q.Set("digest", digest)
	loc.RawQuery = q.Encode()
	resp, err = r.do(http.MethodPut, loc.String(), blob, "application/octet-stream")
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("upload %s: %s", digest, resp.Status)
	}
	return digest, nil
}

// pushUniqueBusybox pushes the rig's busybox under repo:tag with a config
// label making its image ID unique, and returns the image reference. The
// image is removed from the runtime when the test ends.
func (r *registry) pushUniqueBusybox(repo, tag string) string {
	r.t.Helper()
	layout := filepath.Join(os.Getenv("NODEAGENT_RIG_DIR"), "images", "busybox")
	blob := func(digest string) []byte {
		b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:")))
		if err != nil {
			r.t.Fatalf("read the rig's busybox image: %v", err)
		}
		return b
	}
	var index struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil || json.Unmarshal(b, &index) != nil || len(index.Manifests) == 0 {
		r.t.Fatalf("read %s/index.json: %v", layout, err)
	}
	var manifest map[string]any
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		r.t.Fatal(err)
	}
	cfgDesc := manifest["config"].(map[string]any)
	var cfg map[string]any
	if err := json.Unmarshal(blob(cfgDesc["digest"].(string)), &cfg); err != nil {
		r.t.Fatal(err)
	}
	id := make([]byte, 8)
	rand.Read(id)
	inner, _ := cfg["config"].(map[string]any)
	if inner == nil {
		inner = map[string]any{}
		cfg["config"] = inner
	}
	inner["Labels"] = map[string]string{"nodeagent.e2e/id": hex.EncodeToString(id)}
	cfgBlob, _ := json.Marshal(cfg)
	for _, l := range manifest["layers"].([]any) {
		if _, err := r.pushBlob(repo, blob(l.(map[string]any)["digest"].(string))); err != nil {
			r.t.Fatalf("push layer: %v", err)
		}
	}
	cfgDigest, err := r.pushBlob(repo, cfgBlob)
	if err != nil {
		r.t.Fatalf("push config: %v", err)
	}
	cfgDesc["digest"], cfgDesc["size"] = cfgDigest, len(cfgBlob)
	body, _ := json.Marshal(manifest)
	mediaType, _ := manifest["mediaType"].(string)
	if mediaType == "" {
		mediaType = "application/vnd.oci.image.manifest.v1+json"
	}
	resp, err := r.do(http.MethodPut, "http://"+r.addr+"/v2/"+repo+"/manifests/"+tag, body, mediaType)
	if err != nil {
		r.t.Fatalf("push manifest: %v", err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		r.t.Fatalf("push manifest: %s %s", resp.Status, msg)
	}
	ref := r.addr + "/" + repo + ":" + tag
	r.t.Cleanup(func() { removeImage(ref) })
	return ref
}

// imageID returns the runtime's ID of image, "" when absent.
func imageID(t *testing.T, image string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := conn.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		t.Fatalf("image status %s: %v", image, err)
	}
	return resp.GetImage().GetId()
}

func removeImage(image string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
}

// waiting returns the waiting reason of a pod's first container, "" when
// not waiting or unknown.
func (a *agent) waiting(name string) string {
	p := a.status(name)
	if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Waiting == nil {
		return ""
	}
	return p.Status.ContainerStatuses[0].State.Waiting.Reason
}

// sleeperPod is a manifest of one busybox-based container that sleeps.
func sleeperPod(name, image, policy, extraSpec string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
` + extraSpec + `  containers:
  - name: main
    image: ` + image + `
    imagePullPolicy: ` + policy + `
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`
}

// imagePullPolicy: Never with an image the node does not have.
func TestImagePullNever(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("never.yaml", sleeperPod("never", "127.0.0.1:5055/nodeagent/never-"+a.node+":1", "Never", ""))
	eventually(t, 60*time.Second, "ErrImageNeverPull", func() bool { return a.waiting("never") == "ErrImageNeverPull" })
}

// A registry that stops: ErrImagePull, then ImagePullBackOff; when it is
// back the pod runs without anyone doing anything.
func TestImagePullBackOffRecovers(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	image := reg.pushUniqueBusybox("e2e/backoff", "1")
	reg.stop()
	a := newAgent(t)
	a.start()
	a.write("backoff.yaml", sleeperPod("backoff", image, "IfNotPresent", ""))
	seen := map[string]bool{}
	eventually(t, 60*time.Second, "ErrImagePull then ImagePullBackOff", func() bool {
		r := a.waiting("backoff")
		seen[r] = true
		return seen["ErrImagePull"] && r == "ImagePullBackOff"
	})
	if a.running("backoff", "main") != nil {
		t.Fatal("container running while its registry is down")
	}
	reg.start()
	// The first backoff is 10s, the next 20s: the pull comes back on its own.
	eventually(t, 60*time.Second, "pod running after the registry came back", func() bool {
		return a.running("backoff", "main") != nil
	})
}

// A registry with authentication: a pod with the pull secret (standalone
// mode: --pull-secrets-dir) pulls; one without gets ErrImagePull.
func TestImagePullSecret(t *testing.T) {
	t.Parallel()
	pass := make([]byte, 8)
	rand.Read(pass)
	reg := newRegistry(t, "e2e", hex.EncodeToString(pass))
	image := reg.pushUniqueBusybox("e2e/private", "1")
	secrets := t.TempDir()
	auth := base64.StdEncoding.EncodeToString([]byte(reg.user + ":" + reg.pass))
	if err := os.MkdirAll(filepath.Join(secrets, "default"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "default", "regcred"),
		[]byte(`{"auths":{"`+reg.addr+`":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, "--pull-secrets-dir", secrets)
	a.start()
	// Always: the pod without the secret must ask the registry even once
	// the other pulled the image.
	a.write("nosecret.yaml", sleeperPod("nosecret", image, "Always", ""))
	a.write("withsecret.yaml", sleeperPod("withsecret", image, "Always", "  imagePullSecrets: [{name: regcred}]\n"))
	eventually(t, 60*time.Second, "the pod with the pull secret running", func() bool {
		return a.running("withsecret", "main") != nil
	})
	msg := ""
	eventually(t, 30*time.Second, "ErrImagePull without the pull secret", func() bool {
		if a.waiting("nosecret") != "ErrImagePull" {
			return false
		}
		msg = a.status("nosecret").Status.ContainerStatuses[0].State.Waiting.Message
		return true
	})
	if !strings.Contains(msg, "authorization failed") {
		t.Errorf("ErrImagePull message = %q, want the registry's refusal", msg)
	}
	if a.running("nosecret", "main") != nil {
		t.Error("the pod without the pull secret runs")
	}
	p := a.status("withsecret")
	evs, _ := status.ReadEvents(filepath.Join(a.root, "status"), p)
	pulled := ""
	for _, e := range evs {
		if e.Reason == "Pulled" {
			pulled = e.Message
		}
	}
	if !strings.HasPrefix(pulled, `Successfully pulled image "`+image+`" in `) || !strings.Contains(pulled, " including waiting). Image size: ") ||
		strings.Contains(pulled, "Image size: 0 bytes") {
		t.Errorf("Pulled event = %q, want the kubelet's wording with the image size", pulled)
	}
	t.Logf("Pulled event: %s", pulled)
}

// Image GC by age removes this test's unused image and keeps the used and
// pinned ones. Only --image-maximum-gc-age is made short: the thresholds
// stay at 85/80% (the rig's disk is far below), since with tiny ones the
// agent would remove every unused image of the shared containerd — other
// tests' too. By age, what can go is what no container of the runtime
// used for 15s and the agent first saw over 15s ago: the shared busybox is
// kept in use by this test's own pod, the sandbox image is pinned by
// containerd, and an image pulled by another test is in use by its
// container within a moment (and younger than the minimum age till then).
func TestImageGarbageCollection(t *testing.T) {
	t.Parallel()
	reg := newRegistry(t, "", "")
	image := reg.pushUniqueBusybox("e2e/gc", "1")
	a := newAgent(t, "--image-gc-period", "1s", "--image-minimum-gc-age", "5s", "--image-maximum-gc-age", "15s")
	a.start()
	a.write("keeper.yaml", sleeperPod("keeper", busybox, "IfNotPresent", ""))
	a.write("victim.yaml", sleeperPod("victim", image, "IfNotPresent", ""))
	eventually(t, 60*time.Second, "both pods running", func() bool {
		return a.running("keeper", "main") != nil && a.running("victim", "main") != nil
	})
	id := imageID(t, image)
	if id == "" || id == imageID(t, busybox) {
		t.Fatalf("image %s has ID %q, want its own", image, id)
	}
	// In use: kept, however old.
	time.Sleep(17 * time.Second)
	if imageID(t, image) == "" {
		t.Fatal("image removed while its container runs")
	}
	a.remove("victim.yaml")
	eventually(t, 30*time.Second, "victim pod gone", func() bool { return len(a.sandboxes("victim")) == 0 })
	gone := time.Now()
	eventually(t, 60*time.Second, "unused image removed", func() bool { return imageID(t, image) == "" })
	t.Logf("image removed %v after its pod", time.Since(gone).Round(time.Second))
	if time.Since(gone) < 14*time.Second {
		t.Errorf("image removed %v after its last use, before the maximum age of 15s", time.Since(gone))
	}
	if imageID(t, busybox) == "" {
		t.Error("busybox, in use by the keeper pod, was removed")
	}
	if pause := os.Getenv("NODEAGENT_PAUSE_IMAGE"); pause != "" && imageID(t, pause) == "" {
		t.Errorf("the pinned sandbox image %s was removed", pause)
	}
	// The line follows the RemoveImage call the test just saw the effect of.
	eventually(t, 10*time.Second, "the removal in the agent's log", func() bool {
		return strings.Contains(a.out.String(), "removed unused image")
	})
	if a.running("keeper", "main") == nil {
		t.Error("keeper pod no longer running")
	}
}
