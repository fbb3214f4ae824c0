package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// debuggedPod has an ephemeral container "dbg" (kubectl debug -it, so a
// TTY and stdin) in its spec and its published status.
var debuggedPod = &v1.Pod{
	ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid1"},
	Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "main"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
			Name: "dbg", Stdin: true, TTY: true}, TargetContainerName: "main"}},
	},
	Status: v1.PodStatus{Phase: v1.PodRunning,
		ContainerStatuses:          []v1.ContainerStatus{{Name: "main", ContainerID: "containerd://c1"}},
		EphemeralContainerStatuses: []v1.ContainerStatus{{Name: "dbg", ContainerID: "containerd://e1", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}},
	},
}

// kubectl attach, exec and logs reach an ephemeral container by its name,
// as the app containers: through the published status and spec.
func TestEphemeralContainerStreamsAndLogs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ns_web_uid1", "dbg")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	log := "2026-01-01T00:00:01.000000000Z stdout F PID   USER     TIME  COMMAND\n" +
		"2026-01-01T00:00:01.000000001Z stdout F     1 root      0:00 sh -c while true; do sleep 1; done\n"
	if err := os.WriteFile(filepath.Join(dir, "0.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	backend := upgradeBackend(t)
	defer backend.Close()
	rt := &fakeRuntime{base: backend.URL}
	s, err := New(Config{PodLogsDir: root, NodeName: "node1", Authenticator: NewAuthenticator(AuthnConfig{Anonymous: true}), Authorizer: AlwaysAllow{},
		Pods: func() ([]*v1.Pod, error) { return []*v1.Pod{debuggedPod}, nil }, Runtime: rt, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	upgrade := func(method, path string) string {
		t.Helper()
		conn, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: node1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\nContent-Length: 0\r\n\r\n", method, path)
		status, _ := bufio.NewReader(conn).ReadString('\n')
		return strings.TrimSpace(status)
	}
	// Attach: its TTY is its spec's.
	if status := upgrade("POST", "/attach/ns/web/dbg?input=1&output=1"); !strings.Contains(status, "101") {
		t.Fatalf("attach to dbg: %q", status)
	}
	want := &runtimeapi.AttachRequest{ContainerId: "e1", Stdin: true, Stdout: true, Tty: true}
	if len(rt.attachs) != 1 || rt.attachs[0].String() != want.String() {
		t.Errorf("CRI attach requests %v; want %v", rt.attachs, want)
	}
	if status := upgrade("POST", "/exec/ns/web/dbg?command=ps&output=1"); !strings.Contains(status, "101") {
		t.Fatalf("exec in dbg: %q", status)
	}
	if len(rt.execs) != 1 || rt.execs[0].ContainerId != "e1" {
		t.Errorf("CRI exec requests %v; want one in e1", rt.execs)
	}

	resp, err := http.Get(ts.URL + "/containerLogs/ns/web/dbg")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "sh -c while true; do sleep 1; done") {
		t.Errorf("logs of dbg: %d %q", resp.StatusCode, b)
	}
}
