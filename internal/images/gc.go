package images

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// GCClient is the part of the CRI runtime and image services GC uses.
type GCClient interface {
	ListImages(ctx context.Context, in *runtimeapi.ListImagesRequest, opts ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error)
	ImageStatus(ctx context.Context, in *runtimeapi.ImageStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error)
	RemoveImage(ctx context.Context, in *runtimeapi.RemoveImageRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error)
	ImageFsInfo(ctx context.Context, in *runtimeapi.ImageFsInfoRequest, opts ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error)
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
}

// FsStats returns the capacity and available bytes of the file system
// holding path.
type FsStats func(path string) (capacity, available uint64, err error)

// Events the kubelet records on its node when image GC falls short.
const (
	EventFreeDiskSpaceFailed = "FreeDiskSpaceFailed"
	EventImageGCFailed       = "ImageGCFailed"
	EventInvalidDiskCapacity = "InvalidDiskCapacity"
)

// GCConfig configures a GC. The thresholds are percentages of the image
// file system's capacity.
type GCConfig struct {
	Client GCClient
	Clock  clock.WithTicker
	Logger *zap.Logger
	// HighThresholdPercent: at or over this usage GC frees space (85;
	// 100 turns threshold GC off). LowThresholdPercent: down to below
	// this (80). Validated 0 <= low <= high <= 100.
	HighThresholdPercent, LowThresholdPercent int
	// MinAge: an image first seen less than MinAge ago is kept (2m).
	// MaxAge: an image unused for longer is removed whatever the usage;
	// 0 turns it off. MaxAge, when set, must exceed MinAge.
	MinAge, MaxAge time.Duration
	// Period is how often Run collects (the kubelet's 5m when zero).
	Period time.Duration
	// SandboxImage, if set, is never removed (the kubelet's
	// --pod-infra-container-image); runtimes also pin their own.
	SandboxImage string
	// Stat reads the image file system's capacity; statfs(2) when nil.
	Stat FsStats
	// CallTimeout bounds each CRI call (2m when zero).
	CallTimeout time.Duration
	// Event, if set, receives the node warnings (FreeDiskSpaceFailed,
	// ImageGCFailed, InvalidDiskCapacity); they are logged either way.
	Event func(eventType, reason, message string)
}

// imageRecord is what GC remembers of an image between collections.
type imageRecord struct {
	firstDetected time.Time
	lastUsed      time.Time // zero: never seen in use
	size          uint64
	pinned        bool
	tags          []string
}

// GC removes images no container uses, as the kubelet's
// realImageGCManager.
type GC struct {
	cfg GCConfig
	log *zap.Logger
	// runMu serialises collections.
	runMu sync.Mutex

	mu      sync.Mutex
	records map[string]*imageRecord // by image ID
}

// NewGC validates cfg and returns a GC.
func NewGC(cfg GCConfig) (*GC, error) {
	if cfg.Client == nil || cfg.Clock == nil || cfg.Logger == nil {
		return nil, errors.New("image gc: Client, Clock and Logger are required")
	}
	var errs []error
	if cfg.HighThresholdPercent < 0 || cfg.HighThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("high threshold %d%% must be in [0, 100]", cfg.HighThresholdPercent))
	}
	if cfg.LowThresholdPercent < 0 || cfg.LowThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("low threshold %d%% must be in [0, 100]", cfg.LowThresholdPercent))
	}
	if cfg.LowThresholdPercent > cfg.HighThresholdPercent {
		errs = append(errs, fmt.Errorf("low threshold %d%% must not exceed the high threshold %d%%", cfg.LowThresholdPercent, cfg.HighThresholdPercent))
	}
	if cfg.MinAge < 0 || cfg.MaxAge < 0 {
		errs = append(errs, errors.New("image ages must be >= 0"))
	}
	if cfg.MaxAge > 0 && cfg.MaxAge <= cfg.MinAge {
		errs = append(errs, fmt.Errorf("maximum age %v must be greater than the minimum age %v", cfg.MaxAge, cfg.MinAge))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("image gc: %w", err)
	}
	if cfg.Period <= 0 {
		cfg.Period = 5 * time.Minute
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 2 * time.Minute
	}
	if cfg.Stat == nil {
		cfg.Stat = statfs
	}
	return &GC{cfg: cfg, log: cfg.Logger.Named("imagegc"), records: map[string]*imageRecord{}}, nil
}

// Run collects now and every Period until ctx is done. A failure is
// logged; two in a row make an ImageGCFailed node event, as the kubelet
// (the first may be a runtime still starting).
func (g *GC) Run(ctx context.Context) {
	t := g.cfg.Clock.NewTicker(g.cfg.Period)
	defer t.Stop()
	failedBefore := false
	for {
		if err := g.GarbageCollect(ctx); err != nil && ctx.Err() == nil {
			if failedBefore {
				g.log.Error("image garbage collection failed multiple times in a row", zap.String("event", EventImageGCFailed), zap.Error(err))
				g.event(EventImageGCFailed, err.Error())
			} else {
				g.log.Warn("image garbage collection failed once; stats may not be ready yet", zap.Error(err))
			}
			failedBefore = true
		} else {
			failedBefore = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// candidate is an image GC may remove, with what orders it.
type candidate struct {
	id string
	imageRecord
}

// GarbageCollect runs one collection: detect images and their use,
// remove those unused for longer than MaxAge, then, when usage is at or
// over the high threshold, free space down to the low one. It returns an
// error when it could not read what it needs or could not free enough.
//
// Calls are serialised: Run's periodic one and the eviction manager's
// (disk pressure) may meet.
func (g *GC) GarbageCollect(ctx context.Context) error {
	g.runMu.Lock()
	defer g.runMu.Unlock()
	now := g.cfg.Clock.Now()
	cands, err := g.detect(ctx, now)
	if err != nil {
		return err
	}
	cands, ageErr := g.freeOld(ctx, cands, now)
	capacity, available, mount, err := g.fsStats(ctx)
	if err != nil {
		return errors.Join(ageErr, err)
	}
	if available > capacity {
		available = capacity
	}
	if capacity == 0 {
		err := fmt.Errorf("invalid capacity 0 on image filesystem %s", mount)
		g.log.Warn("image garbage collection", zap.String("event", EventInvalidDiskCapacity), zap.Error(err))
		g.event(EventInvalidDiskCapacity, err.Error())
		return errors.Join(ageErr, err)
	}
	usage := 100 - int(available*100/capacity)
	if usage < g.cfg.HighThresholdPercent {
		g.log.Debug("image file system usage under the high threshold", zap.Int("usagePercent", usage), zap.Int("highThresholdPercent", g.cfg.HighThresholdPercent))
		return ageErr
	}
	toFree := int64(capacity)*int64(100-g.cfg.LowThresholdPercent)/100 - int64(available)
	g.log.Info("image file system usage over the high threshold; freeing space down to the low threshold",
		zap.Int("usagePercent", usage), zap.Int("highThresholdPercent", g.cfg.HighThresholdPercent),
		zap.Int("lowThresholdPercent", g.cfg.LowThresholdPercent), zap.Int64("bytesToFree", toFree))
	freed, err := g.freeSpace(ctx, cands, toFree, now)
	if freed < toFree {
		msg := fmt.Sprintf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", toFree, freed)
		g.log.Warn("image garbage collection could not free enough space", zap.String("event", EventFreeDiskSpaceFailed),
			zap.Int64("bytesToFree", toFree), zap.Int64("bytesFreed", freed), zap.Error(err))
		g.event(EventFreeDiskSpaceFailed, msg)
		return errors.Join(ageErr, err, errors.New(msg))
	}
	return errors.Join(ageErr, err)
}

// AnnotationImageVolumes, on a container the agent created, lists the
// image references of the image volumes it mounts, comma-separated: they
// are in use as long as the container exists.
const AnnotationImageVolumes = "io.nodeagent.container.image-volumes"

// detect lists images and containers, updates the records (first seen,
// last used, size, pinned), forgets images gone, and returns the images
// that may be removed — neither in use nor pinned — least recently used
// first (never used before used; then first detected first).
func (g *GC) detect(ctx context.Context, now time.Time) ([]candidate, error) {
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	imgs, err := g.cfg.Client.ListImages(cctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	ctrs, err := g.cfg.Client.ListContainers(cctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	// Every container counts, whatever its state and whoever made it,
	// with the images it mounts as volumes.
	used := map[string]bool{}
	for _, c := range ctrs.Containers {
		refs := []string{c.ImageId, c.ImageRef, c.GetImage().GetImage()}
		if v := c.Annotations[AnnotationImageVolumes]; v != "" {
			refs = append(refs, strings.Split(v, ",")...)
		}
		for _, ref := range refs {
			if ref != "" {
				used[ref] = true
			}
		}
	}
	if g.cfg.SandboxImage != "" {
		used[g.cfg.SandboxImage] = true
		st, err := g.cfg.Client.ImageStatus(cctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: g.cfg.SandboxImage}})
		if err == nil && st.GetImage() != nil {
			used[st.Image.Id] = true
		}
	}
	inUse := func(img *runtimeapi.Image) bool {
		if used[img.Id] {
			return true
		}
		for _, n := range append(append([]string{}, img.RepoTags...), img.RepoDigests...) {
			if used[n] {
				return true
			}
		}
		return false
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	seen := map[string]bool{}
	var cands []candidate
	for _, img := range imgs.Images {
		seen[img.Id] = true
		r, ok := g.records[img.Id]
		if !ok {
			r = &imageRecord{firstDetected: now}
			g.records[img.Id] = r
		}
		r.size, r.pinned, r.tags = img.Size, img.Pinned, img.RepoTags
		if inUse(img) {
			r.lastUsed = now
			continue
		}
		if r.pinned {
			continue
		}
		cands = append(cands, candidate{id: img.Id, imageRecord: *r})
	}
	for id := range g.records {
		if !seen[id] {
			delete(g.records, id)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		if !a.firstDetected.Equal(b.firstDetected) {
			return a.firstDetected.Before(b.firstDetected)
		}
		return a.id < b.id
	})
	return cands, nil
}

// freeOld removes the candidates unused for longer than MaxAge and
// returns the others. An image never seen in use counts from when it was
// first seen, so nothing goes before MaxAge has passed since the GC
// started (the kubelet's rule), nor an image pulled a moment ago whose
// container is not created yet; and since MaxAge > MinAge, no image
// younger than MinAge.
func (g *GC) freeOld(ctx context.Context, cands []candidate, now time.Time) ([]candidate, error) {
	if g.cfg.MaxAge == 0 {
		return cands, nil
	}
	var (
		keep []candidate
		errs []error
	)
	for _, c := range cands {
		last := c.lastUsed
		if last.IsZero() {
			last = c.firstDetected
		}
		if now.Sub(last) <= g.cfg.MaxAge {
			keep = append(keep, c)
			continue
		}
		if err := g.remove(ctx, c, "age"); err != nil {
			errs = append(errs, err)
			keep = append(keep, c)
		}
	}
	return keep, errors.Join(errs...)
}

// freeSpace removes candidates, in order, until toFree bytes are freed,
// skipping those first seen less than MinAge ago. It returns the bytes
// freed.
func (g *GC) freeSpace(ctx context.Context, cands []candidate, toFree int64, now time.Time) (int64, error) {
	var (
		freed int64
		errs  []error
	)
	for _, c := range cands {
		if freed >= toFree {
			break
		}
		if now.Sub(c.firstDetected) < g.cfg.MinAge {
			g.log.Debug("image younger than the minimum age; kept", zap.String("imageID", c.id), zap.Strings("tags", c.tags))
			continue
		}
		if err := g.remove(ctx, c, "space"); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += int64(c.size)
	}
	return freed, errors.Join(errs...)
}

// remove removes one image and forgets it.
func (g *GC) remove(ctx context.Context, c candidate, reason string) error {
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	if _, err := g.cfg.Client.RemoveImage(cctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: c.id}}); err != nil {
		return fmt.Errorf("remove image %s: %w", c.id, err)
	}
	g.mu.Lock()
	delete(g.records, c.id)
	g.mu.Unlock()
	g.log.Info("removed unused image", zap.String("imageID", c.id), zap.Strings("tags", c.tags),
		zap.Uint64("size", c.size), zap.String("reason", reason))
	return nil
}

// fsStats reads the image file system's mount point from the runtime and
// its capacity and free space from the kernel.
func (g *GC) fsStats(ctx context.Context) (capacity, available uint64, mount string, err error) {
	cctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	info, err := g.cfg.Client.ImageFsInfo(cctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return 0, 0, "", fmt.Errorf("get image file system info: %w", err)
	}
	if len(info.ImageFilesystems) == 0 || info.ImageFilesystems[0].GetFsId().GetMountpoint() == "" {
		return 0, 0, "", errors.New("the runtime reports no image file system")
	}
	mount = info.ImageFilesystems[0].FsId.Mountpoint
	capacity, available, err = g.cfg.Stat(mount)
	if err != nil {
		return 0, 0, mount, fmt.Errorf("stat image file system %s: %w", mount, err)
	}
	return capacity, available, mount, nil
}

func (g *GC) event(reason, msg string) {
	if g.cfg.Event != nil {
		g.cfg.Event("Warning", reason, msg)
	}
}
