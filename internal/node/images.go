package node

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CRIImages is Config.Images from CRI ListImages: the runtime's images
// for the node status (LargestImages of them), each call bounded by
// timeout.
func CRIImages(c runtimeapi.ImageServiceClient, timeout time.Duration) func(context.Context) ([]v1.ContainerImage, error) {
	return func(ctx context.Context) ([]v1.ContainerImage, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		resp, err := c.ListImages(cctx, &runtimeapi.ListImagesRequest{})
		if err != nil {
			return nil, err
		}
		imgs := make([]v1.ContainerImage, len(resp.Images))
		for i, img := range resp.Images {
			imgs[i] = v1.ContainerImage{Names: append(append([]string{}, img.RepoDigests...), img.RepoTags...), SizeBytes: int64(img.GetSize())}
		}
		return LargestImages(imgs), nil
	}
}
