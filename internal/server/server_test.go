package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
)

// fakeRuntime answers streaming URLs under base and records requests.
type fakeRuntime struct {
	base    string
	execs   []*runtimeapi.ExecRequest
	pfs     []*runtimeapi.PortForwardRequest
	attachs []*runtimeapi.AttachRequest
	listed  []*runtimeapi.ListPodSandboxRequest
	syncOut string
}

func (f *fakeRuntime) Exec(_ context.Context, in *runtimeapi.ExecRequest, _ ...grpc.CallOption) (*runtimeapi.ExecResponse, error) {
	f.execs = append(f.execs, in)
	return &runtimeapi.ExecResponse{Url: f.base + "/exec/tok"}, nil
}

func (f *fakeRuntime) Attach(_ context.Context, in *runtimeapi.AttachRequest, _ ...grpc.CallOption) (*runtimeapi.AttachResponse, error) {
	f.attachs = append(f.attachs, in)
	return &runtimeapi.AttachResponse{Url: f.base + "/attach/tok"}, nil
}

func (f *fakeRuntime) PortForward(_ context.Context, in *runtimeapi.PortForwardRequest, _ ...grpc.CallOption) (*runtimeapi.PortForwardResponse, error) {
	f.pfs = append(f.pfs, in)
	return &runtimeapi.PortForwardResponse{Url: f.base + "/portforward/tok"}, nil
}

func (f *fakeRuntime) ExecSync(_ context.Context, in *runtimeapi.ExecSyncRequest, _ ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(f.syncOut + strings.Join(in.Cmd, " "))}, nil
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, in *runtimeapi.ListPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	f.listed = append(f.listed, in)
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "old", CreatedAt: 1}, {Id: "sb1", CreatedAt: 2}}}, nil
}

var testPods = []*v1.Pod{{
	ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid1"},
	Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main"}, {Name: "waiting"}}},
	Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
		{Name: "main", ContainerID: "containerd://c1"}, {Name: "waiting"},
	}},
}}

// upgradeBackend is a streaming server: it answers an upgrade with 101
// and echoes what it then reads, prefixed with the path it was called on.
func upgradeBackend(t *testing.T) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			http.Error(w, "upgrade required", http.StatusBadRequest)
			return
		}
		if r.Header.Get("Authorization") != "" {
			http.Error(w, "credentials leaked to the runtime", http.StatusBadRequest)
			return
		}
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
		rw.Flush()
		line, _ := rw.ReadString('\n')
		fmt.Fprintf(rw, "%s?%s %s", r.URL.Path, r.URL.RawQuery, line)
		rw.Flush()
	}))
}

func newTestServer(t *testing.T, authn AuthnConfig, authz Authorizer, rt Runtime) *Server {
	t.Helper()
	return newTestServerLogs(t, authn, authz, rt, "")
}

func newTestServerLogs(t *testing.T, authn AuthnConfig, authz Authorizer, rt Runtime, logsDir string) *Server {
	t.Helper()
	s, err := New(Config{PodLogsDir: logsDir, NodeName: "node1", Authenticator: NewAuthenticator(authn), Authorizer: authz,
		Pods: func() ([]*v1.Pod, error) { return testPods, nil }, Runtime: rt,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "kubelet_running_pods 1\n") }),
		Configz: func() any { return map[string]any{"kubeletconfig": map[string]int{"port": 10250}} },
		Logger:  zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestFilterOverTLS: a real TLS server with the serving certificate
// self-signed in a cert dir: no credentials 401, a client certificate of
// the CA authorized by the webhook 200, one denied 403 with the kubelet's
// message, a review error 500.
func TestFilterOverTLS(t *testing.T) {
	ca := newCA(t, "ca")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	var calls int
	var fail bool
	cs := fake.NewSimpleClientset()
	cs.PrependReactor("create", "subjectaccessreviews", sarReactor(&calls, &fail))
	s := newTestServer(t, AuthnConfig{ClientCAs: pool, Clock: clocktesting.NewFakePassiveClock(epoch.Add(time.Minute))},
		&Webhook{Reviews: cs.AuthorizationV1().SubjectAccessReviews()}, &fakeRuntime{})
	cfg, err := TLSConfig(TLSOptions{CertDir: t.TempDir(), Host: "node1", IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.TLS = cfg
	ts.StartTLS()
	defer ts.Close()

	get := func(cert *tls.Certificate, path string) (int, string) {
		t.Helper()
		tc := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the test's self-signed serving cert
		if cert != nil {
			tc.Certificates = []tls.Certificate{*cert}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := c.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	alice, bob := ca.client(t, "alice", nil, x509.ExtKeyUsageClientAuth), ca.client(t, "bob", []string{"devs"}, x509.ExtKeyUsageClientAuth)
	other := newCA(t, "other").client(t, "alice", nil, x509.ExtKeyUsageClientAuth)

	if code, body := get(nil, "/pods"); code != 401 || body != "Unauthorized" {
		t.Errorf("no credentials: %d %q; want 401 Unauthorized", code, body)
	}
	if code, _ := get(&other, "/pods"); code != 401 {
		t.Errorf("certificate of another CA: %d; want 401", code)
	}
	code, body := get(&alice, "/pods")
	if code != 200 {
		t.Fatalf("alice /pods: %d %s", code, body)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil || list.Kind != "PodList" || len(list.Items) != 1 || list.Items[0].Name != "web" {
		t.Errorf("/pods: %v %s", err, body)
	}
	if code, body := get(&bob, "/pods"); code != 403 || body != "Forbidden (user=bob, verb=get, resource=nodes, subresource(s)=[pods proxy])" {
		t.Errorf("bob /pods: %d %q; want 403 with the kubelet's message", code, body)
	}
	if code, body := get(&alice, "/healthz"); code != 200 || body != "ok" {
		t.Errorf("alice /healthz: %d %q", code, body)
	}
	if code, _ := get(&alice, "/metrics"); code != 403 {
		t.Errorf("alice /metrics (nodes/metrics not granted): %d; want 403", code)
	}
	fail = true
	if code, body := get(&bob, "/configz"); code != 500 || !strings.HasPrefix(body, "Authorization error (user=bob") {
		t.Errorf("review error: %d %q; want 500", code, body)
	}
}

func TestEndpoints(t *testing.T) {
	backend := upgradeBackend(t)
	defer backend.Close()
	rt := &fakeRuntime{base: backend.URL}
	s := newTestServer(t, AuthnConfig{Anonymous: true}, AlwaysAllow{}, rt)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	// upgrade sends an upgrade request on a raw connection, then a line,
	// and returns the status line and the echo.
	upgrade := func(method, path string) (string, string) {
		t.Helper()
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: node1\r\nAuthorization: Bearer secret\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n", method, path)
		br := bufio.NewReader(conn)
		status, _ := br.ReadString('\n')
		for {
			l, err := br.ReadString('\n')
			if err != nil || l == "\r\n" {
				break
			}
		}
		if !strings.Contains(status, "101") {
			return strings.TrimSpace(status), ""
		}
		fmt.Fprint(conn, "hello\n")
		echo, _ := br.ReadString('\n')
		return strings.TrimSpace(status), strings.TrimSpace(echo)
	}

	status, echo := upgrade("POST", "/exec/ns/web/main?command=sh&command=-c&command=cat&input=1&output=1&error=1")
	if !strings.Contains(status, "101") || echo != "/exec/tok?command=sh&command=-c&command=cat&input=1&output=1&error=1 hello" {
		t.Fatalf("exec: %q %q", status, echo)
	}
	want := &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"sh", "-c", "cat"}, Stdin: true, Stdout: true, Stderr: true}
	if len(rt.execs) != 1 || rt.execs[0].String() != want.String() {
		t.Errorf("CRI exec requests %v; want %v", rt.execs, want)
	}
	if status, echo := upgrade("POST", "/exec/ns/web/uid1/main?command=true&tty=1&error=1"); !strings.Contains(status, "101") || !strings.HasPrefix(echo, "/exec/tok") {
		t.Errorf("exec with uid: %q %q", status, echo)
	}
	if rt.execs[1].Stderr || !rt.execs[1].Tty {
		t.Errorf("exec with a TTY: %v; want stderr off (merged into the TTY)", rt.execs[1])
	}
	// Attach: the TTY is the container's (no TTY in main's spec), whatever
	// the request says, as the kubelet.
	if status, echo := upgrade("GET", "/attach/ns/web/main?output=1&error=1&tty=1"); !strings.Contains(status, "101") || !strings.HasPrefix(echo, "/attach/tok") {
		t.Errorf("attach: %q %q", status, echo)
	}
	wantAttach := &runtimeapi.AttachRequest{ContainerId: "c1", Stdout: true, Stderr: true}
	if len(rt.attachs) != 1 || rt.attachs[0].String() != wantAttach.String() {
		t.Errorf("CRI attach requests %v; want %v", rt.attachs, wantAttach)
	}
	if status, echo := upgrade("POST", "/portForward/ns/web"); !strings.Contains(status, "101") || !strings.HasPrefix(echo, "/portforward/tok") {
		t.Errorf("port-forward: %q %q", status, echo)
	}
	if len(rt.pfs) != 1 || rt.pfs[0].PodSandboxId != "sb1" || rt.listed[0].Filter.LabelSelector["io.kubernetes.pod.uid"] != "uid1" {
		t.Errorf("port-forward: CRI requests %v, sandbox lists %v; want the newest ready sandbox of uid1", rt.pfs, rt.listed)
	}
	for _, tc := range []struct{ path, want string }{
		{"/exec/ns/nope/main?command=sh", "404"},
		{"/exec/ns/web/other?command=sh", "404"},
		{"/exec/ns/web/waiting?command=sh", "404"},
		{"/exec/ns/web/wronguid/main?command=sh", "404"},
		{"/exec/ns/web/main", "400"},
		{"/portForward/ns/nope", "404"},
	} {
		if status, _ := upgrade("POST", tc.path); !strings.Contains(status, tc.want) {
			t.Errorf("%s: %q; want %s", tc.path, status, tc.want)
		}
	}

	resp, err := http.Post(ts.URL+"/run/ns/web/main?cmd=echo+hi", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "echo hi" {
		t.Errorf("/run: %d %q", resp.StatusCode, b)
	}
	for path, want := range map[string]string{"/metrics": "kubelet_running_pods 1\n", "/configz": `{"kubeletconfig":{"port":10250}}`} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("%s: %q; want %q", path, b, want)
		}
	}
}

func TestContainerLogs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ns_web_uid1", "main")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := "2026-01-01T00:00:01.000000000Z stdout F one\n" +
		"2026-01-01T00:00:02.000000000Z stderr P tw\n" +
		"2026-01-01T00:00:02.500000000Z stderr F o\n" +
		"2026-01-01T00:00:03.000000000Z stdout F three\n"
	if err := os.WriteFile(filepath.Join(dir, "0.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestServerLogs(t, AuthnConfig{Anonymous: true}, AlwaysAllow{}, &fakeRuntime{}, root)
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()
	for _, tc := range []struct {
		name, query string
		code        int
		body        string
	}{
		{"all", "", 200, "one\ntwo\nthree\n"},
		{"tail", "?tailLines=2", 200, "two\nthree\n"},
		{"limit", "?limitBytes=5", 200, "one\nt"},
		{"since time", "?sinceTime=2026-01-01T00:00:02Z", 200, "two\nthree\n"},
		{"no previous", "?previous=true", 404, ""},
		{"bad tail", "?tailLines=x", 400, ""},
		{"both since", "?sinceSeconds=5&sinceTime=2026-01-01T00:00:02Z", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Get(ts.URL + "/containerLogs/ns/web/main" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.code || (tc.code == 200 && string(b) != tc.body) {
				t.Errorf("%d %q; want %d %q", resp.StatusCode, b, tc.code, tc.body)
			}
		})
	}
	for _, path := range []string{"/containerLogs/ns/web/nope", "/containerLogs/ns/nope/main", "/containerLogs/ns/web/waiting"} {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d; want 404", path, resp.StatusCode)
		}
	}
}

// fakeStats answers a fixed summary and records what it was asked.
type fakeStats struct {
	only []bool
	err  error
}

func (f *fakeStats) Summary(_ context.Context, only bool) (*statsapi.Summary, error) {
	f.only = append(f.only, only)
	if f.err != nil {
		return nil, f.err
	}
	return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node1"}, Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Name: "web", Namespace: "default"}}}}, nil
}

// TestStatsSummary: /stats/summary is authorized as nodes/stats, passes
// only_cpu_and_memory, refuses a bad one and answers a failed summary
// with 500; /metrics/resource is nodes/metrics.
func TestStatsSummary(t *testing.T) {
	st := &fakeStats{}
	authz := &recordingAuthz{allow: map[string]bool{"stats": true, "metrics": true}}
	s, err := New(Config{NodeName: "node1", Authenticator: NewAuthenticator(AuthnConfig{Anonymous: true}), Authorizer: authz,
		Pods: func() ([]*v1.Pod, error) { return testPods, nil }, Runtime: &fakeRuntime{}, Stats: st,
		Resource: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "node_cpu_usage_seconds_total 1\n") }),
		Logger:   zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("/stats/summary")
	var sum statsapi.Summary
	if code != 200 || json.Unmarshal([]byte(body), &sum) != nil || sum.Node.NodeName != "node1" || len(sum.Pods) != 1 {
		t.Fatalf("/stats/summary: %d %s", code, body)
	}
	if code, _ := get("/stats/summary?only_cpu_and_memory=true"); code != 200 {
		t.Errorf("only_cpu_and_memory=true: %d", code)
	}
	if code, _ := get("/stats/summary?only_cpu_and_memory=1"); code != 200 {
		t.Errorf("only_cpu_and_memory=1: %d", code)
	}
	rec := httptest.NewRecorder()
	post := httptest.NewRequest("POST", "/stats/summary", strings.NewReader("only_cpu_and_memory=true"))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	s.Handler().ServeHTTP(rec, post)
	if rec.Code != 200 {
		t.Errorf("POST /stats/summary: %d", rec.Code)
	}
	// A body past the bound is refused, not spooled.
	rec = httptest.NewRecorder()
	post = httptest.NewRequest("POST", "/stats/summary", strings.NewReader("only_cpu_and_memory=true&pad="+strings.Repeat("x", 1<<20)))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	s.Handler().ServeHTTP(rec, post)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), "parse form failed") {
		t.Errorf("POST /stats/summary with a 1 MiB form: %d %s; want 400", rec.Code, rec.Body.String())
	}
	if fmt.Sprint(st.only) != "[false true false true]" {
		t.Errorf("summaries asked %v; want [false true false true] (only \"true\" means true, as the kubelet)", st.only)
	}
	if code, body := get("/metrics/resource"); code != 200 || !strings.Contains(body, "node_cpu_usage_seconds_total") {
		t.Errorf("/metrics/resource: %d %s", code, body)
	}
	if got := strings.Join(authz.subresources, ","); got != "stats,stats,stats,stats,stats,metrics" {
		t.Errorf("authorized subresources %s; want stats for /stats/summary, metrics for /metrics/resource", got)
	}
	st.err = errors.New("runtime down")
	if code, body := get("/stats/summary"); code != 500 || !strings.Contains(body, "runtime down") {
		t.Errorf("failed summary: %d %s; want 500 with the cause", code, body)
	}
	authz.allow = nil
	if code, _ := get("/stats/summary"); code != 403 {
		t.Errorf("without nodes/stats: %d; want 403", code)
	}
}

// recordingAuthz allows the subresources in allow and records each one
// it was asked about.
type recordingAuthz struct {
	allow        map[string]bool
	subresources []string
}

func (a *recordingAuthz) Authorize(_ context.Context, attrs Attributes) (bool, string, error) {
	a.subresources = append(a.subresources, attrs.Subresource)
	return a.allow[attrs.Subresource], "", nil
}

// TestReadOnlyPort: the read-only handler serves the reading endpoints
// with no credentials, and nothing that reaches into a container.
func TestReadOnlyPort(t *testing.T) {
	h, err := ReadOnly(Config{NodeName: "node1", Pods: func() ([]*v1.Pod, error) { return testPods, nil }, Stats: &fakeStats{},
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "kubelet_running_pods 1\n") }),
		Logger:  zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"/healthz": 200, "/pods": 200, "/stats/summary": 200, "/metrics": 200,
		"/containerLogs/default/web/app": 404, "/configz": 404, "/exec/default/web/app?command=id": 404, "/metrics/resource": 404,
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("read-only %s: %d; want %d", path, rec.Code, want)
		}
	}
	if _, err := ReadOnly(Config{NodeName: "node1", Logger: zaptest.NewLogger(t)}); err == nil {
		t.Error("read-only port without pods: no error")
	}
}
