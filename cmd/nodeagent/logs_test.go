package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func logsPod(ns, name, node string, containers ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)}, Spec: v1.PodSpec{NodeName: node}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
	}
	return p
}

func TestFindPod(t *testing.T) {
	pods := []*v1.Pod{
		logsPod("default", "web-n1", "n1", "app"),
		logsPod("default", "db", "n1", "app"),
		logsPod("other", "db", "n1", "app"),
	}
	tests := []struct {
		name, ns, want string
		wantPod        string // namespace/name
		wantErr        string
	}{
		{name: "full name", want: "web-n1", wantPod: "default/web-n1"},
		{name: "static pod by its manifest name", want: "web", wantPod: "default/web-n1"},
		{name: "namespace flag", ns: "other", want: "db", wantPod: "other/db"},
		{name: "namespace/name", want: "other/db", wantPod: "other/db"},
		{name: "ambiguous", want: "db", wantErr: "ambiguous, one of: default/db, other/db"},
		{name: "not found", want: "nope", wantErr: `pod "nope" not found`},
		{name: "not in that namespace", ns: "other", want: "web", wantErr: "not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := findPod(pods, tt.ns, tt.want)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Namespace + "/" + p.Name; got != tt.wantPod {
				t.Errorf("found %s, want %s", got, tt.wantPod)
			}
		})
	}
}

func TestPickContainer(t *testing.T) {
	one := logsPod("default", "one", "n1", "app")
	two := logsPod("default", "two", "n1", "app", "side")
	two.Spec.InitContainers = []v1.Container{{Name: "setup"}}
	annotated := logsPod("default", "ann", "n1", "app", "side")
	annotated.Annotations = map[string]string{"kubectl.kubernetes.io/default-container": "side"}
	tests := []struct {
		name    string
		pod     *v1.Pod
		c       string
		want    string
		wantErr string
	}{
		{name: "the only container", pod: one, want: "app"},
		{name: "named", pod: two, c: "side", want: "side"},
		{name: "an init container", pod: two, c: "setup", want: "setup"},
		{name: "the default-container annotation", pod: annotated, want: "side"},
		{name: "several: they are listed", pod: two,
			wantErr: "a container name must be specified for pod two, choose one of: [app side] or one of the init containers: [setup]"},
		{name: "unknown", pod: one, c: "nope", wantErr: `container "nope" is not valid for pod one: one of [app]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pickContainer(tt.pod, tt.c)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestInstanceEnded(t *testing.T) {
	term := func(id string) *v1.ContainerStateTerminated {
		return &v1.ContainerStateTerminated{ContainerID: id}
	}
	status := func(cs v1.ContainerStatus) []*v1.Pod {
		p := logsPod("default", "web", "n1", "app")
		cs.Name = "app"
		p.Status.ContainerStatuses = []v1.ContainerStatus{cs}
		return []*v1.Pod{p}
	}
	uid := logsPod("default", "web", "n1").UID
	tests := []struct {
		name string
		pods []*v1.Pod
		want bool
	}{
		{name: "running", pods: status(v1.ContainerStatus{RestartCount: 2, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}), want: false},
		{name: "status not published yet", pods: status(v1.ContainerStatus{RestartCount: 1, State: v1.ContainerState{Terminated: term("c1")}}), want: false},
		{name: "terminated", pods: status(v1.ContainerStatus{RestartCount: 2, ContainerID: "c2", State: v1.ContainerState{Terminated: term("c2")}}), want: true},
		{name: "waiting to restart after it", pods: status(v1.ContainerStatus{RestartCount: 2, ContainerID: "c2",
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: v1.ContainerState{Terminated: term("c2")}}), want: true},
		{name: "being created, the one before terminated", pods: status(v1.ContainerStatus{RestartCount: 2, ContainerID: "c2",
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}, LastTerminationState: v1.ContainerState{Terminated: term("c1")}}), want: false},
		{name: "a later instance", pods: status(v1.ContainerStatus{RestartCount: 3, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}), want: true},
		{name: "pod gone", pods: nil, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := instanceEnded(tt.pods, uid, "app", 2); got != tt.want {
				t.Errorf("instanceEnded = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseLogsArgs(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    logsCmd
		wantErr string
	}{
		{name: "defaults", args: []string{"web"}, want: logsCmd{tail: -1, podLogs: "/var/log/pods", root: "/var/lib/kubelet", pod: "web"}},
		{name: "flags", args: []string{"-n", "prod", "-c", "app", "-f", "--tail", "5", "--since", "1m", "--limit-bytes", "10", "--status-dir", "/s", "web"},
			want: logsCmd{namespace: "prod", container: "app", follow: true, tail: 5, since: time.Minute, limit: 10,
				podLogs: "/var/log/pods", root: "/var/lib/kubelet", dir: "/s", pod: "web"}},
		{name: "negative since", args: []string{"--since", "-1s", "web"}, wantErr: "--since -1s: must not be negative"},
		{name: "negative limit", args: []string{"--limit-bytes", "-1", "web"}, wantErr: "--limit-bytes -1: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseLogsArgs(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got, cmp.AllowUnexported(logsCmd{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
