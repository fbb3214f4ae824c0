package critest

import (
	"context"
	"sort"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// This file is the fake's image store beyond pull and status: sizes,
// pinning, listing, removal and the image file system, for image GC.

// imageMeta is what the fake knows of an image ID besides its names.
type imageMeta struct {
	size     uint64
	pinned   bool
	uid      *int64 // the image's numeric user (SetImageUser)
	username string // or its user by name
}

// SetImageUser gives a present image (AddImage, SetImage, a pull) the
// user its config names: a numeric uid, or a name (uid nil). An image
// without one runs as root.
func (f *Fake) SetImageUser(image string, uid *int64, username string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ref := f.images[image]
	if f.imageMeta == nil {
		f.imageMeta = map[string]imageMeta{}
	}
	m := f.imageMeta[ref]
	m.uid, m.username = uid, username
	f.imageMeta[ref] = m
}

// SetImage makes image present with a size and pinning, as if pulled
// earlier (AddImage with details); images sharing ref are one image with
// several tags.
func (f *Fake) SetImage(image, ref string, size uint64, pinned bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[image] = ref
	if f.imageMeta == nil {
		f.imageMeta = map[string]imageMeta{}
	}
	m := f.imageMeta[ref]
	m.size, m.pinned = size, pinned
	f.imageMeta[ref] = m
}

// SetImageFs sets the mount point ImageFsInfo reports.
func (f *Fake) SetImageFs(mountpoint string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imageFs = mountpoint
}

// Images returns the names of the present images, sorted.
func (f *Fake) Images() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name := range f.images {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// hasRef reports whether an image has ID ref. f.mu must be held.
func (f *Fake) hasRef(ref string) bool {
	for _, r := range f.images {
		if r == ref {
			return true
		}
	}
	return false
}

// image builds the CRI Image of ID ref. f.mu must be held.
func (f *Fake) image(ref string) *runtimeapi.Image {
	m := f.imageMeta[ref]
	img := &runtimeapi.Image{Id: ref, Size: m.size, Pinned: m.pinned, Username: m.username}
	if m.uid != nil {
		img.Uid = &runtimeapi.Int64Value{Value: *m.uid}
	}
	for name, r := range f.images {
		if r == ref {
			img.RepoTags = append(img.RepoTags, name)
		}
	}
	sort.Strings(img.RepoTags)
	return img
}

// ListImages lists the present images, one per ID, sorted by ID.
func (f *Fake) ListImages(_ context.Context, in *runtimeapi.ListImagesRequest, _ ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ListImages", in); err != nil {
		return nil, err
	}
	refs := map[string]bool{}
	for _, r := range f.images {
		refs[r] = true
	}
	resp := &runtimeapi.ListImagesResponse{}
	for r := range refs {
		resp.Images = append(resp.Images, f.image(r))
	}
	sort.Slice(resp.Images, func(i, j int) bool { return resp.Images[i].Id < resp.Images[j].Id })
	return resp, nil
}

// RemoveImage removes an image given by name or ID, with all its names;
// removing an absent image succeeds, as CRI requires.
func (f *Fake) RemoveImage(_ context.Context, in *runtimeapi.RemoveImageRequest, _ ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("RemoveImage", in); err != nil {
		return nil, err
	}
	ref := in.GetImage().GetImage()
	if r, ok := f.images[ref]; ok {
		ref = r
	}
	for name, r := range f.images {
		if r == ref {
			delete(f.images, name)
		}
	}
	delete(f.imageMeta, ref)
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports the mount point set with SetImageFs and the sum of
// the image sizes as used bytes.
func (f *Fake) ImageFsInfo(_ context.Context, in *runtimeapi.ImageFsInfoRequest, _ ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.begin("ImageFsInfo", in); err != nil {
		return nil, err
	}
	var used uint64
	for _, m := range f.imageMeta {
		used += m.size
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp: f.clock.Now().UnixNano(),
		FsId:      &runtimeapi.FilesystemIdentifier{Mountpoint: f.imageFs},
		UsedBytes: &runtimeapi.UInt64Value{Value: used},
	}}}, nil
}
