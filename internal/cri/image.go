package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/images"
)

// The kubelet's image waiting reasons (pkg/kubelet/images/types.go).
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	ReasonInvalidImageName  = "InvalidImageName"
)

// backOffReportAfter is how long ErrImagePull shows before the status
// turns to ImagePullBackOff.
const backOffReportAfter = time.Second

// imageError carries a waiting reason.
type imageError struct {
	reason string
	msg    string
	retry  time.Duration
}

func (e *imageError) Error() string { return e.msg }

// ensureImage makes sure c's image is present according to its pull
// policy and returns the image reference to create the container with
// (see ensure).
func (r *Runtime) ensureImage(ctx context.Context, p *v1.Pod, c *v1.Container, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	if c.Image == "" {
		return "", &imageError{reason: ReasonInvalidImageName, msg: fmt.Sprintf("container %q has no image", c.Name)}
	}
	return r.ensure(ctx, p, c.Image, c.ImagePullPolicy, zap.String("container", c.Name), sandbox)
}

// ensure makes sure image is present according to policy and returns its
// reference (the kubelet's EnsureImageExists, for a container's image or
// an image volume's). While a pull of the image for this pod is backed
// off it returns an ImagePullBackOff error without asking the registry. A
// pull uses the pod's imagePullSecrets that match the image's registry
// (pullCredentials). Images are the default handler's, as the kubelet's
// without its alpha RuntimeClassInImageCriAPI gate. who names the
// container or volume in the log.
func (r *Runtime) ensure(ctx context.Context, p *v1.Pod, image string, policy v1.PullPolicy, who zap.Field, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	spec := &runtimeapi.ImageSpec{Image: image}
	present := ""
	if policy != v1.PullAlways {
		cctx, cancel := r.callCtx(ctx)
		resp, err := r.c.ImageStatus(cctx, &runtimeapi.ImageStatusRequest{Image: spec})
		cancel()
		if err != nil {
			return "", &imageError{reason: ReasonErrImagePull, msg: fmt.Sprintf("get status of image %q: %v", image, translate(err)), retry: r.cfg.ImagePull.Initial}
		}
		if resp.Image != nil {
			present = resp.Image.Id
		}
	}
	if present != "" {
		// As the kubelet: every container start tells where its image came from.
		r.event(p, v1.EventTypeNormal, "Pulled", "Container image %q already present on machine", image)
		return present, nil
	}
	if policy == v1.PullNever {
		r.event(p, v1.EventTypeWarning, ReasonErrImageNeverPull, "Container image %q is not present with pull policy of Never", image)
		return "", &imageError{reason: ReasonErrImageNeverPull, msg: fmt.Sprintf("Container image %q is not present with pull policy of Never", image)}
	}
	key := string(p.UID) + "/" + image
	if left := r.cfg.ImagePull.Remaining(key, time.Time{}); left > 0 {
		r.event(p, v1.EventTypeNormal, "BackOff", "Back-off pulling image %q", image)
		return "", &imageError{ReasonImagePullBackOff, fmt.Sprintf("Back-off pulling image %q", image), left}
	}
	log := r.log.With(zap.String("pod", p.Namespace+"/"+p.Name), who, zap.String("image", image))
	creds := r.pullCredentials(ctx, p, image, log)
	log.Info("pulling image", zap.Int("credentials", len(creds)))
	r.event(p, v1.EventTypeNormal, "Pulling", "Pulling image %q", image)
	cctx, cancel := context.WithTimeout(ctx, r.cfg.PullTimeout)
	defer cancel()
	res, err := r.cfg.Images.Pull(cctx, images.Request{Image: spec, Sandbox: sandbox, Auths: creds})
	if err != nil && ctx.Err() != nil {
		// Cancelled by the pod's removal: not the registry's fault, no backoff.
		return "", &imageError{reason: ReasonErrImagePull, msg: fmt.Sprintf("pull image %q: %v", image, ctx.Err())}
	}
	if err != nil {
		delay := r.cfg.ImagePull.Next(key)
		err = translatePull(err)
		log.Warn("pull image failed; backing off", zap.Duration("backoff", delay), zap.Error(err))
		r.event(p, v1.EventTypeWarning, "Failed", "Failed to pull image %q: %v", image, err)
		// Come back soon to report the backoff (ImagePullBackOff) for the
		// rest of the delay, as the kubelet shows it; the pull itself
		// waits for the whole delay.
		return "", &imageError{ReasonErrImagePull, fmt.Sprintf("pull image %q: %v", image, err), min(delay, backOffReportAfter)}
	}
	r.cfg.ImagePull.Reset(key)
	log.Info("pulled image", zap.String("imageRef", res.ImageRef), zap.Uint64("size", res.Size),
		zap.Duration("pull", res.Pull), zap.Duration("total", res.Total), zap.Bool("shared", res.Shared))
	r.event(p, v1.EventTypeNormal, "Pulled", "Successfully pulled image %q in %v (%v including waiting). Image size: %d bytes.",
		image, res.Pull.Truncate(time.Millisecond), res.Total.Truncate(time.Millisecond), res.Size)
	return res.ImageRef, nil
}

// translatePull translates a pull error, or each of the errors of a pull
// tried with several credentials.
func translatePull(err error) error {
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		return translate(err)
	}
	errs := agg.Errors()
	out := make([]error, len(errs))
	for i := range errs {
		out[i] = translate(errs[i])
	}
	return utilerrors.NewAggregate(out)
}

// asImageError extracts an image error.
func asImageError(err error) (*imageError, bool) {
	var ie *imageError
	ok := errors.As(err, &ie)
	return ie, ok
}
