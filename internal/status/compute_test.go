package status

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// Pod specs.
var (
	podAlways = &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "app", Image: "nginx:1.25"}},
		},
	}
	podNever     = withPolicy(podAlways, v1.RestartPolicyNever)
	podOnFailure = withPolicy(podAlways, v1.RestartPolicyOnFailure)
	podTwo       = func() *v1.Pod {
		p := podAlways.DeepCopy()
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side", Image: "busybox:1.36"})
		return p
	}()
	podInit = func() *v1.Pod {
		p := podAlways.DeepCopy()
		p.Spec.InitContainers = []v1.Container{{Name: "init-0", Image: "busybox:1.36"}, {Name: "init-1", Image: "busybox:1.36"}}
		return p
	}()
	podInitNever     = withPolicy(podInit, v1.RestartPolicyNever)
	podInitOnFailure = withPolicy(podInit, v1.RestartPolicyOnFailure)
)

func withPolicy(p *v1.Pod, rp v1.RestartPolicy) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.RestartPolicy = rp
	return p
}

// Runtime pieces.
var (
	sbReady = &pod.Sandbox{ID: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, IP: "10.88.0.5", IPs: []string{"10.88.0.5", "fd00::5"}}
	sbDead  = &pod.Sandbox{ID: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, IP: "10.88.0.5"}
)

func running(name string, init bool) *pod.Container {
	return &pod.Container{ID: "c-" + name, SandboxID: "sb1", Name: name, Init: init, State: pod.ContainerRunning,
		ImageRef: "sha256:" + name, StartedAt: t0}
}

func exited(name string, init bool, code int32, reason string) *pod.Container {
	return &pod.Container{ID: "c-" + name, SandboxID: "sb1", Name: name, Init: init, State: pod.ContainerExited,
		ExitCode: code, Reason: reason, StartedAt: t0, FinishedAt: t0.Add(time.Minute)}
}

func runtimeStatus(sb *pod.Sandbox, cs ...*pod.Container) *pod.RuntimeStatus {
	st := &pod.RuntimeStatus{UID: "uid-1", Name: "web", Namespace: "default", Containers: cs}
	if sb != nil {
		st.Sandboxes = []*pod.Sandbox{sb}
	}
	return st
}

func waitingFor(name, reason string) pod.SyncResult {
	var r pod.SyncResult
	r.SetWaiting(name, reason, reason+" message", 10*time.Second)
	return r
}

// statusView is the part of a v1.PodStatus the table compares.
type statusView struct {
	Phase      v1.PodPhase
	Init       []string
	Containers []string
	Conditions map[v1.PodConditionType]string
}

// stateString renders a container status compactly:
// "waiting:Reason", "running", "terminated:Reason:code", with the last
// termination state, restart count and readiness when set.
func stateString(cs v1.ContainerStatus) string {
	var s string
	switch st := cs.State; {
	case st.Waiting != nil:
		s = "waiting:" + st.Waiting.Reason
	case st.Running != nil:
		s = "running"
	case st.Terminated != nil:
		s = fmt.Sprintf("terminated:%s:%d", st.Terminated.Reason, st.Terminated.ExitCode)
	default:
		s = "none"
	}
	if lt := cs.LastTerminationState.Terminated; lt != nil {
		s += fmt.Sprintf(" last=%s:%d", lt.Reason, lt.ExitCode)
	}
	if cs.RestartCount > 0 {
		s += fmt.Sprintf(" restarts=%d", cs.RestartCount)
	}
	if cs.Ready {
		s += " ready"
	}
	return cs.Name + " " + s
}

func view(s v1.PodStatus) statusView {
	v := statusView{Phase: s.Phase, Conditions: map[v1.PodConditionType]string{}}
	for _, cs := range s.InitContainerStatuses {
		v.Init = append(v.Init, stateString(cs))
	}
	for _, cs := range s.ContainerStatuses {
		v.Containers = append(v.Containers, stateString(cs))
	}
	for _, c := range s.Conditions {
		v.Conditions[c.Type] = string(c.Status)
		if c.Reason != "" {
			v.Conditions[c.Type] += ":" + c.Reason
		}
	}
	return v
}

// Condition sets the table expects.
var (
	condsPending = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "False:PodSandboxNotReady", v1.PodInitialized: "True",
		v1.ContainersReady: "False:ContainersNotReady", v1.PodReady: "False:ContainersNotReady", v1.PodScheduled: "True",
	}
	condsSandboxPending = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "True", v1.PodInitialized: "True",
		v1.ContainersReady: "False:ContainersNotReady", v1.PodReady: "False:ContainersNotReady", v1.PodScheduled: "True",
	}
	condsInitializing = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "True", v1.PodInitialized: "False:ContainersNotInitialized",
		v1.ContainersReady: "False:ContainersNotReady", v1.PodReady: "False:ContainersNotReady", v1.PodScheduled: "True",
	}
	condsReady = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "True", v1.PodInitialized: "True",
		v1.ContainersReady: "True", v1.PodReady: "True", v1.PodScheduled: "True",
	}
	condsSucceeded = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "True", v1.PodInitialized: "True:PodCompleted",
		v1.ContainersReady: "False:PodCompleted", v1.PodReady: "False:PodCompleted", v1.PodScheduled: "True",
	}
	condsFailed = map[v1.PodConditionType]string{
		v1.PodReadyToStartContainers: "True", v1.PodInitialized: "True",
		v1.ContainersReady: "False:PodFailed", v1.PodReady: "False:PodFailed", v1.PodScheduled: "True",
	}
)

func TestCompute(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		st   *pod.RuntimeStatus
		res  pod.SyncResult
		want statusView
	}{
		{
			name: "nothing on the runtime yet",
			pod:  podAlways,
			st:   runtimeStatus(nil),
			want: statusView{Phase: v1.PodPending, Containers: []string{"app waiting:ContainerCreating"}, Conditions: condsPending},
		},
		{
			name: "nil runtime status",
			pod:  podAlways,
			want: statusView{Phase: v1.PodPending, Containers: []string{"app waiting:ContainerCreating"}, Conditions: condsPending},
		},
		{
			name: "sandbox ready, image pull failed",
			pod:  podAlways,
			st:   runtimeStatus(sbReady),
			res:  waitingFor("app", "ErrImagePull"),
			want: statusView{Phase: v1.PodPending, Containers: []string{"app waiting:ErrImagePull"}, Conditions: condsSandboxPending},
		},
		{
			name: "image pull backing off",
			pod:  podAlways,
			st:   runtimeStatus(sbReady),
			res:  waitingFor("app", "ImagePullBackOff"),
			want: statusView{Phase: v1.PodPending, Containers: []string{"app waiting:ImagePullBackOff"}, Conditions: condsSandboxPending},
		},
		{
			name: "running",
			pod:  podAlways,
			st:   runtimeStatus(sbReady, running("app", false)),
			want: statusView{Phase: v1.PodRunning, Containers: []string{"app running ready"}, Conditions: condsReady},
		},
		{
			name: "one running, one not started yet",
			pod:  podTwo,
			st:   runtimeStatus(sbReady, running("app", false)),
			want: statusView{Phase: v1.PodPending, Containers: []string{"app running ready", "side waiting:ContainerCreating"}, Conditions: condsSandboxPending},
		},
		{
			name: "running in an old sandbox is not ready",
			pod:  podAlways,
			st: func() *pod.RuntimeStatus {
				c := running("app", false)
				c.SandboxID = "old"
				return runtimeStatus(sbReady, c)
			}(),
			want: statusView{Phase: v1.PodRunning, Containers: []string{"app running"}, Conditions: condsSandboxPending},
		},
		{
			name: "init container running",
			pod:  podInit,
			st:   runtimeStatus(sbReady, running("init-0", true)),
			want: statusView{
				Phase:      v1.PodPending,
				Init:       []string{"init-0 running", "init-1 waiting:PodInitializing"},
				Containers: []string{"app waiting:PodInitializing"},
				Conditions: condsInitializing,
			},
		},
		{
			name: "first init done, second pending",
			pod:  podInit,
			st:   runtimeStatus(sbReady, exited("init-0", true, 0, "")),
			want: statusView{
				Phase:      v1.PodPending,
				Init:       []string{"init-0 terminated:Completed:0 ready", "init-1 waiting:PodInitializing"},
				Containers: []string{"app waiting:PodInitializing"},
				Conditions: condsInitializing,
			},
		},
		{
			name: "inits done, container being created",
			pod:  podInit,
			st:   runtimeStatus(sbReady, exited("init-1", true, 0, ""), exited("init-0", true, 0, "")),
			want: statusView{
				Phase:      v1.PodPending,
				Init:       []string{"init-0 terminated:Completed:0 ready", "init-1 terminated:Completed:0 ready"},
				Containers: []string{"app waiting:ContainerCreating"},
				Conditions: condsSandboxPending,
			},
		},
		{
			name: "inits done, container running",
			pod:  podInit,
			st:   runtimeStatus(sbReady, running("app", false), exited("init-1", true, 0, ""), exited("init-0", true, 0, "")),
			want: statusView{
				Phase:      v1.PodRunning,
				Init:       []string{"init-0 terminated:Completed:0 ready", "init-1 terminated:Completed:0 ready"},
				Containers: []string{"app running ready"},
				Conditions: condsReady,
			},
		},
		{
			name: "init container failed under restartPolicy Never",
			pod:  podInitNever,
			st:   runtimeStatus(sbReady, exited("init-0", true, 1, "")),
			want: statusView{
				Phase:      v1.PodFailed,
				Init:       []string{"init-0 terminated:Error:1", "init-1 waiting:PodInitializing"},
				Containers: []string{"app waiting:PodInitializing"},
				Conditions: map[v1.PodConditionType]string{
					v1.PodReadyToStartContainers: "True", v1.PodInitialized: "False:ContainersNotInitialized",
					v1.ContainersReady: "False:PodFailed", v1.PodReady: "False:PodFailed", v1.PodScheduled: "True",
				},
			},
		},
		{
			name: "init container failed under OnFailure backs off and stays pending",
			pod:  podInitOnFailure,
			st:   runtimeStatus(sbReady, exited("init-0", true, 1, "")),
			res:  waitingFor("init-0", "CrashLoopBackOff"),
			want: statusView{
				Phase:      v1.PodPending,
				Init:       []string{"init-0 waiting:CrashLoopBackOff last=Error:1", "init-1 waiting:PodInitializing"},
				Containers: []string{"app waiting:PodInitializing"},
				Conditions: condsInitializing,
			},
		},
		{
			name: "restartPolicy Never, exit 0",
			pod:  podNever,
			st:   runtimeStatus(sbReady, exited("app", false, 0, "")),
			want: statusView{Phase: v1.PodSucceeded, Containers: []string{"app terminated:Completed:0"}, Conditions: condsSucceeded},
		},
		{
			name: "restartPolicy Never, exit 1",
			pod:  podNever,
			st:   runtimeStatus(sbReady, exited("app", false, 1, "")),
			want: statusView{Phase: v1.PodFailed, Containers: []string{"app terminated:Error:1"}, Conditions: condsFailed},
		},
		{
			name: "restartPolicy Never, sandbox gone after exit 0",
			pod:  podNever,
			st:   runtimeStatus(sbDead, exited("app", false, 0, "")),
			want: statusView{Phase: v1.PodSucceeded, Containers: []string{"app terminated:Completed:0"}, Conditions: func() map[v1.PodConditionType]string {
				c := map[v1.PodConditionType]string{}
				for k, v := range condsSucceeded {
					c[k] = v
				}
				c[v1.PodReadyToStartContainers] = "False:PodSandboxNotReady"
				return c
			}()},
		},
		{
			name: "runtime reason OOMKilled is kept",
			pod:  podNever,
			st:   runtimeStatus(sbReady, exited("app", false, 137, "OOMKilled")),
			want: statusView{Phase: v1.PodFailed, Containers: []string{"app terminated:OOMKilled:137"}, Conditions: condsFailed},
		},
		{
			name: "restartPolicy OnFailure, exit 0",
			pod:  podOnFailure,
			st:   runtimeStatus(sbReady, exited("app", false, 0, "")),
			want: statusView{Phase: v1.PodSucceeded, Containers: []string{"app terminated:Completed:0"}, Conditions: condsSucceeded},
		},
		{
			name: "restartPolicy OnFailure, exit 1, restart due",
			pod:  podOnFailure,
			st:   runtimeStatus(sbReady, exited("app", false, 1, "")),
			want: statusView{Phase: v1.PodRunning, Containers: []string{"app terminated:Error:1"}, Conditions: condsSandboxPending},
		},
		{
			name: "restartPolicy Always, crash loop",
			pod:  podAlways,
			st: func() *pod.RuntimeStatus {
				c := exited("app", false, 1, "")
				c.RestartCount = 3
				return runtimeStatus(sbReady, c)
			}(),
			res:  waitingFor("app", "CrashLoopBackOff"),
			want: statusView{Phase: v1.PodRunning, Containers: []string{"app waiting:CrashLoopBackOff last=Error:1 restarts=3"}, Conditions: condsSandboxPending},
		},
		{
			name: "restartPolicy Always, exit 0, not restarted yet: still Running",
			pod:  podAlways,
			st:   runtimeStatus(sbReady, exited("app", false, 0, "")),
			want: statusView{Phase: v1.PodRunning, Containers: []string{"app terminated:Completed:0"}, Conditions: condsSandboxPending},
		},
		{
			name: "restartPolicy Always, exit 0, backing off: still Running",
			pod:  podAlways,
			st:   runtimeStatus(sbReady, exited("app", false, 0, "")),
			res:  waitingFor("app", "CrashLoopBackOff"),
			want: statusView{Phase: v1.PodRunning, Containers: []string{"app waiting:CrashLoopBackOff last=Completed:0"}, Conditions: condsSandboxPending},
		},
		{
			name: "restarted container shows the previous exit",
			pod:  podAlways,
			st: func() *pod.RuntimeStatus {
				c := running("app", false)
				c.ID, c.RestartCount = "c-app-2", 2
				return runtimeStatus(sbReady, c, exited("app", false, 2, ""))
			}(),
			want: statusView{Phase: v1.PodRunning, Containers: []string{"app running last=Error:2 restarts=2 ready"}, Conditions: condsReady},
		},
		{
			name: "create container error while a container exists",
			pod:  podAlways,
			st: func() *pod.RuntimeStatus {
				c := running("app", false)
				c.State = pod.ContainerCreated
				return runtimeStatus(sbReady, c)
			}(),
			res:  waitingFor("app", "RunContainerError"),
			want: statusView{Phase: v1.PodPending, Containers: []string{"app waiting:RunContainerError"}, Conditions: condsSandboxPending},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.pod, tt.st, tt.res, "containerd", nil)
			if diff := cmp.Diff(tt.want, view(got)); diff != "" {
				t.Errorf("Compute() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputeDetails(t *testing.T) {
	c := exited("app", false, 1, "")
	c.Message = "  boom\n"
	st := runtimeStatus(sbReady, c)
	res := waitingFor("app", "CrashLoopBackOff")
	res.SandboxError = ""
	got := Compute(podAlways, st, res, "containerd", nil)

	if got.PodIP != "10.88.0.5" {
		t.Errorf("PodIP = %q, want the sandbox IP", got.PodIP)
	}
	if diff := cmp.Diff([]v1.PodIP{{IP: "10.88.0.5"}, {IP: "fd00::5"}}, got.PodIPs); diff != "" {
		t.Errorf("PodIPs (-want +got):\n%s", diff)
	}
	cs := got.ContainerStatuses[0]
	if cs.ContainerID != "containerd://c-app" {
		t.Errorf("ContainerID = %q, want containerd://c-app", cs.ContainerID)
	}
	wantLast := &v1.ContainerStateTerminated{
		ExitCode: 1, Reason: "Error", Message: "boom",
		StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0.Add(time.Minute)), ContainerID: "containerd://c-app",
	}
	if diff := cmp.Diff(wantLast, cs.LastTerminationState.Terminated); diff != "" {
		t.Errorf("LastTerminationState.Terminated (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "CrashLoopBackOff message"}, cs.State.Waiting); diff != "" {
		t.Errorf("State.Waiting (-want +got):\n%s", diff)
	}
	if cs.Started == nil || *cs.Started {
		t.Errorf("Started = %v, want false", cs.Started)
	}
}

func TestComputePodIP(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.Pod
		sb     *pod.Sandbox
		wantIP string
	}{
		{name: "ready sandbox", pod: podAlways, sb: sbReady, wantIP: "10.88.0.5"},
		{name: "dead sandbox has no IP", pod: podAlways, sb: sbDead},
		// The Manager, which knows the node's IP, sets it (TestManagerPodIPs).
		{name: "host network: none from the sandbox", pod: func() *v1.Pod { p := podAlways.DeepCopy(); p.Spec.HostNetwork = true; return p }(), sb: sbReady},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.pod, runtimeStatus(tt.sb), pod.SyncResult{}, "containerd", nil)
			if got.PodIP != tt.wantIP {
				t.Errorf("PodIP = %q, want %q", got.PodIP, tt.wantIP)
			}
			if tt.wantIP == "" && got.PodIPs != nil {
				t.Errorf("PodIPs = %v, want none", got.PodIPs)
			}
		})
	}
}

func TestComputeSandboxError(t *testing.T) {
	res := pod.SyncResult{SandboxError: "cni plugin not initialized"}
	got := Compute(podAlways, runtimeStatus(nil), res, "containerd", nil)
	if want := "FailedCreatePodSandBox: cni plugin not initialized"; got.Message != want {
		t.Errorf("Message = %q, want %q", got.Message, want)
	}
	if got.Phase != v1.PodPending {
		t.Errorf("Phase = %q, want Pending", got.Phase)
	}
}

func resources(req, lim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{}
	if req != "" {
		r.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(req), v1.ResourceMemory: resource.MustParse(req + "Mi")}
	}
	if lim != "" {
		r.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse(lim), v1.ResourceMemory: resource.MustParse(lim + "Mi")}
	}
	return r
}

func TestQOSClass(t *testing.T) {
	tests := []struct {
		name  string
		inits []v1.ResourceRequirements
		ctrs  []v1.ResourceRequirements
		want  v1.PodQOSClass
	}{
		{name: "no resources", ctrs: []v1.ResourceRequirements{{}, {}}, want: v1.PodQOSBestEffort},
		{name: "only non-compute resources", ctrs: []v1.ResourceRequirements{{
			Requests: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
		}}, want: v1.PodQOSBestEffort},
		{name: "requests only", ctrs: []v1.ResourceRequirements{resources("1", "")}, want: v1.PodQOSBurstable},
		{name: "requests below limits", ctrs: []v1.ResourceRequirements{resources("1", "2")}, want: v1.PodQOSBurstable},
		{name: "requests equal limits", ctrs: []v1.ResourceRequirements{resources("1", "1"), resources("2", "2")}, want: v1.PodQOSGuaranteed},
		// The API's defaulting (and podsource's) copies limits to requests first.
		{name: "limits only, not defaulted", ctrs: []v1.ResourceRequirements{resources("", "1")}, want: v1.PodQOSBurstable},
		{name: "one container without limits", ctrs: []v1.ResourceRequirements{resources("1", "1"), {}}, want: v1.PodQOSBurstable},
		{name: "cpu limit only", ctrs: []v1.ResourceRequirements{{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
		}}, want: v1.PodQOSBurstable},
		{name: "init container counts", inits: []v1.ResourceRequirements{resources("1", "")}, ctrs: []v1.ResourceRequirements{{}}, want: v1.PodQOSBurstable},
		{name: "guaranteed needs init containers guaranteed too", inits: []v1.ResourceRequirements{resources("1", "2")}, ctrs: []v1.ResourceRequirements{resources("1", "1")}, want: v1.PodQOSBurstable},
		{name: "guaranteed with guaranteed init", inits: []v1.ResourceRequirements{resources("1", "1")}, ctrs: []v1.ResourceRequirements{resources("1", "1")}, want: v1.PodQOSGuaranteed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &v1.Pod{}
			for i, r := range tt.inits {
				p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: fmt.Sprintf("i%d", i), Resources: r})
			}
			for i, r := range tt.ctrs {
				p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprintf("c%d", i), Resources: r})
			}
			if got := Compute(p, nil, pod.SyncResult{}, "containerd", nil).QOSClass; got != tt.want {
				t.Errorf("Compute().QOSClass = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQOSClassZeroLimitIsNotALimit(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("0"), v1.ResourceMemory: resource.MustParse("64Mi")},
	}}}}}
	if got := Compute(p, nil, pod.SyncResult{}, "containerd", nil).QOSClass; got != v1.PodQOSBurstable {
		t.Errorf("QOSClass = %q, want Burstable", got)
	}
}

// Pod-level resources decide the class (the status once said BestEffort
// for such a pod while its cgroup went to the Guaranteed tier).
func TestQOSClassOfPodLevelResources(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}},
		Resources: &v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}}}
	if got := Compute(p, nil, pod.SyncResult{}, "containerd", nil).QOSClass; got != v1.PodQOSGuaranteed {
		t.Errorf("QOSClass = %q, want Guaranteed", got)
	}
}

// A deleted pod's final status: its containers terminated, the phase by
// their exit codes, the conditions the kubelet generates for that phase
// (Ready and ContainersReady PodCompleted or PodFailed, no message).
func TestTerminalStatusOfADeletedPod(t *testing.T) {
	finished := func(toStart string, phase v1.PodPhase) map[v1.PodConditionType]string {
		c := map[v1.PodConditionType]string{v1.PodReadyToStartContainers: toStart, v1.PodScheduled: "True"}
		if phase == v1.PodSucceeded {
			c[v1.PodInitialized], c[v1.ContainersReady], c[v1.PodReady] = "True:PodCompleted", "False:PodCompleted", "False:PodCompleted"
		} else {
			c[v1.PodInitialized], c[v1.ContainersReady], c[v1.PodReady] = "True", "False:PodFailed", "False:PodFailed"
		}
		return c
	}
	for _, tc := range []struct {
		name      string
		p         *v1.Pod
		st        *pod.RuntimeStatus
		phase     v1.PodPhase
		wantCodes []int32
		reasons   []string
		conds     map[v1.PodConditionType]string
	}{
		{"every container exited 0", podTwo, runtimeStatus(sbDead, exited("app", false, 0, ""), exited("side", false, 0, "")),
			v1.PodSucceeded, []int32{0, 0}, []string{"Completed", "Completed"}, finished("False:PodSandboxNotReady", v1.PodSucceeded)},
		{"one exited 143", podTwo, runtimeStatus(sbDead, exited("app", false, 143, ""), exited("side", false, 0, "")),
			v1.PodFailed, []int32{143, 0}, []string{"Error", "Completed"}, finished("False:PodSandboxNotReady", v1.PodFailed)},
		{"a container the runtime no longer has", podTwo, runtimeStatus(sbDead, exited("app", false, 0, "")),
			v1.PodFailed, []int32{0, 137}, []string{"Completed", "ContainerStatusUnknown"}, finished("False:PodSandboxNotReady", v1.PodFailed)},
		{"ready and running when deleted", podTwo, runtimeStatus(sbReady, running("app", false), running("side", false)),
			v1.PodFailed, []int32{137, 137}, []string{"ContainerStatusUnknown", "ContainerStatusUnknown"}, finished("True", v1.PodFailed)},
		{"not initialised when deleted", podInit, runtimeStatus(sbReady, running("init-0", true)),
			v1.PodFailed, []int32{137}, []string{"ContainerStatusUnknown"}, finished("True", v1.PodFailed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := terminal(Compute(tc.p, tc.st, pod.SyncResult{}, "containerd", nil))
			if s.Phase != tc.phase {
				t.Fatalf("phase %s, want %s", s.Phase, tc.phase)
			}
			for i, cs := range s.ContainerStatuses {
				if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != tc.wantCodes[i] || cs.State.Terminated.Reason != tc.reasons[i] || cs.Ready {
					t.Fatalf("container %s: %+v", cs.Name, cs)
				}
			}
			if diff := cmp.Diff(tc.conds, view(s).Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			for _, c := range s.Conditions {
				if c.Type != v1.PodReadyToStartContainers && c.Message != "" {
					t.Errorf("condition %s keeps the message %q", c.Type, c.Message)
				}
			}
		})
	}
}

type verdicts map[string]pod.ProbeResult

func (v verdicts) ProbeResult(_ pod.UID, id string, kind pod.ProbeKind) pod.ProbeResult {
	return v[id+"/"+kind.String()]
}

func condition(s v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// Readiness and startup verdicts drive started, ready, ContainersReady
// and Ready; a sidecar initialises the pod once started and counts for
// readiness; its exit does not end a Never pod.
func TestComputeProbesAndSidecars(t *testing.T) {
	probed := podTwo.DeepCopy()
	probed.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
	probed.Spec.Containers[1].StartupProbe = &v1.Probe{}
	always := v1.ContainerRestartPolicyAlways
	side := podInitNever.DeepCopy()
	side.Spec.InitContainers[0].RestartPolicy = &always
	side.Spec.InitContainers[0].ReadinessProbe = &v1.Probe{}

	tests := []struct {
		name                 string
		pod                  *v1.Pod
		st                   *pod.RuntimeStatus
		verdicts             verdicts
		phase                v1.PodPhase
		initialized, ready   v1.ConditionStatus
		started, readyByName map[string]bool
	}{
		{
			name: "no verdicts: not started, not ready", pod: probed,
			st:    runtimeStatus(sbReady, running("app", false), running("side", false)),
			phase: v1.PodRunning, initialized: v1.ConditionTrue, ready: v1.ConditionFalse,
			started: map[string]bool{"app": true, "side": false}, readyByName: map[string]bool{"app": false, "side": false},
		},
		{
			name: "ready and started", pod: probed,
			st:       runtimeStatus(sbReady, running("app", false), running("side", false)),
			verdicts: verdicts{"c-app/Readiness": pod.ProbeSuccess, "c-side/Startup": pod.ProbeSuccess},
			phase:    v1.PodRunning, initialized: v1.ConditionTrue, ready: v1.ConditionTrue,
			started: map[string]bool{"app": true, "side": true}, readyByName: map[string]bool{"app": true, "side": true},
		},
		{
			name: "readiness failed", pod: probed,
			st:       runtimeStatus(sbReady, running("app", false), running("side", false)),
			verdicts: verdicts{"c-app/Readiness": pod.ProbeFailure, "c-side/Startup": pod.ProbeSuccess},
			phase:    v1.PodRunning, initialized: v1.ConditionTrue, ready: v1.ConditionFalse,
			started: map[string]bool{"app": true, "side": true}, readyByName: map[string]bool{"app": false, "side": true},
		},
		{
			name: "sidecar started, plain init running: initialising", pod: side,
			st:    runtimeStatus(sbReady, running("init-1", true), running("init-0", true)),
			phase: v1.PodPending, initialized: v1.ConditionFalse, ready: v1.ConditionFalse,
			started: map[string]bool{"init-0": true}, readyByName: map[string]bool{"init-0": false},
		},
		{
			name: "sidecar ready beside the app", pod: side,
			st:       runtimeStatus(sbReady, running("app", false), exited("init-1", true, 0, ""), running("init-0", true)),
			verdicts: verdicts{"c-init-0/Readiness": pod.ProbeSuccess},
			phase:    v1.PodRunning, initialized: v1.ConditionTrue, ready: v1.ConditionTrue,
			readyByName: map[string]bool{"init-0": true, "app": true},
		},
		{
			name: "sidecar not ready: the pod is not", pod: side,
			st:    runtimeStatus(sbReady, running("app", false), exited("init-1", true, 0, ""), running("init-0", true)),
			phase: v1.PodRunning, initialized: v1.ConditionTrue, ready: v1.ConditionFalse,
			readyByName: map[string]bool{"init-0": false, "app": true},
		},
		{
			name: "Never pod: app succeeded, sidecar stopped (137): Succeeded", pod: side,
			st:    runtimeStatus(sbReady, exited("app", false, 0, ""), exited("init-1", true, 0, ""), exited("init-0", true, 137, "")),
			phase: v1.PodSucceeded, initialized: v1.ConditionTrue, ready: v1.ConditionFalse,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.pod, tt.st, pod.SyncResult{}, "containerd", tt.verdicts)
			if got.Phase != tt.phase {
				t.Errorf("phase %s, want %s", got.Phase, tt.phase)
			}
			if c := condition(got, v1.PodInitialized); c != tt.initialized {
				t.Errorf("Initialized %s, want %s", c, tt.initialized)
			}
			if c := condition(got, v1.PodReady); c != tt.ready {
				t.Errorf("Ready %s, want %s", c, tt.ready)
			}
			if c := condition(got, v1.ContainersReady); c != tt.ready {
				t.Errorf("ContainersReady %s, want %s", c, tt.ready)
			}
			for _, cs := range append(got.InitContainerStatuses, got.ContainerStatuses...) {
				if want, ok := tt.started[cs.Name]; ok && (cs.Started == nil || *cs.Started != want) {
					t.Errorf("%s started %v, want %v", cs.Name, cs.Started, want)
				}
				if want, ok := tt.readyByName[cs.Name]; ok && cs.Ready != want {
					t.Errorf("%s ready %v, want %v", cs.Name, cs.Ready, want)
				}
			}
		})
	}
}

// Init container statuses as the prober manager's UpdatePodStatus sets
// them: a plain init container is ready once it completed (exit 0) and
// started only while running; a sidecar is started once running and past
// its startup probe, ready once started and past its readiness probe.
func TestComputeInitContainerStatuses(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	sidecar := func(startup, readiness bool) *v1.Pod {
		p := podInit.DeepCopy()
		p.Spec.InitContainers = p.Spec.InitContainers[:1]
		p.Spec.InitContainers[0].RestartPolicy = &always
		if startup {
			p.Spec.InitContainers[0].StartupProbe = &v1.Probe{}
		}
		if readiness {
			p.Spec.InitContainers[0].ReadinessProbe = &v1.Probe{}
		}
		return p
	}
	backingOff := waitingFor("init-0", "CrashLoopBackOff")

	tests := []struct {
		name           string
		pod            *v1.Pod
		st             *pod.RuntimeStatus
		res            pod.SyncResult
		verdicts       verdicts
		started, ready bool
	}{
		{name: "plain: completed", pod: podInit, st: runtimeStatus(sbReady, exited("init-0", true, 0, "")), ready: true},
		{name: "plain: completed in an old sandbox", pod: podInit, st: func() *pod.RuntimeStatus {
			c := exited("init-0", true, 0, "")
			c.SandboxID = "old"
			return runtimeStatus(sbReady, c)
		}(), ready: true},
		{name: "plain: failed", pod: podInitNever, st: runtimeStatus(sbReady, exited("init-0", true, 1, ""))},
		{name: "plain: failed, backing off", pod: podInitOnFailure, st: runtimeStatus(sbReady, exited("init-0", true, 1, "")), res: backingOff},
		{name: "plain: running", pod: podInit, st: runtimeStatus(sbReady, running("init-0", true)), started: true},
		{name: "plain: not created yet", pod: podInit, st: runtimeStatus(sbReady)},
		{name: "sidecar without probes: running", pod: sidecar(false, false), st: runtimeStatus(sbReady, running("init-0", true)),
			started: true, ready: true},
		{name: "sidecar: startup probe not passed yet", pod: sidecar(true, true), st: runtimeStatus(sbReady, running("init-0", true)),
			verdicts: verdicts{"c-init-0/Readiness": pod.ProbeSuccess}},
		{name: "sidecar: started, readiness not passed yet", pod: sidecar(true, true), st: runtimeStatus(sbReady, running("init-0", true)),
			verdicts: verdicts{"c-init-0/Startup": pod.ProbeSuccess}, started: true},
		{name: "sidecar: started and ready", pod: sidecar(true, true), st: runtimeStatus(sbReady, running("init-0", true)),
			verdicts: verdicts{"c-init-0/Startup": pod.ProbeSuccess, "c-init-0/Readiness": pod.ProbeSuccess}, started: true, ready: true},
		{name: "sidecar: readiness failed", pod: sidecar(false, true), st: runtimeStatus(sbReady, running("init-0", true)),
			verdicts: verdicts{"c-init-0/Readiness": pod.ProbeFailure}, started: true},
		{name: "sidecar: exited 0 is neither", pod: sidecar(false, false), st: runtimeStatus(sbReady, exited("init-0", true, 0, ""))},
		{name: "sidecar: running in an old sandbox is not ready", pod: sidecar(false, false), st: func() *pod.RuntimeStatus {
			c := running("init-0", true)
			c.SandboxID = "old"
			return runtimeStatus(sbReady, c)
		}(), started: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.pod, tt.st, tt.res, "containerd", tt.verdicts).InitContainerStatuses[0]
			if got.Started == nil || *got.Started != tt.started {
				t.Errorf("started = %v, want %v", got.Started, tt.started)
			}
			if got.Ready != tt.ready {
				t.Errorf("ready = %v, want %v", got.Ready, tt.ready)
			}
		})
	}
}

// condView is a condition as the kubelet generates it, without times.
type condView struct {
	Type       v1.PodConditionType
	Status     v1.ConditionStatus
	Reason     string
	Message    string
	Generation int64
}

func condViews(cs []v1.PodCondition) []condView {
	var out []condView
	for _, c := range cs {
		out = append(out, condView{c.Type, c.Status, c.Reason, c.Message, c.ObservedGeneration})
	}
	return out
}

// The conditions with the kubelet's reasons and messages
// (pkg/kubelet/status/generate.go), in the order Compute emits them.
func TestComputeConditions(t *testing.T) {
	const gen = 3
	withGen := func(p *v1.Pod) *v1.Pod {
		p = p.DeepCopy()
		p.Generation = gen
		return p
	}
	always := v1.ContainerRestartPolicyAlways
	// init-0 a sidecar with a startup probe, init-1 plain, then app.
	sidecarPod := withGen(podInit)
	sidecarPod.Spec.InitContainers[0].RestartPolicy = &always
	sidecarPod.Spec.InitContainers[0].StartupProbe = &v1.Probe{}
	hostNet := withGen(podAlways)
	hostNet.Spec.HostNetwork = true
	sbNoIP := &pod.Sandbox{ID: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY}
	gated := func(conds ...v1.PodCondition) *v1.Pod {
		p := withGen(podAlways)
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
		p.Status.Conditions = append([]v1.PodCondition{
			// Stale conditions of the node's own are not the pod's gates.
			{Type: v1.PodReady, Status: v1.ConditionTrue},
		}, conds...)
		return p
	}
	lbTrue := v1.PodCondition{Type: "example.com/lb", Status: v1.ConditionTrue}
	lbFalse := v1.PodCondition{Type: "example.com/lb", Status: v1.ConditionFalse}
	dnsTrue := v1.PodCondition{Type: "example.com/dns", Status: v1.ConditionTrue}
	dnsUnknown := v1.PodCondition{Type: "example.com/dns", Status: v1.ConditionUnknown}

	toStart := condView{v1.PodReadyToStartContainers, v1.ConditionTrue, "", "", gen}
	initialized := condView{v1.PodInitialized, v1.ConditionTrue, "", "", gen}
	scheduled := condView{v1.PodScheduled, v1.ConditionTrue, "", "", gen}
	ready := []condView{{v1.ContainersReady, v1.ConditionTrue, "", "", gen}, {v1.PodReady, v1.ConditionTrue, "", "", gen}}
	notReady := func(msg string) []condView {
		return []condView{
			{v1.ContainersReady, v1.ConditionFalse, "ContainersNotReady", msg, gen},
			{v1.PodReady, v1.ConditionFalse, "ContainersNotReady", msg, gen},
		}
	}
	gatesNotReady := func(msg string) []condView {
		return []condView{{v1.ContainersReady, v1.ConditionTrue, "", "", gen}, {v1.PodReady, v1.ConditionFalse, "ReadinessGatesNotReady", msg, gen}}
	}
	sandbox := func(msg string) condView {
		return condView{v1.PodReadyToStartContainers, v1.ConditionFalse, "PodSandboxNotReady", msg, gen}
	}
	notInitialized := func(msg string) condView {
		return condView{v1.PodInitialized, v1.ConditionFalse, "ContainersNotInitialized", msg, gen}
	}
	join := func(parts ...any) []condView {
		var out []condView
		for _, p := range parts {
			switch v := p.(type) {
			case condView:
				out = append(out, v)
			case []condView:
				out = append(out, v...)
			}
		}
		return out
	}

	tests := []struct {
		name     string
		pod      *v1.Pod
		st       *pod.RuntimeStatus
		verdicts verdicts
		want     []condView
	}{
		{
			name: "no sandbox yet",
			pod:  withGen(podAlways), st: runtimeStatus(nil),
			want: join(sandbox("no pod sandbox exists"), initialized, notReady("containers with unready status: [app]"), scheduled),
		},
		{
			name: "sandbox stopped",
			pod:  withGen(podAlways), st: runtimeStatus(sbDead),
			want: join(sandbox("pod sandbox is not ready"), initialized, notReady("containers with unready status: [app]"), scheduled),
		},
		{
			name: "ready sandbox without an IP",
			pod:  withGen(podAlways), st: runtimeStatus(sbNoIP, running("app", false)),
			want: join(sandbox("pod sandbox has no IP address"), initialized, ready, scheduled),
		},
		{
			name: "hostNetwork: a ready sandbox needs no IP",
			pod:  hostNet, st: runtimeStatus(sbNoIP, running("app", false)),
			want: join(toStart, initialized, ready, scheduled),
		},
		{
			name: "two containers not ready",
			pod:  withGen(podTwo), st: runtimeStatus(sbReady),
			want: join(toStart, initialized, notReady("containers with unready status: [app side]"), scheduled),
		},
		{
			name: "init containers incomplete",
			pod:  withGen(podInit), st: runtimeStatus(sbReady, running("init-0", true)),
			want: join(toStart, notInitialized("containers with incomplete status: [init-0 init-1]"),
				notReady("containers with unready status: [app]"), scheduled),
		},
		{
			name: "first init container done",
			pod:  withGen(podInit), st: runtimeStatus(sbReady, exited("init-0", true, 0, "")),
			want: join(toStart, notInitialized("containers with incomplete status: [init-1]"),
				notReady("containers with unready status: [app]"), scheduled),
		},
		{
			name: "sidecar running but not started: incomplete, and unready first",
			pod:  sidecarPod, st: runtimeStatus(sbReady, running("init-0", true)),
			want: join(toStart, notInitialized("containers with incomplete status: [init-0 init-1]"),
				notReady("containers with unready status: [init-0 app]"), scheduled),
		},
		{
			name: "sidecar started, plain init done, app running: ready",
			pod:  sidecarPod, st: runtimeStatus(sbReady, running("app", false), exited("init-1", true, 0, ""), running("init-0", true)),
			verdicts: verdicts{"c-init-0/Startup": pod.ProbeSuccess},
			want:     join(toStart, initialized, ready, scheduled),
		},
		{
			name: "sidecar restarting after the app started: still initialised",
			pod:  sidecarPod, st: runtimeStatus(sbReady, running("app", false), exited("init-1", true, 0, ""), exited("init-0", true, 1, "")),
			want: join(toStart, initialized, notReady("containers with unready status: [init-0]"), scheduled),
		},
		{
			name: "Succeeded",
			pod:  withGen(podNever), st: runtimeStatus(sbReady, exited("app", false, 0, "")),
			want: join(toStart, condView{v1.PodInitialized, v1.ConditionTrue, "PodCompleted", "", gen},
				condView{v1.ContainersReady, v1.ConditionFalse, "PodCompleted", "", gen},
				condView{v1.PodReady, v1.ConditionFalse, "PodCompleted", "", gen}, scheduled),
		},
		{
			name: "Failed",
			pod:  withGen(podNever), st: runtimeStatus(sbReady, exited("app", false, 1, "")),
			want: join(toStart, initialized,
				condView{v1.ContainersReady, v1.ConditionFalse, "PodFailed", "", gen},
				condView{v1.PodReady, v1.ConditionFalse, "PodFailed", "", gen}, scheduled),
		},
		{
			name: "Failed in an init container: not initialised",
			pod:  withGen(podInitNever), st: runtimeStatus(sbReady, exited("init-0", true, 1, "")),
			want: join(toStart, notInitialized("containers with incomplete status: [init-0 init-1]"),
				condView{v1.ContainersReady, v1.ConditionFalse, "PodFailed", "", gen},
				condView{v1.PodReady, v1.ConditionFalse, "PodFailed", "", gen}, scheduled),
		},
		{
			name: "readiness gates: conditions missing",
			pod:  gated(), st: runtimeStatus(sbReady, running("app", false)),
			want: join(toStart, initialized, gatesNotReady(`corresponding condition of pod readiness gate "example.com/lb" does not exist., `+
				`corresponding condition of pod readiness gate "example.com/dns" does not exist.`), scheduled),
		},
		{
			name: "readiness gates: one False, one missing",
			pod:  gated(lbFalse), st: runtimeStatus(sbReady, running("app", false)),
			want: join(toStart, initialized, gatesNotReady(`the status of pod readiness gate "example.com/lb" is not "True", but False, `+
				`corresponding condition of pod readiness gate "example.com/dns" does not exist.`), scheduled),
		},
		{
			name: "readiness gates: one Unknown",
			pod:  gated(lbTrue, dnsUnknown), st: runtimeStatus(sbReady, running("app", false)),
			want: join(toStart, initialized, gatesNotReady(`the status of pod readiness gate "example.com/dns" is not "True", but Unknown`), scheduled),
		},
		{
			name: "readiness gates: all True",
			pod:  gated(dnsTrue, lbTrue), st: runtimeStatus(sbReady, running("app", false)),
			want: join(toStart, initialized, ready, scheduled),
		},
		{
			name: "readiness gates: containers not ready say so first",
			pod:  gated(), st: runtimeStatus(sbReady),
			want: join(toStart, initialized, notReady("containers with unready status: [app]"), scheduled),
		},
		{
			name: "no generation (a static pod)",
			pod:  podAlways, st: runtimeStatus(sbReady, running("app", false)),
			want: []condView{
				{v1.PodReadyToStartContainers, v1.ConditionTrue, "", "", 0}, {v1.PodInitialized, v1.ConditionTrue, "", "", 0},
				{v1.ContainersReady, v1.ConditionTrue, "", "", 0}, {v1.PodReady, v1.ConditionTrue, "", "", 0},
				{v1.PodScheduled, v1.ConditionTrue, "", "", 0},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compute(tt.pod, tt.st, pod.SyncResult{}, "containerd", tt.verdicts)
			// The gates' conditions are read, never emitted.
			if diff := cmp.Diff(tt.want, condViews(got.Conditions)); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

// Containers without a status at all (the kubelet's "unknown") come first
// in the messages; without any status the reason is
// UnknownContainerStatuses.
func TestConditionsOfUnknownStatuses(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := podInit.DeepCopy()
	p.Spec.InitContainers[0].RestartPolicy = &always // init-0 a sidecar
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side"})
	f := false
	known := []v1.ContainerStatus{{Name: "init-1"}, {Name: "side", Started: &f}}

	tests := []struct {
		name     string
		statuses []v1.ContainerStatus
		phase    v1.PodPhase
		init     condView
		ready    condView
	}{
		{
			name: "no statuses", phase: v1.PodPending,
			init:  condView{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: "UnknownContainerStatuses"},
			ready: condView{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "UnknownContainerStatuses"},
		},
		{
			name: "some unknown", statuses: known, phase: v1.PodPending,
			init: condView{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: "ContainersNotInitialized",
				Message: "containers with unknown status: [init-0], containers with incomplete status: [init-1]"},
			ready: condView{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady",
				Message: "containers with unknown status: [init-0 app], containers with unready status: [side]"},
		},
		{
			name: "Succeeded with some unknown is not PodCompleted", statuses: known, phase: v1.PodSucceeded,
			init: condView{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: "ContainersNotInitialized",
				Message: "containers with unknown status: [init-0], containers with incomplete status: [init-1]"},
			ready: condView{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "ContainersNotReady",
				Message: "containers with unknown status: [init-0 app], containers with unready status: [side]"},
		},
		{
			name: "Failed with some unknown is PodFailed", statuses: known, phase: v1.PodFailed,
			init: condView{Type: v1.PodInitialized, Status: v1.ConditionFalse, Reason: "ContainersNotInitialized",
				Message: "containers with unknown status: [init-0], containers with incomplete status: [init-1]"},
			ready: condView{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: "PodFailed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := condViews([]v1.PodCondition{initializedCondition(p, tt.statuses, tt.phase), containersReadyCondition(p, tt.statuses, tt.phase)})
			if diff := cmp.Diff([]condView{tt.init, tt.ready}, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}
