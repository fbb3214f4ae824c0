package admit

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
)

// CPUAllocator reserves a pod's exclusive CPUs, all or none
// (cpumanager.Manager). It is idempotent for an admitted pod; an error
// may carry its refusal reason with a Reason() string method.
type CPUAllocator interface {
	Allocate(p *v1.Pod) error
}

// CPUs refuses a pod whose exclusive CPUs cannot be allocated (the
// kubelet's CPU manager admission, through its topology manager): the
// error's own reason and message (SMTAlignmentError), else
// UnexpectedAdmissionError with the kubelet's "Allocate failed due to …,
// which is unexpected". Unlike the other handlers it is not pure: it
// allocates as it admits, so it comes last in the chain.
func CPUs(a CPUAllocator) Handler {
	return HandlerFunc{N: "CPUManager", F: func(at *Attributes) Result {
		err := a.Allocate(at.Pod)
		if err == nil {
			return Result{Admit: true}
		}
		var r interface{ Reason() string }
		if errors.As(err, &r) {
			return Result{Reason: r.Reason(), Message: err.Error()}
		}
		return Result{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to " + err.Error() + ", which is unexpected"}
	}}
}

// DeviceAllocator gives an admitted pod's containers their devices, all
// or none (devicemanager.Manager); idempotent for an admitted pod.
type DeviceAllocator interface {
	Allocate(ctx context.Context, p *v1.Pod) error
}

// Devices refuses a pod whose devices cannot be allocated: the kubelet's
// device manager admission, UnexpectedAdmissionError with "Allocate
// failed due to …, which is unexpected". A pod asking for more devices
// than the node has is refused before, by Resources (OutOf<resource>).
// Like CPUs it allocates as it admits.
func Devices(ctx context.Context, d DeviceAllocator) Handler {
	return HandlerFunc{N: "DeviceManager", F: func(at *Attributes) Result {
		if err := d.Allocate(ctx, at.Pod); err != nil {
			return Result{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to " + err.Error() + ", which is unexpected"}
		}
		return Result{Admit: true}
	}}
}
