package cri_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
)

// execRecorder answers ExecSync with exit codes by command and records
// every command run.
type execRecorder struct {
	mu    sync.Mutex
	cmds  [][]string
	exits map[string]int32
}

func (e *execRecorder) exec(_ string, cmd []string) (*runtimeapi.ExecSyncResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cmds = append(e.cmds, cmd)
	code := e.exits[cmd[len(cmd)-1]]
	return &runtimeapi.ExecSyncResponse{ExitCode: code, Stdout: []byte("out of " + cmd[len(cmd)-1])}, nil
}

func hookPod(post, pre *v1.LifecycleHandler) *v1.Pod {
	p := webPod.DeepCopy()
	p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: post, PreStop: pre}
	return p
}

func execHandler(arg string) *v1.LifecycleHandler {
	return &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", arg}}}
}

func TestPostStartHookRunsAfterStart(t *testing.T) {
	h := newHarness(t)
	ex := &execRecorder{}
	h.fake.SetExec(ex.exec)
	if res := h.sync(hookPod(execHandler("warm-up"), nil)); res.Err != nil {
		t.Fatalf("sync: %+v", res)
	}
	methods := h.fake.Methods()
	start, exec := -1, -1
	for i, m := range methods {
		switch m {
		case "StartContainer":
			start = i
		case "ExecSync":
			exec = i
		}
	}
	if start < 0 || exec < start {
		t.Fatalf("calls %v: want ExecSync (the hook) after StartContainer", methods)
	}
	if len(ex.cmds) != 1 || ex.cmds[0][2] != "warm-up" {
		t.Fatalf("commands %v", ex.cmds)
	}
}

func TestFailedPostStartHookKillsTheContainer(t *testing.T) {
	h := newHarness(t)
	ex := &execRecorder{exits: map[string]int32{"fail": 3}}
	h.fake.SetExec(ex.exec)
	res := h.sync(hookPod(execHandler("fail"), nil))
	w, ok := res.Waiting["app"]
	if !ok || w.Reason != cri.ReasonPostStartHookError {
		t.Fatalf("result %+v, want app waiting with PostStartHookError", res)
	}
	cs := h.fake.Containers()
	if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("containers %+v, want the one killed (kept exited for the restart policy)", cs)
	}
	if got := only[*runtimeapi.StopContainerRequest](h.fake.Calls(), "StopContainer"); len(got) != 1 {
		t.Fatalf("StopContainer calls %v", got)
	}
}

func TestPreStopHookRunsBeforeTheStop(t *testing.T) {
	h := newHarness(t)
	ex := &execRecorder{exits: map[string]int32{"drain": 0}}
	h.fake.SetExec(ex.exec)
	p := hookPod(nil, execHandler("drain"))
	if res := h.sync(p); res.Err != nil {
		t.Fatalf("sync: %+v", res)
	}
	h.fake.ResetCalls()
	if err := h.rt.KillPod(context.Background(), p, h.status(p), 10); err != nil {
		t.Fatal(err)
	}
	methods := h.fake.Methods()
	exec, stop := -1, -1
	for i, m := range methods {
		if m == "ExecSync" && exec < 0 {
			exec = i
		}
		if m == "StopContainer" && stop < 0 {
			stop = i
		}
	}
	if exec < 0 || stop < exec {
		t.Fatalf("calls %v: want the preStop hook before StopContainer", methods)
	}
	if got := only[*runtimeapi.StopContainerRequest](h.fake.Calls(), "StopContainer"); got[0].Timeout != 10 {
		t.Fatalf("stop timeout %d, want the grace period left (10: the fake clock did not move)", got[0].Timeout)
	}
}

func TestHTTPGetHookByNamedPort(t *testing.T) {
	var hits, status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		if r.URL.Path != "/ready" || r.Header.Get("X-Drain") != "yes" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	handler := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1", Path: "/ready", Port: intstr.FromString("web"),
		HTTPHeaders: []v1.HTTPHeader{{Name: "X-Drain", Value: "yes"}}}}
	for _, tc := range []struct {
		status int
		failed bool
	}{{http.StatusOK, false}, {http.StatusServiceUnavailable, true}} {
		status = tc.status
		h := newHarness(t)
		p := hookPod(handler, nil)
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}
		res := h.sync(p)
		if _, failed := res.Waiting["app"]; failed != tc.failed {
			t.Fatalf("status %d: result %+v, want failed=%v", tc.status, res, tc.failed)
		}
	}
	if hits != 2 {
		t.Fatalf("%d requests, want 2", hits)
	}
}
