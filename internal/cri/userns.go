package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UserNamespaces tells whether the runtime's default handler (the one
// pods without a runtimeClassName use) reports support for user
// namespaces with idmap mounts, the CRI's
// RuntimeHandlerFeatures.user_namespaces: nil when it does, otherwise an
// error saying why not.
//
// nodeagent does not run pods with hostUsers: false (it allocates no ID
// ranges); admission refuses them, and this check makes the refusal say
// whether the runtime could have run them.
func UserNamespaces(ctx context.Context, c Client, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := c.Status(cctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("read the runtime's features: %w", translate(err))
	}
	for _, h := range st.RuntimeHandlers {
		if h.Name != "" {
			continue
		}
		if h.Features.GetUserNamespaces() {
			return nil
		}
		return errors.New("the container runtime's default handler does not support user namespaces (CRI feature user_namespaces is false: it needs a runtime, kernel and file systems with idmap mounts)")
	}
	return errors.New("the container runtime does not report its handlers' features (CRI RuntimeHandlers), so user namespace support is unknown")
}
