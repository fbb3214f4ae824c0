package pod

import (
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is the runtime's view of one pod sandbox.
type Sandbox struct {
	ID        string
	Attempt   uint32
	State     runtimeapi.PodSandboxState
	CreatedAt time.Time
	IP        string
	IPs       []string
	// SpecHash is the pod hash the sandbox was created for.
	SpecHash string
	// Kubelet: made by the kubelet; AdoptedFrom: made by nodeagent for a
	// static pod it adopted from the kubelet, the manifest's own UID (see
	// cri.Adopter). PodLabels are then the pod's labels it was made with.
	Kubelet     bool
	AdoptedFrom string
	PodLabels   map[string]string
}

// ContainerState is the state of one runtime container.
type ContainerState int

const (
	ContainerUnknown ContainerState = iota
	ContainerCreated
	ContainerRunning
	ContainerExited
)

func (s ContainerState) String() string {
	return [...]string{"unknown", "created", "running", "exited"}[s]
}

// Container is the runtime's view of one container.
type Container struct {
	ID           string
	SandboxID    string
	Name         string
	Image        string
	ImageRef     string
	State        ContainerState
	RestartCount int
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Reason       string
	Message      string
	// Hash is the container spec hash recorded at creation.
	Hash string
	// Init is true for init containers.
	Init bool
	// Ephemeral is true for ephemeral containers (kubectl debug): started
	// once in a running pod, never restarted, not part of its phase or
	// readiness.
	Ephemeral bool
	// GracePeriod is the pod's termination grace recorded at creation,
	// used to kill containers whose pod object is gone.
	GracePeriod int64
	// Resources are the cpu and memory requests and limits the instance
	// runs with: those it was created with (a container annotation), or
	// those of its last in-place resize (the allocation manager's
	// Actuated record, which the runtime lays over the listing). Nil when
	// unknown: a container made by an agent that did not record them.
	Resources *v1.ResourceRequirements
}

// Actuated is what the agent applied to one running container instance
// beyond what the runtime's listing of it says, kept across agent
// restarts by the allocation manager: the resources of its last in-place
// resize and, for a container an older agent made (whose hash covered
// its whole spec), the spec hash it was adopted with. A record holds for
// the instance ContainerID only; a newer instance of the container
// starts afresh from its own annotations.
type Actuated struct {
	ContainerID string                  `json:"containerID"`
	Resources   v1.ResourceRequirements `json:"resources"`
	// Hash, when set, replaces the instance's recorded spec hash.
	Hash string `json:"hash,omitempty"`
}

// RuntimeStatus is everything the runtime knows about one pod, newest
// sandbox first and containers newest first.
type RuntimeStatus struct {
	UID        UID
	Name       string
	Namespace  string
	Sandboxes  []*Sandbox
	Containers []*Container
}

// LatestSandbox returns the newest sandbox or nil.
func (s *RuntimeStatus) LatestSandbox() *Sandbox {
	if s == nil || len(s.Sandboxes) == 0 {
		return nil
	}
	return s.Sandboxes[0]
}

// Latest returns the newest app (init false) or init container of that
// name, or nil; ephemeral containers are not looked at.
func (s *RuntimeStatus) Latest(name string, init bool) *Container {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name && c.Init == init && !c.Ephemeral {
			return c
		}
	}
	return nil
}

// LatestEphemeral returns the newest ephemeral container of that name,
// in any sandbox, or nil.
func (s *RuntimeStatus) LatestEphemeral(name string) *Container {
	if s == nil {
		return nil
	}
	for _, c := range s.Containers {
		if c.Name == name && c.Ephemeral {
			return c
		}
	}
	return nil
}

// Running reports whether any container or sandbox is still running.
func (s *RuntimeStatus) Running() bool {
	if s == nil {
		return false
	}
	for _, sb := range s.Sandboxes {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	for _, c := range s.Containers {
		if c.State == ContainerRunning {
			return true
		}
	}
	return false
}
