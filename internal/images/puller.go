package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// PullClient is the part of the CRI image service a Puller uses.
type PullClient interface {
	PullImage(ctx context.Context, in *runtimeapi.PullImageRequest, opts ...grpc.CallOption) (*runtimeapi.PullImageResponse, error)
	ImageStatus(ctx context.Context, in *runtimeapi.ImageStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error)
}

// PullerConfig configures a Puller.
type PullerConfig struct {
	Client PullClient
	Clock  clock.WithTicker
	Logger *zap.Logger
	// Serialize runs one pull at a time (the kubelet's
	// --serialize-image-pulls, default true).
	Serialize bool
	// MaxParallel bounds the pulls at once when not Serialize; 0 is
	// unlimited (--max-parallel-image-pulls).
	MaxParallel int
	// ProgressInterval is how often a pull in progress is logged (10s when
	// zero).
	ProgressInterval time.Duration
	// StatusTimeout bounds the ImageStatus call that reads the pulled
	// image's size (2m when zero).
	StatusTimeout time.Duration
	// OnPull, if set, is told of every Pull call when it returns: when
	// the caller asked (a wait for a slot or a shared pull included), when
	// it returned, and its error (metrics: the pod start-up latency less
	// image pulls). It must not block.
	OnPull func(req Request, start, end time.Time, err error)
}

// Request is one pull: the image, the sandbox it is for, and the
// credentials to try in turn (none: anonymous).
type Request struct {
	Image   *runtimeapi.ImageSpec
	Sandbox *runtimeapi.PodSandboxConfig
	Auths   []*runtimeapi.AuthConfig
}

// Result is a successful pull.
type Result struct {
	ImageRef string
	// Size is the image's size from ImageStatus after the pull; 0 when the
	// runtime did not say.
	Size uint64
	// Pull is how long the pull itself took; Total adds the wait for a
	// free slot or for a pull in flight (the kubelet's "including
	// waiting").
	Pull, Total time.Duration
	// Shared is true when the caller joined a pull already in flight.
	Shared bool
}

// Puller pulls images through the runtime, limiting concurrent pulls and
// sharing a pull among the callers that want it at the same time.
type Puller struct {
	cfg PullerConfig
	log *zap.Logger
	sem chan struct{} // nil: unlimited

	mu      sync.Mutex
	flights map[string]*flight

	// trace, when set (tests), is told of steps the caller cannot see:
	// "wait" when a caller waits for a flight, "queue" when a flight waits
	// for a slot.
	trace func(step, image string)
}

// flight is one pull in progress and the callers waiting for it.
type flight struct {
	done    chan struct{} // closed when res and err are set
	res     Result
	err     error
	waiters int // guarded by Puller.mu
	cancel  context.CancelFunc
}

// NewPuller validates cfg and returns a Puller.
func NewPuller(cfg PullerConfig) (*Puller, error) {
	if cfg.Client == nil || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("image puller: Client, Clock and Logger are required")
	}
	if cfg.MaxParallel < 0 {
		return nil, fmt.Errorf("image puller: MaxParallel %d must be >= 0", cfg.MaxParallel)
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = 10 * time.Second
	}
	if cfg.StatusTimeout <= 0 {
		cfg.StatusTimeout = 2 * time.Minute
	}
	p := &Puller{cfg: cfg, log: cfg.Logger.Named("images"), flights: map[string]*flight{}}
	switch {
	case cfg.Serialize:
		p.sem = make(chan struct{}, 1)
	case cfg.MaxParallel > 0:
		p.sem = make(chan struct{}, cfg.MaxParallel)
	}
	return p, nil
}

// Pull pulls req.Image, or waits for a pull of it with the same
// credentials already in flight, and returns the image reference. It
// returns when the pull ends or ctx is done; the shared pull is cancelled
// when the last caller waiting for it gives up. With several credentials
// each is tried in turn until one succeeds; when all fail their errors
// are returned together (no anonymous attempt, as the kubelet).
func (p *Puller) Pull(ctx context.Context, req Request) (_ Result, err error) {
	start := p.cfg.Clock.Now()
	if p.cfg.OnPull != nil {
		defer func() { p.cfg.OnPull(req, start, p.cfg.Clock.Now(), err) }()
	}
	key := flightKey(req)
	p.mu.Lock()
	f, shared := p.flights[key]
	if !shared {
		// The pull outlives the caller that started it as long as another
		// waits for it: its context is cancelled only when all left.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		p.flights[key] = f
		go p.run(fctx, key, f, req)
	}
	f.waiters++
	p.mu.Unlock()
	if p.trace != nil {
		p.trace("wait", req.Image.GetImage())
	}
	select {
	case <-f.done:
		if f.err != nil {
			return Result{}, f.err
		}
		res := f.res
		res.Total, res.Shared = p.cfg.Clock.Since(start), shared
		return res, nil
	case <-ctx.Done():
		p.mu.Lock()
		f.waiters--
		if f.waiters == 0 {
			// Nobody wants it any more: stop it, and let a later caller
			// start afresh rather than join a cancelled pull.
			f.cancel()
			if p.flights[key] == f {
				delete(p.flights, key)
			}
		}
		p.mu.Unlock()
		return Result{}, ctx.Err()
	}
}

// run performs a flight: waits for a slot, pulls, reads the size, and
// publishes the result. It ends when the pull does; ctx is cancelled when
// every caller left.
func (p *Puller) run(ctx context.Context, key string, f *flight, req Request) {
	defer f.cancel()
	image := req.Image.GetImage()
	res, err := func() (Result, error) {
		if p.sem != nil {
			if p.trace != nil {
				p.trace("queue", image)
			}
			select {
			case p.sem <- struct{}{}:
				defer func() { <-p.sem }()
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}
		start := p.cfg.Clock.Now()
		stop := p.logProgress(image, start)
		resp, err := p.pull(ctx, req)
		stop()
		if err != nil {
			return Result{}, err
		}
		res := Result{ImageRef: resp.ImageRef, Pull: p.cfg.Clock.Since(start)}
		sctx, cancel := context.WithTimeout(ctx, p.cfg.StatusTimeout)
		defer cancel()
		st, err := p.cfg.Client.ImageStatus(sctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: resp.ImageRef}})
		if err != nil {
			// The image is there; only its size is unknown.
			p.log.Debug("read size of pulled image", zap.String("image", image), zap.Error(err))
		} else {
			res.Size = st.GetImage().GetSize()
		}
		return res, nil
	}()
	p.mu.Lock()
	if p.flights[key] == f {
		delete(p.flights, key)
	}
	p.mu.Unlock()
	f.res, f.err = res, err
	close(f.done)
}

// logProgress logs every ProgressInterval while a pull lasts; the
// returned func stops it and returns once the logging goroutine ended.
func (p *Puller) logProgress(image string, start time.Time) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	t := p.cfg.Clock.NewTicker(p.cfg.ProgressInterval)
	go func() {
		defer wg.Done()
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C():
				p.log.Info("pulling image: still in progress", zap.String("image", image),
					zap.Duration("elapsed", p.cfg.Clock.Since(start).Round(time.Second)))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// pull pulls anonymously when there are no credentials, else with each in
// turn until one succeeds.
func (p *Puller) pull(ctx context.Context, req Request) (*runtimeapi.PullImageResponse, error) {
	if len(req.Auths) == 0 {
		return p.cfg.Client.PullImage(ctx, &runtimeapi.PullImageRequest{Image: req.Image, SandboxConfig: req.Sandbox})
	}
	var errs []error
	for _, auth := range req.Auths {
		resp, err := p.cfg.Client.PullImage(ctx, &runtimeapi.PullImageRequest{Image: req.Image, Auth: auth, SandboxConfig: req.Sandbox})
		if err == nil {
			return resp, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, utilerrors.NewAggregate(errs)
}

// flightKey identifies a pull: the image and a digest of the credentials,
// so that callers with different credentials do not share a pull (one
// might be allowed what the other is not).
func flightKey(req Request) string {
	h := sha256.New()
	for _, a := range req.Auths {
		for _, s := range []string{a.Username, a.Password, a.Auth, a.ServerAddress, a.IdentityToken, a.RegistryToken} {
			fmt.Fprintf(h, "%d:%s", len(s), s)
		}
		h.Write([]byte{0})
	}
	return req.Image.GetImage() + "\x00" + hex.EncodeToString(h.Sum(nil))
}
