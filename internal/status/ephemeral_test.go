package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// withEphemeral adds ephemeral containers of those names, as kubectl
// debug does.
func withEphemeral(p *v1.Pod, names ...string) *v1.Pod {
	p = p.DeepCopy()
	for _, n := range names {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox:1.36"},
			TargetContainerName:      "app",
		})
	}
	return p
}

// ephemeral marks a runtime container as an ephemeral one.
func ephemeral(c *pod.Container) *pod.Container {
	c.Ephemeral = true
	return c
}

// ephemeralView is the table's view of a status: the statusView and the
// ephemeral containers' states.
type ephemeralView struct {
	Pod       statusView
	Ephemeral []string
}

func TestComputeEphemeralContainerStatuses(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		st   *pod.RuntimeStatus
		res  pod.SyncResult
		want ephemeralView
	}{
		{
			name: "added to a running pod, no instance yet",
			pod:  withEphemeral(podAlways, "dbg"),
			st:   runtimeStatus(sbReady, running("app", false)),
			want: ephemeralView{statusView{Phase: v1.PodRunning, Containers: []string{"app running ready"}, Conditions: condsReady},
				[]string{"dbg waiting:ContainerCreating"}},
		},
		{
			name: "its start failed: the reason, and the pod still Running and Ready",
			pod:  withEphemeral(podAlways, "dbg"),
			st:   runtimeStatus(sbReady, running("app", false)),
			res:  waitingFor("dbg", "ErrImagePull"),
			want: ephemeralView{statusView{Phase: v1.PodRunning, Containers: []string{"app running ready"}, Conditions: condsReady},
				[]string{"dbg waiting:ErrImagePull"}},
		},
		{
			name: "running: never ready",
			pod:  withEphemeral(podAlways, "dbg"),
			st:   runtimeStatus(sbReady, ephemeral(running("dbg", false)), running("app", false)),
			want: ephemeralView{statusView{Phase: v1.PodRunning, Containers: []string{"app running ready"}, Conditions: condsReady},
				[]string{"dbg running"}},
		},
		{
			name: "exited 1 under restartPolicy Always: terminated for good, no restart",
			pod:  withEphemeral(podAlways, "dbg"),
			st:   runtimeStatus(sbReady, ephemeral(exited("dbg", false, 1, "")), running("app", false)),
			want: ephemeralView{statusView{Phase: v1.PodRunning, Containers: []string{"app running ready"}, Conditions: condsReady},
				[]string{"dbg terminated:Error:1"}},
		},
		{
			name: "exited 0",
			pod:  withEphemeral(podAlways, "dbg"),
			st:   runtimeStatus(sbReady, ephemeral(exited("dbg", false, 0, "")), running("app", false)),
			want: ephemeralView{statusView{Phase: v1.PodRunning, Containers: []string{"app running ready"}, Conditions: condsReady},
				[]string{"dbg terminated:Completed:0"}},
		},
		{
			name: "created, not started",
			pod:  withEphemeral(podAlways, "dbg"),
			st: runtimeStatus(sbReady, ephemeral(&pod.Container{ID: "c-dbg", SandboxID: "sb1", Name: "dbg", State: pod.ContainerCreated}),
				running("app", false)),
			want: ephemeralView{statusView{Phase: v1.PodRunning, Containers: []string{"app running ready"}, Conditions: condsReady},
				[]string{"dbg waiting:"}},
		},
		{
			name: "running beside an init container: the pod still initialises",
			pod:  withEphemeral(podInit, "dbg"),
			st:   runtimeStatus(sbReady, ephemeral(running("dbg", false)), running("init-0", true)),
			want: ephemeralView{statusView{Phase: v1.PodPending, Init: []string{"init-0 running", "init-1 waiting:PodInitializing"},
				Containers: []string{"app waiting:PodInitializing"}, Conditions: condsInitializing}, []string{"dbg running"}},
		},
		{
			name: "no instance while the pod initialises",
			pod:  withEphemeral(podInit, "dbg"),
			st:   runtimeStatus(sbReady, running("init-0", true)),
			want: ephemeralView{statusView{Phase: v1.PodPending, Init: []string{"init-0 running", "init-1 waiting:PodInitializing"},
				Containers: []string{"app waiting:PodInitializing"}, Conditions: condsInitializing}, []string{"dbg waiting:PodInitializing"}},
		},
		{
			name: "still running when the app container succeeded: the pod Succeeded",
			pod:  withEphemeral(podNever, "dbg"),
			st:   runtimeStatus(sbReady, ephemeral(running("dbg", false)), exited("app", false, 0, "")),
			want: ephemeralView{statusView{Phase: v1.PodSucceeded, Containers: []string{"app terminated:Completed:0"}, Conditions: condsSucceeded},
				[]string{"dbg running"}},
		},
		{
			name: "several: by name, as the kubelet",
			pod:  withEphemeral(podAlways, "zz", "aa"),
			st:   runtimeStatus(sbReady, ephemeral(running("zz", false)), running("app", false)),
			want: ephemeralView{statusView{Phase: v1.PodRunning, Containers: []string{"app running ready"}, Conditions: condsReady},
				[]string{"aa waiting:ContainerCreating", "zz running"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(tt.pod, tt.st, tt.res, "containerd", nil)
			got := ephemeralView{Pod: view(s)}
			for _, cs := range s.EphemeralContainerStatuses {
				got.Ephemeral = append(got.Ephemeral, stateString(cs))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Compute() (-want +got):\n%s", diff)
			}
		})
	}
}

// The whole shape of an ephemeral container's status: IDs, image, no
// restart count, no last state, never ready, no started.
func TestComputeEphemeralContainerStatusShape(t *testing.T) {
	run := ephemeral(running("dbg", false))
	end := ephemeral(exited("dbg", false, 0, ""))
	end.ImageRef = "sha256:dbg"
	tests := []struct {
		name string
		c    *pod.Container
		want v1.ContainerStatus
	}{
		{
			name: "running",
			c:    run,
			want: v1.ContainerStatus{Name: "dbg", Image: "busybox:1.36", ImageID: "sha256:dbg", ContainerID: "containerd://c-dbg",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
		},
		{
			name: "terminated",
			c:    end,
			want: v1.ContainerStatus{Name: "dbg", Image: "busybox:1.36", ImageID: "sha256:dbg", ContainerID: "containerd://c-dbg",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Reason: "Completed", StartedAt: metav1.NewTime(t0),
					FinishedAt: metav1.NewTime(t0.Add(60e9)), ContainerID: "containerd://c-dbg"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Compute(withEphemeral(podAlways, "dbg"), runtimeStatus(sbReady, tt.c, running("app", false)), pod.SyncResult{}, "containerd", nil)
			if len(s.EphemeralContainerStatuses) != 1 {
				t.Fatalf("ephemeralContainerStatuses = %+v, want one", s.EphemeralContainerStatuses)
			}
			if diff := cmp.Diff(tt.want, s.EphemeralContainerStatuses[0]); diff != "" {
				t.Errorf("ephemeral container status (-want +got):\n%s", diff)
			}
			// Not among the app containers' statuses.
			if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].Name != "app" {
				t.Errorf("containerStatuses = %+v, want app's only", s.ContainerStatuses)
			}
		})
	}
}
