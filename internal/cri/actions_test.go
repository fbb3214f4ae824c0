package cri

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
)

const specHash = "hash-1"

// Pod specs for computeActions.
var (
	actPod = &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "app", Image: "nginx:1.25"}, {Name: "side", Image: "busybox:1.36"}},
		},
	}
	actPodInit = func() *v1.Pod {
		p := actPod.DeepCopy()
		p.Spec.InitContainers = []v1.Container{{Name: "init-0", Image: "busybox:1.36"}, {Name: "init-1", Image: "busybox:1.36"}}
		return p
	}()
)

func policy(p *v1.Pod, rp v1.RestartPolicy) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.RestartPolicy = rp
	return p
}

func sb(id string, attempt uint32, ready bool) *pod.Sandbox {
	s := &pod.Sandbox{ID: id, Attempt: attempt, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, SpecHash: specHash}
	if ready {
		s.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return s
}

// ctrIn is a runtime container of actPod/actPodInit's spec named name, in
// sandbox sbID, with the spec's hash.
func ctrIn(sbID, name string, state pod.ContainerState, exitCode int32) *pod.Container {
	c := &pod.Container{ID: sbID + "-" + name, SandboxID: sbID, Name: name, State: state, ExitCode: exitCode}
	for i := range actPodInit.Spec.InitContainers {
		if s := &actPodInit.Spec.InitContainers[i]; s.Name == name {
			c.Init, c.Hash = true, HashContainer(s)
		}
	}
	for i := range actPod.Spec.Containers {
		if s := &actPod.Spec.Containers[i]; s.Name == name {
			c.Hash = HashContainer(s)
		}
	}
	return c
}

const (
	running = pod.ContainerRunning
	exited  = pod.ContainerExited
	created = pod.ContainerCreated
)

func rs(sandboxes []*pod.Sandbox, cs ...*pod.Container) *pod.RuntimeStatus {
	return &pod.RuntimeStatus{UID: "uid-1", Name: "web", Namespace: "default", Sandboxes: sandboxes, Containers: cs}
}

func sbList(s ...*pod.Sandbox) []*pod.Sandbox { return s }

func TestComputeActions(t *testing.T) {
	changedApp := ctrIn("sb1", "app", running, 0)
	changedApp.Hash = "old-hash"
	strayRunning := &pod.Container{ID: "sb1-gone", SandboxID: "sb1", Name: "gone", State: running}
	oldSandboxApp := ctrIn("sb1", "app", running, 0)

	tests := []struct {
		name     string
		pod      *v1.Pod
		specHash string
		st       *pod.RuntimeStatus
		want     actions
	}{
		// No usable sandbox.
		{
			name: "no sandbox: create one and start every container",
			pod:  actPod,
			st:   rs(nil),
			want: actions{createSandbox: true, start: []int{0, 1}},
		},
		{
			name: "no sandbox with init containers: start the first init container only",
			pod:  actPodInit,
			st:   rs(nil),
			want: actions{createSandbox: true, startInit: []int{0}},
		},
		{
			name: "sandbox not ready, nothing running: new sandbox with the next attempt",
			pod:  actPod,
			st:   rs(sbList(sb("sb1", 2, false)), ctrIn("sb1", "app", exited, 0)),
			want: actions{createSandbox: true, attempt: 3, start: []int{0, 1}},
		},
		{
			name: "sandbox not ready with a container still running: kill, then new sandbox",
			pod:  actPod,
			st:   rs(sbList(sb("sb1", 0, false)), ctrIn("sb1", "app", running, 0)),
			want: actions{killPod: true, createSandbox: true, attempt: 1, start: []int{0, 1}},
		},
		{
			name: "sandbox not ready with init containers: restart from the first init container",
			pod:  actPodInit,
			st:   rs(sbList(sb("sb1", 0, false)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "init-1", exited, 0), ctrIn("sb1", "init-0", exited, 0)),
			want: actions{createSandbox: true, attempt: 1, startInit: []int{0}},
		},
		{
			name:     "spec hash changed: kill everything and replace the sandbox",
			pod:      actPod,
			specHash: "hash-2",
			st:       rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0)),
			want:     actions{killPod: true, createSandbox: true, attempt: 1, start: []int{0, 1}},
		},
		{
			name:     "no spec hash (API pod): the sandbox's hash is not compared",
			pod:      actPod,
			specHash: "-",
			st:       rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0)),
			want:     actions{sandboxID: "sb1"},
		},
		{
			name: "two ready sandboxes: kill both, make a new one",
			pod:  actPod,
			st:   rs(sbList(sb("sb2", 1, true), sb("sb1", 0, true)), ctrIn("sb2", "app", running, 0)),
			want: actions{killPod: true, createSandbox: true, attempt: 2, start: []int{0, 1}},
		},
		{
			name: "restartPolicy Never, sandbox dead after its containers ran: no new sandbox",
			pod:  policy(actPod, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, false)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 1)),
			want: actions{attempt: 1},
		},
		{
			name: "restartPolicy Never, sandbox dead with a container still running: kill only",
			pod:  policy(actPod, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, false)), ctrIn("sb1", "app", running, 0)),
			want: actions{killPod: true, attempt: 1},
		},
		{
			name: "restartPolicy Never, sandbox died before any container: new sandbox",
			pod:  policy(actPod, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, false))),
			want: actions{createSandbox: true, attempt: 1, start: []int{0, 1}},
		},
		{
			name:     "restartPolicy Never, spec changed: replaced all the same",
			pod:      policy(actPod, v1.RestartPolicyNever),
			specHash: "hash-2",
			st:       rs(sbList(sb("sb1", 0, false)), ctrIn("sb1", "app", exited, 0)),
			want:     actions{createSandbox: true, attempt: 1, start: []int{0, 1}},
		},
		{
			name: "restartPolicy OnFailure, new sandbox: succeeded containers are not started",
			pod:  policy(actPod, v1.RestartPolicyOnFailure),
			st:   rs(sbList(sb("sb1", 0, false)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 2)),
			want: actions{createSandbox: true, attempt: 1, start: []int{1}},
		},

		// Init containers, strictly in order.
		{
			name: "ready sandbox, no init container yet: start the first",
			pod:  actPodInit,
			st:   rs(sbList(sb("sb1", 0, true))),
			want: actions{sandboxID: "sb1", startInit: []int{0}},
		},
		{
			name: "init 0 running: wait",
			pod:  actPodInit,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-0", running, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "init 0 created but not started: start it again",
			pod:  actPodInit,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-0", created, 0)),
			want: actions{sandboxID: "sb1", startInit: []int{0}},
		},
		{
			name: "init 0 exit 0: start init 1",
			pod:  actPodInit,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-0", exited, 0)),
			want: actions{sandboxID: "sb1", startInit: []int{1}},
		},
		{
			name: "init 0 failed under Always: restart init 0",
			pod:  actPodInit,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-0", exited, 1)),
			want: actions{sandboxID: "sb1", startInit: []int{0}},
		},
		{
			name: "init 1 failed under OnFailure: restart init 1",
			pod:  policy(actPodInit, v1.RestartPolicyOnFailure),
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-1", exited, 1), ctrIn("sb1", "init-0", exited, 0)),
			want: actions{sandboxID: "sb1", startInit: []int{1}},
		},
		{
			name: "init 1 failed under Never: the pod has failed",
			pod:  policy(actPodInit, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-1", exited, 1), ctrIn("sb1", "init-0", exited, 0)),
			want: actions{sandboxID: "sb1", initFailed: true, killPod: true},
		},
		{
			name: "init 1 running: wait",
			pod:  actPodInit,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-1", running, 0), ctrIn("sb1", "init-0", exited, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "all init containers done: start the containers",
			pod:  actPodInit,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-1", exited, 0), ctrIn("sb1", "init-0", exited, 0)),
			want: actions{sandboxID: "sb1", start: []int{0, 1}},
		},
		{
			name: "init containers done in an old sandbox only: run them again in the new one",
			pod:  actPodInit,
			st: rs(sbList(sb("sb2", 1, true), sb("sb1", 0, false)),
				ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "init-1", exited, 0), ctrIn("sb1", "init-0", exited, 0)),
			want: actions{sandboxID: "sb2", attempt: 1, startInit: []int{0}},
		},

		// Regular containers in a ready sandbox.
		{
			name: "all running and unchanged: nothing to do",
			pod:  actPod,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "one container missing: start it",
			pod:  actPod,
			st:   rs(sbList(sb("sb1", 3, true)), ctrIn("sb1", "app", running, 0)),
			want: actions{sandboxID: "sb1", attempt: 3, start: []int{1}},
		},
		{
			name: "running container whose spec changed: kill and start",
			pod:  actPod,
			st:   rs(sbList(sb("sb1", 0, true)), changedApp, ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1", start: []int{0}, kill: []killInfo{{changedApp, "Container app definition changed, will be restarted", 30}}},
		},
		{
			name: "running container no longer in the spec: kill",
			pod:  actPod,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0), strayRunning),
			want: actions{sandboxID: "sb1", kill: []killInfo{{strayRunning, "Stopping container gone", 30}}},
		},
		{
			name: "created but never started: start again",
			pod:  policy(actPod, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", created, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1", start: []int{0}},
		},
		{
			name: "Always restarts exit 0 and exit 1",
			pod:  actPod,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 1)),
			want: actions{sandboxID: "sb1", start: []int{0, 1}},
		},
		{
			name: "OnFailure restarts exit 1 only",
			pod:  policy(actPod, v1.RestartPolicyOnFailure),
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 1)),
			want: actions{sandboxID: "sb1", start: []int{1}},
		},
		{
			name: "Never restarts nothing; the finished pod's sandbox is stopped",
			pod:  policy(actPod, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 1)),
			want: actions{sandboxID: "sb1", stopSandbox: true},
		},
		{
			name: "OnFailure pod with init containers, all done, sandbox stopped: no new sandbox",
			pod:  policy(actPodInit, v1.RestartPolicyOnFailure),
			st: rs(sbList(sb("sb1", 0, false)),
				ctrIn("sb1", "init-0", exited, 0), ctrIn("sb1", "init-1", exited, 0),
				ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 0)),
			want: actions{attempt: 1},
		},
		{
			name: "OnFailure pod with init containers and a failed container: new sandbox, inits first",
			pod:  policy(actPodInit, v1.RestartPolicyOnFailure),
			st: rs(sbList(sb("sb1", 0, false)),
				ctrIn("sb1", "init-0", exited, 0), ctrIn("sb1", "init-1", exited, 0),
				ctrIn("sb1", "app", exited, 1), ctrIn("sb1", "side", exited, 0)),
			want: actions{createSandbox: true, attempt: 1, startInit: []int{0}},
		},
		{
			name: "Never with one container still running keeps the sandbox",
			pod:  policy(actPod, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "unknown state: stop it, then start another",
			pod:  actPod,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", pod.ContainerUnknown, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1", start: []int{0}, kill: []killInfo{{ctrIn("sb1", "app", pod.ContainerUnknown, 0), "Container app is in an unknown state, will be restarted", 30}}},
		},
		{
			name: "containers of an old sandbox are ignored: a running one there does not count",
			pod:  actPod,
			st: rs(sbList(sb("sb2", 1, true), sb("sb1", 0, false)),
				ctrIn("sb2", "side", running, 0), oldSandboxApp),
			want: actions{sandboxID: "sb2", attempt: 1, start: []int{0}},
		},
		{
			name: "containers of an old sandbox are ignored: a changed one there is not killed",
			pod:  actPod,
			st: rs(sbList(sb("sb2", 1, true), sb("sb1", 0, false)),
				ctrIn("sb2", "app", running, 0), ctrIn("sb2", "side", running, 0),
				func() *pod.Container { c := ctrIn("sb1", "app", running, 0); c.Hash = "old"; return c }()),
			want: actions{sandboxID: "sb2", attempt: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.specHash
			switch h {
			case "":
				h = specHash
			case "-":
				h = ""
			}
			got := computeActions(tt.pod, h, tt.st, nil)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(actions{}, killInfo{})); diff != "" {
				t.Errorf("computeActions() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputeActionsOnFailureSucceededContainerInOldSandbox(t *testing.T) {
	tests := []struct {
		name string
		st   *pod.RuntimeStatus
		want actions
	}{
		{
			name: "container succeeded in the old sandbox, the other was restarted in the new one",
			st: rs(sbList(sb("sb2", 1, true), sb("sb1", 0, false)),
				ctrIn("sb2", "side", running, 0), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 1)),
			want: actions{sandboxID: "sb2", attempt: 1},
		},
		{
			name: "every container succeeded, sandbox dead: nothing to do",
			st:   rs(sbList(sb("sb1", 0, false)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 0)),
			want: actions{attempt: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computeActions(policy(actPod, v1.RestartPolicyOnFailure), specHash, tt.st, nil)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(actions{}, killInfo{})); diff != "" {
				t.Errorf("computeActions() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShouldRestart(t *testing.T) {
	tests := []struct {
		name   string
		policy v1.RestartPolicy
		state  pod.ContainerState
		code   int32
		want   bool
	}{
		{name: "Always, exit 0", policy: v1.RestartPolicyAlways, state: exited, code: 0, want: true},
		{name: "Always, exit 1", policy: v1.RestartPolicyAlways, state: exited, code: 1, want: true},
		{name: "OnFailure, exit 0", policy: v1.RestartPolicyOnFailure, state: exited, code: 0, want: false},
		{name: "OnFailure, exit 137", policy: v1.RestartPolicyOnFailure, state: exited, code: 137, want: true},
		{name: "Never, exit 1", policy: v1.RestartPolicyNever, state: exited, code: 1, want: false},
		{name: "Never, created", policy: v1.RestartPolicyNever, state: created, want: true},
		{name: "Never, unknown", policy: v1.RestartPolicyNever, state: pod.ContainerUnknown, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &pod.Container{State: tt.state, ExitCode: tt.code}
			if got := shouldRestart(tt.policy, c); got != tt.want {
				t.Errorf("shouldRestart(%s, %s exit %d) = %v, want %v", tt.policy, tt.state, tt.code, got, tt.want)
			}
		})
	}
}

// probeVerdicts is a fixed set of verdicts by container ID and kind.
type probeVerdicts map[string]pod.ProbeResult

func (v probeVerdicts) ProbeResult(_ pod.UID, id string, kind pod.ProbeKind) pod.ProbeResult {
	return v[id+"/"+kind.String()]
}

func TestComputeActionsProbesAndSidecars(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	grace := int64(7)
	probed := actPod.DeepCopy()
	probed.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &grace}
	probed.Spec.Containers[1].StartupProbe = &v1.Probe{}
	// init-0 is a sidecar with a startup probe, init-1 a plain init
	// container after it.
	side := actPodInit.DeepCopy()
	side.Spec.InitContainers[0].RestartPolicy = &always
	side.Spec.InitContainers[0].StartupProbe = &v1.Probe{}
	sideNever := policy(side, v1.RestartPolicyNever)
	in := func(p *v1.Pod, name string, init bool, state pod.ContainerState, code int32) *pod.Container {
		c := &pod.Container{ID: "sb1-" + name, SandboxID: "sb1", Name: name, State: state, ExitCode: code, Init: init}
		if s := containerSpec(p, name, init); s != nil {
			c.Hash = HashContainer(s)
		}
		return c
	}
	tests := []struct {
		name     string
		pod      *v1.Pod
		st       *pod.RuntimeStatus
		verdicts probeVerdicts
		want     actions
	}{
		{
			name:     "liveness failed: killed with the probe's grace period, restarted",
			pod:      probed,
			st:       rs(sbList(sb("sb1", 0, true)), in(probed, "app", false, running, 0), in(probed, "side", false, running, 0)),
			verdicts: probeVerdicts{"sb1-app/Liveness": pod.ProbeFailure, "sb1-side/Startup": pod.ProbeSuccess},
			want: actions{sandboxID: "sb1", start: []int{0},
				kill: []killInfo{{in(probed, "app", false, running, 0), "Container app failed liveness probe, will be restarted", 7}}},
		},
		{
			name:     "startup failed: killed with the pod's grace period; Never: not restarted",
			pod:      policy(probed, v1.RestartPolicyNever),
			st:       rs(sbList(sb("sb1", 0, true)), in(probed, "app", false, running, 0), in(probed, "side", false, running, 0)),
			verdicts: probeVerdicts{"sb1-side/Startup": pod.ProbeFailure},
			want: actions{sandboxID: "sb1",
				kill: []killInfo{{in(probed, "side", false, running, 0), "Container side failed startup probe", 30}}},
		},
		{
			name:     "no verdict yet: nothing",
			pod:      probed,
			st:       rs(sbList(sb("sb1", 0, true)), in(probed, "app", false, running, 0), in(probed, "side", false, running, 0)),
			verdicts: probeVerdicts{},
			want:     actions{sandboxID: "sb1"},
		},
		{
			name:     "sidecar running but not started: the next init container waits",
			pod:      side,
			st:       rs(sbList(sb("sb1", 0, true)), in(side, "init-0", true, running, 0)),
			verdicts: probeVerdicts{},
			want:     actions{sandboxID: "sb1"},
		},
		{
			name:     "sidecar failed its startup probe before the pod was initialised: restarted, the next waits",
			pod:      side,
			st:       rs(sbList(sb("sb1", 0, true)), in(side, "init-0", true, running, 0)),
			verdicts: probeVerdicts{"sb1-init-0/Startup": pod.ProbeFailure},
			want: actions{sandboxID: "sb1", startInit: []int{0},
				kill: []killInfo{{in(side, "init-0", true, running, 0), "Container init-0 failed startup probe, will be restarted", 30}}},
		},
		{
			name:     "sidecar started: the next init container starts",
			pod:      side,
			st:       rs(sbList(sb("sb1", 0, true)), in(side, "init-0", true, running, 0)),
			verdicts: probeVerdicts{"sb1-init-0/Startup": pod.ProbeSuccess},
			want:     actions{sandboxID: "sb1", startInit: []int{1}},
		},
		{
			name:     "inits done, sidecar running: the app containers start",
			pod:      side,
			st:       rs(sbList(sb("sb1", 0, true)), in(side, "init-1", true, exited, 0), in(side, "init-0", true, running, 0)),
			verdicts: probeVerdicts{"sb1-init-0/Startup": pod.ProbeSuccess},
			want:     actions{sandboxID: "sb1", start: []int{0, 1}},
		},
		{
			name: "sidecar exited beside running apps: restarted, the apps untouched",
			pod:  side,
			st: rs(sbList(sb("sb1", 0, true)), in(side, "app", false, running, 0), in(side, "side", false, running, 0),
				in(side, "init-1", true, exited, 0), in(side, "init-0", true, exited, 1)),
			want: actions{sandboxID: "sb1", startInit: []int{0}},
		},
		{
			name: "Never pod: apps done, the sidecar is stopped and not restarted",
			pod:  sideNever,
			st: rs(sbList(sb("sb1", 0, true)), in(side, "app", false, exited, 0), in(side, "side", false, exited, 0),
				in(side, "init-1", true, exited, 0), in(side, "init-0", true, running, 0)),
			want: actions{sandboxID: "sb1", kill: []killInfo{{in(side, "init-0", true, running, 0), "Stopping container init-0", 30}}},
		},
		{
			name: "Never pod: apps done, sidecar stopped: the sandbox goes",
			pod:  sideNever,
			st: rs(sbList(sb("sb1", 0, true)), in(side, "app", false, exited, 0), in(side, "side", false, exited, 0),
				in(side, "init-1", true, exited, 0), in(side, "init-0", true, exited, 137)),
			want: actions{sandboxID: "sb1", stopSandbox: true},
		},
		{
			name: "new sandbox: a pod of sidecars and succeeded inits still starts with the first init container",
			pod:  side,
			st:   rs(nil),
			want: actions{createSandbox: true, startInit: []int{0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computeActions(tt.pod, specHash, tt.st, tt.verdicts)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(actions{}, killInfo{})); diff != "" {
				t.Errorf("computeActions() (-want +got):\n%s", diff)
			}
		})
	}
}

// ephIn is an ephemeral container instance in sandbox sbID.
func ephIn(sbID, name string, state pod.ContainerState, exitCode int32) *pod.Container {
	return &pod.Container{ID: sbID + "-" + name, SandboxID: sbID, Name: name, State: state, ExitCode: exitCode, Ephemeral: true}
}

// withDebug adds an ephemeral container "dbg" targeting "app", as
// kubectl debug --target=app -c dbg does.
func withDebug(p *v1.Pod) *v1.Pod {
	p = p.DeepCopy()
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox:1.36"},
		TargetContainerName:      "app",
	}}
	return p
}

func TestComputeActionsEphemeral(t *testing.T) {
	debugPod, debugPodInit := withDebug(actPod), withDebug(actPodInit)
	tests := []struct {
		name string
		pod  *v1.Pod
		st   *pod.RuntimeStatus
		want actions
	}{
		{
			name: "running pod, no instance yet: start it, nothing else",
			pod:  debugPod,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1", startEphemeral: []int{0}},
		},
		{
			name: "running: left alone, not stopped as a container the spec lacks",
			pod:  debugPod,
			st:   rs(sbList(sb("sb1", 0, true)), ephIn("sb1", "dbg", running, 0), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "exited 0: never restarted",
			pod:  debugPod,
			st:   rs(sbList(sb("sb1", 0, true)), ephIn("sb1", "dbg", exited, 0), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "exited 1 under restartPolicy Always: never restarted",
			pod:  debugPod,
			st:   rs(sbList(sb("sb1", 0, true)), ephIn("sb1", "dbg", exited, 1), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "created and never started: left as it is, as the kubelet",
			pod:  debugPod,
			st:   rs(sbList(sb("sb1", 0, true)), ephIn("sb1", "dbg", created, 0), ctrIn("sb1", "app", running, 0), ctrIn("sb1", "side", running, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "ran in an earlier sandbox: not started in the new one",
			pod:  debugPod,
			st: rs(sbList(sb("sb2", 1, true), sb("sb1", 0, false)), ctrIn("sb2", "app", running, 0), ctrIn("sb2", "side", running, 0),
				ephIn("sb1", "dbg", exited, 137), ctrIn("sb1", "app", exited, 137)),
			want: actions{sandboxID: "sb2", attempt: 1},
		},
		{
			name: "no ready sandbox: the pod is not running, only the sandbox and its containers start",
			pod:  debugPod,
			st:   rs(sbList(sb("sb1", 0, false)), ctrIn("sb1", "app", exited, 0)),
			want: actions{createSandbox: true, attempt: 1, start: []int{0, 1}},
		},
		{
			name: "while the pod initialises: started beside the running init container (the kubelet)",
			pod:  debugPodInit,
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-0", running, 0)),
			want: actions{sandboxID: "sb1", startEphemeral: []int{0}},
		},
		{
			name: "app containers done (restartPolicy Never): not started; the sandbox stops",
			pod:  policy(debugPod, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 0)),
			want: actions{sandboxID: "sb1", stopSandbox: true},
		},
		{
			name: "still running when the app containers are done: kept, and the sandbox with it",
			pod:  policy(debugPod, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, true)), ephIn("sb1", "dbg", running, 0), ctrIn("sb1", "app", exited, 0), ctrIn("sb1", "side", exited, 0)),
			want: actions{sandboxID: "sb1"},
		},
		{
			name: "init container failed under restartPolicy Never: the pod is over, nothing starts",
			pod:  policy(debugPodInit, v1.RestartPolicyNever),
			st:   rs(sbList(sb("sb1", 0, true)), ctrIn("sb1", "init-0", exited, 1)),
			want: actions{sandboxID: "sb1", initFailed: true, killPod: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computeActions(tt.pod, specHash, tt.st, nil)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(actions{}, killInfo{})); diff != "" {
				t.Errorf("computeActions() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestComputeActionsResize(t *testing.T) {
	res := func(cpuReq, cpuLim, memLim string) v1.ResourceRequirements {
		r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
		for _, kv := range []struct {
			l v1.ResourceList
			n v1.ResourceName
			q string
		}{{r.Requests, v1.ResourceCPU, cpuReq}, {r.Limits, v1.ResourceCPU, cpuLim}, {r.Limits, v1.ResourceMemory, memLim}} {
			if kv.q != "" {
				kv.l[kv.n] = resource.MustParse(kv.q)
			}
		}
		return r
	}
	always := v1.ContainerRestartPolicyAlways
	spec := func(r v1.ResourceRequirements, policies ...v1.ContainerResizePolicy) *v1.Pod {
		p := actPod.DeepCopy()
		p.Spec.Containers = p.Spec.Containers[:1]
		p.Spec.Containers[0].Resources, p.Spec.Containers[0].ResizePolicy = r, policies
		p.Spec.InitContainers = []v1.Container{{Name: "side", Image: "envoy", RestartPolicy: &always, Resources: r, ResizePolicy: policies}}
		return p
	}
	// running is p's container name (app, or the sidecar side) running
	// in sb1 with resources r (nil: unknown).
	running := func(p *v1.Pod, name string, r *v1.ResourceRequirements) *pod.Container {
		init := name == "side"
		c := &pod.Container{ID: "sb1-" + name, SandboxID: "sb1", Name: name, State: pod.ContainerRunning, Init: init, Resources: r}
		c.Hash = HashContainer(containerSpec(p, name, init))
		return c
	}
	old := res("100m", "200m", "128Mi")
	restartMemory := v1.ContainerResizePolicy{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}
	tests := []struct {
		name string
		pod  *v1.Pod
		app  *v1.ResourceRequirements // the app container's (the sidecar runs as specified)
		want func(p *v1.Pod, app *pod.Container) actions
	}{
		{
			name: "resources as allocated: nothing",
			pod:  spec(old), app: &old,
			want: func(*v1.Pod, *pod.Container) actions { return actions{sandboxID: "sb1"} },
		},
		{
			name: "resources unknown (an older agent's container): nothing",
			pod:  spec(res("1", "2", "1Gi")), app: nil,
			want: func(*v1.Pod, *pod.Container) actions { return actions{sandboxID: "sb1"} },
		},
		{
			name: "cpu changed: resized in place",
			pod:  spec(res("200m", "400m", "128Mi")), app: &old,
			want: func(p *v1.Pod, c *pod.Container) actions {
				return actions{sandboxID: "sb1", resize: []resizeInfo{{c, &p.Spec.Containers[0]}}, resizePod: true}
			},
		},
		{
			name: "cpu changed, memory policy RestartContainer: in place still",
			pod:  spec(res("200m", "400m", "128Mi"), restartMemory), app: &old,
			want: func(p *v1.Pod, c *pod.Container) actions {
				return actions{sandboxID: "sb1", resize: []resizeInfo{{c, &p.Spec.Containers[0]}}, resizePod: true}
			},
		},
		{
			name: "memory changed, its policy RestartContainer: restarted",
			pod:  spec(res("100m", "200m", "256Mi"), restartMemory), app: &old,
			want: func(p *v1.Pod, c *pod.Container) actions {
				return actions{sandboxID: "sb1", start: []int{0}, resizePod: true,
					kill: []killInfo{{c, "Container app resize requires restart", 30}}}
			},
		},
		{
			name: "cpu requests at or below 2m, limits at or below 10m: the same to the kernel",
			pod:  spec(res("1m", "5m", "128Mi")), app: func() *v1.ResourceRequirements { r := res("2m", "10m", "128Mi"); return &r }(),
			want: func(*v1.Pod, *pod.Container) actions { return actions{sandboxID: "sb1"} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := running(tt.pod, "app", tt.app)
			sideRes := tt.pod.Spec.InitContainers[0].Resources
			st := rs(sbList(sb("sb1", 0, true)), app, running(tt.pod, "side", &sideRes))
			got := computeActions(tt.pod, specHash, st, nil)
			if diff := cmp.Diff(tt.want(tt.pod, app), got, cmp.AllowUnexported(actions{}, killInfo{}, resizeInfo{})); diff != "" {
				t.Errorf("computeActions() (-want +got):\n%s", diff)
			}
		})
	}

	// A sidecar is resized as an app container is.
	p := spec(res("200m", "400m", "256Mi"), restartMemory)
	app := running(p, "app", &p.Spec.Containers[0].Resources)
	side := running(p, "side", &old)
	got := computeActions(p, specHash, rs(sbList(sb("sb1", 0, true)), app, side), nil)
	want := actions{sandboxID: "sb1", startInit: []int{0}, resizePod: true, kill: []killInfo{{side, "Container side resize requires restart", 30}}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(actions{}, killInfo{}, resizeInfo{})); diff != "" {
		t.Errorf("sidecar resize (-want +got):\n%s", diff)
	}
}
