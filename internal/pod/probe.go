package pod

// ProbeKind is one of a container's three probes.
type ProbeKind int

const (
	Liveness ProbeKind = iota
	Readiness
	Startup
)

func (k ProbeKind) String() string {
	switch k {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return "Unknown"
}

// ProbeResult is a probe's verdict once its threshold was reached.
type ProbeResult int

const (
	// ProbeUnknown: no verdict yet (never probed, or below threshold).
	ProbeUnknown ProbeResult = iota
	ProbeSuccess
	ProbeFailure
)

func (r ProbeResult) String() string {
	return [...]string{"unknown", "success", "failure"}[r]
}

// ProbeResults reads the probes' verdicts for one container instance
// (a restart has a new ID and starts without any).
type ProbeResults interface {
	ProbeResult(uid UID, containerID string, kind ProbeKind) ProbeResult
}

// ProbeUpdate is a verdict that changed.
type ProbeUpdate struct {
	UID         UID
	Container   string
	ContainerID string
	Kind        ProbeKind
	Result      ProbeResult
}
