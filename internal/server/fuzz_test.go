package server

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// fzRuntime answers every call with a streaming URL under base (or
// output) and counts the calls: a call means a request reached exec,
// attach, port-forward or run.
type fzRuntime struct {
	base  string
	mu    sync.Mutex
	calls int
}

func (f *fzRuntime) called() {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
}

func (f *fzRuntime) take() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.calls
	f.calls = 0
	return n
}

func (f *fzRuntime) Exec(context.Context, *runtimeapi.ExecRequest, ...grpc.CallOption) (*runtimeapi.ExecResponse, error) {
	f.called()
	return &runtimeapi.ExecResponse{Url: f.base + "/exec/tok"}, nil
}

func (f *fzRuntime) Attach(context.Context, *runtimeapi.AttachRequest, ...grpc.CallOption) (*runtimeapi.AttachResponse, error) {
	f.called()
	return &runtimeapi.AttachResponse{Url: f.base + "/attach/tok"}, nil
}

func (f *fzRuntime) PortForward(context.Context, *runtimeapi.PortForwardRequest, ...grpc.CallOption) (*runtimeapi.PortForwardResponse, error) {
	f.called()
	return &runtimeapi.PortForwardResponse{Url: f.base + "/portforward/tok"}, nil
}

func (f *fzRuntime) ExecSync(_ context.Context, in *runtimeapi.ExecSyncRequest, _ ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	f.called()
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(strings.Join(in.Cmd, " "))}, nil
}

func (f *fzRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	f.called()
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "old", CreatedAt: 1}, {Id: "sb1", CreatedAt: 2}}}, nil
}

// fzAuthz allows every request and records the subresource that allowed
// the last one (the first asked: the filter stops at the first allowed).
type fzAuthz struct {
	mu      sync.Mutex
	allowed string
}

func (a *fzAuthz) Authorize(_ context.Context, attrs Attributes) (bool, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.allowed == "" {
		a.allowed = attrs.Subresource
	}
	return true, "", nil
}

func (a *fzAuthz) take() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.allowed
	a.allowed = ""
	return s
}

type fzStats struct{}

func (fzStats) Summary(context.Context, bool) (*statsapi.Summary, error) {
	return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node1"}}, nil
}

const (
	// fzLogMark is in every log line of the node's pods: a body holding
	// it came from a container's log.
	fzLogMark = "LOGMARK"
	// fzCanary is in every file a log read must not reach.
	fzCanary = "CANARY-outside-the-pod-logs"
)

func fzLog(msg string) string {
	return "2026-01-01T00:00:01.000000000Z stdout F " + msg + "\n"
}

func fzPod(ns, name, uid string, containers ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: c, ContainerID: "containerd://" + c + "-id",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}})
	}
	return p
}

// fzFixture is a node: the pod logs directory under root/logs with the
// node's pods' logs, files a read must not reach planted around it (a
// canary next to the logs directory and in it, a symlinked pod
// directory, a symlinked live log, a symlinked rotated one), and pods
// whose names would reach them were they not refused.
type fzFixture struct {
	logs    string
	pods    []*v1.Pod
	hostile []*v1.Pod
}

func newFzFixture(f *testing.F) fzFixture {
	root := f.TempDir()
	logs := filepath.Join(root, "logs")
	outside := filepath.Join(root, "outside")
	put := func(path, body string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	link := func(target, path string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			f.Fatal(err)
		}
	}
	canary := fzLog(fzCanary)
	// The node's pods' logs: live, rotated and gzipped, an earlier
	// instance, an init container's.
	put(filepath.Join(logs, "ns_web_uid1", "main", "0.log"), fzLog(fzLogMark+" previous"))
	var gz strings.Builder
	w := gzip.NewWriter(&gz)
	w.Write([]byte(fzLog(fzLogMark + " rotated gz")))
	w.Close()
	put(filepath.Join(logs, "ns_web_uid1", "main", "1.log.20260101-000000.gz"), gz.String())
	put(filepath.Join(logs, "ns_web_uid1", "main", "1.log.20260101-000001"), fzLog(fzLogMark+" rotated"))
	put(filepath.Join(logs, "ns_web_uid1", "main", "1.log"), fzLog(fzLogMark+" one")+fzLog(fzLogMark+" two"))
	put(filepath.Join(logs, "ns_web_uid1", "setup", "0.log"), fzLog(fzLogMark+" init"))
	// What must not be reached.
	put(filepath.Join(root, "0.log"), canary)
	put(filepath.Join(logs, "0.log"), canary)
	put(filepath.Join(logs, "1.log"), canary)
	put(filepath.Join(logs, "a_b_c", "0.log"), canary)
	put(filepath.Join(outside, "main", "0.log"), canary)
	put(filepath.Join(outside, "0.log"), canary)
	link(outside, filepath.Join(logs, "s_t_u"))
	link(filepath.Join(outside, "0.log"), filepath.Join(logs, "v_w_x", "main", "0.log"))
	put(filepath.Join(logs, "p_q_r", "main", "0.log"), fzLog("live"))
	link(filepath.Join(outside, "0.log"), filepath.Join(logs, "p_q_r", "main", "0.log.20260101-000000"))

	web := fzPod("ns", "web", "uid1", "main", "waiting")
	web.Status.ContainerStatuses[1].ContainerID = "" // not created yet
	web.Spec.InitContainers = []v1.Container{{Name: "setup"}}
	web.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "setup", ContainerID: "containerd://setup-id"}}
	web.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", TTY: true}}}
	web.Status.EphemeralContainerStatuses = []v1.ContainerStatus{{Name: "dbg", ContainerID: "containerd://dbg-id"}}
	return fzFixture{
		logs: logs,
		pods: []*v1.Pod{web, fzPod("other", "db", "uid2", "pg")},
		hostile: []*v1.Pod{
			fzPod("a", "b", "c", "..", ".", "main"),
			fzPod("..", "..", "..", ".."),
			fzPod("d", "e", "../..", "main"),
			fzPod("f", "g", "h", "../..", "../../outside/main", "..%2F.."),
			fzPod("s", "t", "u", "main"),
			fzPod("v", "w", "x", "main"),
			fzPod("p", "q", "r", "main"),
			fzPod("i/j", "k", "l", "main"),
			fzPod("m", "n/../..", "o", "main"),
		},
	}
}

// FuzzServerPaths sends requests with fuzzed methods, request targets
// (path and query, as the request line) and bodies through the node
// server's handler (authentication anonymous, an authorizer that allows
// everything and records what allowed each request, a fake runtime whose
// streaming URLs point at a test server), and through the read-only
// port's. It checks:
//   - no panic;
//   - no 5xx for any request on a node of valid pods: a malformed path,
//     query or form is the client's error (4xx), never the server's;
//   - a request that reached the runtime (exec, attach, port-forward,
//     run) or a container's log was authorized as nodes/proxy, and the
//     read-only port reaches neither;
//   - no response holds a file outside the pods' log directories:
//     neither through the path (.., %2F, %2E) nor through pods whose
//     names, were they not refused, would lead out (.., /, a symlinked
//     pod directory, log file or rotated log file) — on a second server
//     that has such pods, where refusing them may be a 5xx.
func FuzzServerPaths(f *testing.F) {
	for _, s := range []struct{ method, target, body string }{
		{"GET", "/containerLogs/ns/web/main", ""},
		{"GET", "/containerLogs/ns/web/main?tailLines=2&timestamps=true&limitBytes=10", ""},
		{"GET", "/containerLogs/ns/web/main?follow=true&sinceSeconds=5", ""},
		{"GET", "/containerLogs/ns/web/main?previous=true&follow=1", ""},
		{"GET", "/containerLogs/ns/web/main?sinceTime=2026-01-01T00:00:02Z&sinceSeconds=5", ""},
		{"GET", "/containerLogs/ns/web/main?tailLines=-1&limitBytes=0&sinceSeconds=-9223372036854775808", ""},
		{"GET", "/containerLogs/ns/web/setup?tailLines=9223372036854775807", ""},
		{"GET", "/containerLogs/ns/web/dbg?follow=true", ""},
		{"GET", "/containerLogs/ns/web/..%2F..%2F..%2Foutside", ""},
		{"GET", "/containerLogs/ns/web/%2E%2E", ""},
		{"GET", "/containerLogs/ns/web/main/../../../0.log", ""},
		{"GET", "/containerLogs/a/b/%2e%2e", ""},
		{"GET", "/containerLogs/a/b/.", ""},
		{"GET", "/containerLogs/s/t/main", ""},
		{"GET", "/containerLogs/v/w/main", ""},
		{"GET", "/containerLogs/p/q/main", ""},
		{"GET", "/containerLogs/i%2Fj/k/main", ""},
		{"GET", "/containerLogs/f/g/..%2F..", ""},
		{"POST", "/exec/ns/web/main?command=sh&command=-c&command=cat&input=1&output=1&error=1&tty=1", ""},
		{"GET", "/exec/ns/web/uid1/main?command=true", ""},
		{"POST", "/exec/ns/web/wronguid/main?command=true", ""},
		{"POST", "/exec/ns/web/waiting?command=true", ""},
		{"GET", "/attach/ns/web/dbg?input=1&output=1", ""},
		{"POST", "/portForward/ns/web?port=80&port=99999", ""},
		{"GET", "/portForward/ns/web/uid1?port=8080", ""},
		{"POST", "/portForward/ns/web?port=%20%2B80", ""},
		{"POST", "/run/ns/web/main?cmd=echo+hi", ""},
		{"POST", "/run/ns/web/uid1/main?cmd=", ""},
		{"GET", "/stats/summary?only_cpu_and_memory=true", ""},
		{"POST", "/stats/summary", "only_cpu_and_memory=true"},
		{"POST", "/stats/summary", "%zz=1"},
		{"POST", "/stats/summary?%zz", ""},
		{"GET", "/pods/", ""},
		{"DELETE", "/pods", ""},
		{"GET", "/healthz/anything", ""},
		{"GET", "/metrics/resource", ""},
		{"GET", "/configz", ""},
		{"GET", "/logs/../exec/ns/web/main?command=id", ""},
		{"GET", "/stats%2F..%2Fexec/ns/web/main?command=id", ""},
		{"GET", "//exec/ns/web/main?command=id", ""},
		{"GET", "http://node1/exec/ns/web/main?command=id", ""},
		{"OPTIONS", "*", ""},
		{"GET", "/exec/ns/web/main/extra/segments?command=id", ""},
		{"PATCH", "/run/ns/web/main?cmd=id", ""},
	} {
		f.Add(s.method, s.target, s.body)
	}
	fx := newFzFixture(f)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "stream")
	}))
	f.Cleanup(backend.Close)
	rt := &fzRuntime{base: backend.URL}
	authz := &fzAuthz{}
	config := func(pods []*v1.Pod) Config {
		return Config{NodeName: "node1", Authenticator: NewAuthenticator(AuthnConfig{Anonymous: true}), Authorizer: authz,
			Pods: func() ([]*v1.Pod, error) { return pods, nil }, Runtime: rt, Stats: fzStats{}, PodLogsDir: fx.logs,
			Metrics:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "kubelet_running_pods 1\n") }),
			Resource: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "node_cpu_usage_seconds_total 1\n") }),
			Configz:  func() any { return map[string]any{"kubeletconfig": map[string]int{"port": 10250}} },
			Logger:   zap.NewNop()}
	}
	valid, err := New(config(fx.pods))
	if err != nil {
		f.Fatal(err)
	}
	hostile, err := New(config(append(append([]*v1.Pod{}, fx.pods...), fx.hostile...)))
	if err != nil {
		f.Fatal(err)
	}
	readOnly, err := ReadOnly(config(fx.pods))
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, method, target, body string) {
		// One request line: line breaks taken out of the fuzzed parts, a
		// method without blanks (GET when none is left; CONNECT has a
		// request line of its own).
		method = strings.Map(func(r rune) rune {
			if r == '\r' || r == '\n' || r == ' ' || r == '\t' {
				return -1
			}
			return r
		}, method)
		if method == "" || method == "CONNECT" {
			method = "GET"
		}
		target = strings.NewReplacer("\r", "", "\n", "").Replace(target)
		serve := func(h http.Handler) (*httptest.ResponseRecorder, bool) {
			raw := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: node1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s",
				method, target, len(body), body)
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				return nil, false // net/http answers 400 itself
			}
			// A followed log ends when the client goes; a log read that
			// does not follow does not look at its context.
			if strings.HasPrefix(r.URL.Path, "/containerLogs/") {
				ctx, cancel := context.WithCancel(r.Context())
				defer cancel()
				stop := time.AfterFunc(20*time.Millisecond, cancel)
				defer stop.Stop()
				r = r.WithContext(ctx)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec, true
		}
		describe := func(rec *httptest.ResponseRecorder) string {
			b := rec.Body.String()
			if len(b) > 300 {
				b = b[:300] + "…"
			}
			return fmt.Sprintf("%s %q: %d %q", method, target, rec.Code, b)
		}

		rt.take()
		authz.take()
		rec, ok := serve(valid.Handler())
		if !ok {
			return
		}
		if rec.Code >= 500 {
			t.Fatalf("server error for a request on valid pods: %s", describe(rec))
		}
		calls, allowed := rt.take(), authz.take()
		out := rec.Body.String()
		if (calls > 0 || strings.Contains(out, fzLogMark)) && allowed != "proxy" {
			t.Fatalf("reached the runtime (%d calls) or a log, authorized as nodes/%s, not nodes/proxy: %s", calls, allowed, describe(rec))
		}
		if strings.Contains(out, fzCanary) {
			t.Fatalf("a file outside the pod logs was read: %s", describe(rec))
		}

		rec, _ = serve(hostile.Handler())
		if strings.Contains(rec.Body.String(), fzCanary) {
			t.Fatalf("a file outside the pod logs was read: %s", describe(rec))
		}
		rt.take()
		authz.take()

		rec, _ = serve(readOnly)
		if rec.Code >= 500 {
			t.Fatalf("read-only port: server error: %s", describe(rec))
		}
		if calls := rt.take(); calls > 0 || strings.Contains(rec.Body.String(), fzLogMark) {
			t.Fatalf("read-only port reached the runtime (%d calls) or a log: %s", calls, describe(rec))
		}
	})
}
