package server

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// gatedReviewer answers TokenReviews once release is closed, counting
// the calls and the most in flight at once.
type gatedReviewer struct {
	release            chan struct{}
	calls, now, maxNow atomic.Int32
	entered            chan struct{}
}

func (g *gatedReviewer) Create(ctx context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	g.calls.Add(1)
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for {
		m := g.maxNow.Load()
		if n <= m || g.maxNow.CompareAndSwap(m, n) {
			break
		}
	}
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := tr.DeepCopy()
	out.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "u-" + tr.Spec.Token}}
	return out, nil
}

func bearer(token string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "https://node/pods", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// Concurrent requests with one token make one TokenReview; requests with
// many distinct tokens have at most maxReviews in flight at once.
func TestTokenReviewsAreCoalescedAndBounded(t *testing.T) {
	g := &gatedReviewer{release: make(chan struct{}), entered: make(chan struct{}, 1000)}
	a := NewAuthenticator(AuthnConfig{Tokens: g})
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if u, err := a.Authenticate(bearer("same")); err != nil || u.Name != "u-same" {
				t.Errorf("Authenticate = %v, %v", u, err)
			}
		}()
	}
	<-g.entered // the one review is in flight; the 49 others wait for it
	close(g.release)
	wg.Wait()
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("%d TokenReviews for one token asked 50 times at once, want 1", n)
	}

	g = &gatedReviewer{release: make(chan struct{}), entered: make(chan struct{}, 1000)}
	a = NewAuthenticator(AuthnConfig{Tokens: g})
	for i := range 3 * maxReviews {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.Authenticate(bearer(fmt.Sprint("t", i)))
		}()
	}
	for range maxReviews { // the gate fills up
		<-g.entered
	}
	select {
	case <-g.entered:
		t.Fatalf("more than %d reviews in flight at once", maxReviews)
	case <-time.After(100 * time.Millisecond): // a check of absence: the gate holds the rest
	}
	close(g.release)
	wg.Wait()
	if m := g.maxNow.Load(); m > maxReviews {
		t.Fatalf("%d reviews were in flight at once, want at most %d", m, maxReviews)
	}
	if n := g.calls.Load(); n != 3*maxReviews {
		t.Fatalf("%d reviews, want one per token (%d)", n, 3*maxReviews)
	}
}

// Only the streams escape the write timeout.
func TestIsStream(t *testing.T) {
	for path, want := range map[string]bool{
		"/exec/default/p/c?command=sh":            true,
		"/attach/default/p/c":                     true,
		"/portForward/default/p":                  true,
		"/containerLogs/default/p/c?follow=true":  true,
		"/containerLogs/default/p/c?follow=1":     true,
		"/containerLogs/default/p/c?tailLines=10": false,
		"/pods":            false,
		"/stats/summary":   false,
		"/run/default/p/c": false,
		"/containerLogs/default/p/c?follow=false": false,
		"/configz":          false,
		"/metrics/resource": false,
		"/exec-nothing":     false,
	} {
		r, _ := http.NewRequest(http.MethodGet, "https://node"+path, nil)
		if got := isStream(r); got != want {
			t.Errorf("isStream(%s) = %v, want %v", path, got, want)
		}
	}
}
