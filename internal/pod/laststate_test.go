package pod

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestLatestIsLastState(t *testing.T) {
	exited := v1.ContainerStateTerminated{ExitCode: 1, ContainerID: "containerd://b"}
	tests := []struct {
		name string
		cs   v1.ContainerStatus
		want bool
	}{
		{name: "exited, waiting for its restart", cs: v1.ContainerStatus{Name: "c", ContainerID: "containerd://b",
			State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: v1.ContainerState{Terminated: &exited}}, want: true},
		{name: "running after an exit", cs: v1.ContainerStatus{Name: "c", ContainerID: "containerd://c",
			State:                v1.ContainerState{Running: &v1.ContainerStateRunning{}},
			LastTerminationState: v1.ContainerState{Terminated: &exited}}},
		{name: "terminated for good", cs: v1.ContainerStatus{Name: "c", ContainerID: "containerd://b",
			State: v1.ContainerState{Terminated: &exited}}},
		{name: "waiting, never started", cs: v1.ContainerStatus{Name: "c",
			State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}},
		{name: "another container", cs: v1.ContainerStatus{Name: "other", ContainerID: "containerd://b",
			State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: v1.ContainerState{Terminated: &exited}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1.Pod{Status: v1.PodStatus{InitContainerStatuses: []v1.ContainerStatus{tt.cs}}}
			if got := LatestIsLastState(p, "c"); got != tt.want {
				t.Errorf("LatestIsLastState() = %v, want %v", got, tt.want)
			}
		})
	}
}
