package server

import (
	"context"
	"time"

	"golang.org/x/sync/singleflight"
)

// maxReviews is how many TokenReviews (and, separately,
// SubjectAccessReviews) the node server has in flight at once;
// reviewTimeout bounds each.
const (
	maxReviews    = 16
	reviewTimeout = 30 * time.Second
)

// reviewGate bounds and coalesces the node server's reviews by the API
// server: identical reviews in flight share one call, and at most
// maxReviews run at once — so a flood of connections with random tokens
// cannot queue thousands of calls on the agent's API client. A review
// runs detached from the request that started it (others may share it),
// within reviewTimeout; a caller waits no longer than its own request.
type reviewGate struct {
	sf  singleflight.Group
	sem chan struct{}
}

func newReviewGate() *reviewGate {
	return &reviewGate{sem: make(chan struct{}, maxReviews)}
}

// do runs fn for key once for every caller waiting on the same key.
func (g *reviewGate) do(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	ch := g.sf.DoChan(key, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		select {
		case g.sem <- struct{}{}:
		case <-rctx.Done():
			return nil, rctx.Err()
		}
		defer func() { <-g.sem }()
		return fn(rctx)
	})
	select {
	case r := <-ch:
		return r.Val, r.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
