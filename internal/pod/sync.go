package pod

import "time"

// Waiting is why a container is not running, in the kubelet's words
// (ContainerCreating, PodInitializing, ErrImagePull, ImagePullBackOff,
// CrashLoopBackOff, CreateContainerConfigError, CreateContainerError,
// RunContainerError, ErrImageNeverPull, InvalidImageName).
type Waiting struct {
	Reason  string
	Message string
}

// SyncResult is what one sync of a pod achieved.
type SyncResult struct {
	// Waiting holds, per container name, why it did not start in this
	// sync. Absent names either run or were not due.
	Waiting map[string]Waiting
	// RetryAfter, when > 0, is when the pod should be synced again because
	// a backoff expires then.
	RetryAfter time.Duration
	// Err is the first error of the sync, also reflected in Waiting.
	Err error
	// SandboxError is set when no sandbox could be made (FailedCreatePodSandBox).
	SandboxError string
}

// SetWaiting records a waiting reason and keeps the earliest retry.
func (r *SyncResult) SetWaiting(name, reason, message string, retry time.Duration) {
	if r.Waiting == nil {
		r.Waiting = map[string]Waiting{}
	}
	r.Waiting[name] = Waiting{Reason: reason, Message: message}
	r.Retry(retry)
}

// Retry keeps the earliest positive retry delay.
func (r *SyncResult) Retry(d time.Duration) {
	if d > 0 && (r.RetryAfter == 0 || d < r.RetryAfter) {
		r.RetryAfter = d
	}
}
