// Package images is the node's image manager, after the kubelet's
// pkg/kubelet/images: it pulls images for the runtime (Puller) and
// garbage-collects the ones no container uses (GC).
//
// Puller owns how pulls reach the runtime: serialized by default
// (--serialize-image-pulls), else at most MaxParallel at once (0 =
// unlimited); callers that want the same image with the same credentials
// while a pull of it is in flight share that one pull (a single flight
// keyed by image and credentials); the credentials of a pull are tried in
// turn; a pull that lasts logs its progress every ProgressInterval
// (elapsed time only: bytes would need containerd's content store, which
// CRI does not expose); the result carries the image's size (ImageStatus
// after the pull) and both durations the kubelet's Pulled event shows;
// OnPull, if set, hears of every Pull's start, end and error (the pod
// start-up metrics subtract a pod's pulls).
// It does not own pull policy, backoff, events or which credentials
// apply: internal/cri decides those per pod and container.
//
// GC owns image garbage collection: every GarbageCollect lists images and
// all containers of the runtime (not only this agent's: the kubelet
// counts all of them), remembers when each image was first seen and last
// seen in use (in memory; a restart forgets and so waits MinAge and
// MaxAge again), removes images unused for longer than MaxAge, and when
// the image file system's usage (statfs of the mount point CRI
// ImageFsInfo reports) is at or over HighThresholdPercent removes unused
// images, least recently used first, until it is below
// LowThresholdPercent. It never removes an image a container (running or
// not) uses, a pinned image (CRI Image.Pinned, and SandboxImage), or one
// first seen less than MinAge ago. Run calls GarbageCollect every Period;
// the caller (cmd/nodeagent) runs it beside the sync loop, not inside it:
// removals are CRI calls and the loop never calls the runtime.
//
// Simpler choices than the kubelet's, and why: waiting pulls take a free
// slot in no particular order (a channel semaphore rather than the
// kubelet's FIFO queue: the order of pod workers is arbitrary anyway);
// the single-flight key ignores the sandbox config (runtime handler), as
// nodeagent runs one handler.
//
// Concurrency: Puller.Pull is safe for concurrent use (one call per pod
// worker); a shared pull is cancelled only when every caller waiting for
// it has given up. GC.GarbageCollect serialises its calls (Run's
// periodic one and the eviction manager's under disk pressure); its
// records are guarded by a mutex so that a reader may look at them.
package images
