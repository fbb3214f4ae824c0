package server

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// User is an authenticated requester.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Anonymous is the user of requests without credentials, when allowed.
var Anonymous = User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// TokenReviewer creates TokenReviews: client-go's
// AuthenticationV1().TokenReviews() satisfies it.
type TokenReviewer interface {
	Create(ctx context.Context, tr *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

// AuthnConfig configures the Authenticator. With neither ClientCAs nor
// Tokens nor Anonymous, every request is refused.
type AuthnConfig struct {
	ClientCAs *x509.CertPool // verifies client certificates; nil: not accepted
	Tokens    TokenReviewer  // reviews bearer tokens; nil: not accepted
	Anonymous bool           // requests without credentials are system:anonymous
	CacheTTL  time.Duration  // how long a token review is kept (default 2m)
	Clock     clock.PassiveClock
}

// Authenticator identifies a request's user. Safe for concurrent use.
type Authenticator struct {
	cfg AuthnConfig
	mu  sync.Mutex
	// tokens caches reviews by the token's SHA-256 (the token itself is
	// not kept).
	tokens map[[sha256.Size]byte]tokenEntry
	// reviews bounds and coalesces the TokenReviews in flight.
	reviews *reviewGate
}

type tokenEntry struct {
	user    *User // nil: not authenticated
	expires time.Time
}

// NewAuthenticator builds an Authenticator.
func NewAuthenticator(cfg AuthnConfig) *Authenticator {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = 2 * time.Minute
	}
	return &Authenticator{cfg: cfg, tokens: map[[sha256.Size]byte]tokenEntry{}, reviews: newReviewGate()}
}

// errUnauthenticated is credentials given but not accepted.
var errUnauthenticated = errors.New("unauthenticated")

// Authenticate returns the request's user; errUnauthenticated (wrapped)
// when its credentials are refused or it has none and anonymous requests
// are off, another error when a review could not be made.
func (a *Authenticator) Authenticate(r *http.Request) (*User, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && a.cfg.ClientCAs != nil {
		return a.x509(r.TLS.PeerCertificates)
	}
	if h := r.Header.Get("Authorization"); h != "" && a.cfg.Tokens != nil {
		scheme, token, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(token) != "" {
			return a.token(r.Context(), strings.TrimSpace(token))
		}
	}
	if a.cfg.Anonymous {
		u := Anonymous
		return &u, nil
	}
	return nil, errUnauthenticated
}

func (a *Authenticator) x509(chain []*x509.Certificate) (*User, error) {
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots: a.cfg.ClientCAs, Intermediates: inter, CurrentTime: a.cfg.Clock.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: client certificate: %v", errUnauthenticated, err)
	}
	subj := chain[0].Subject
	if subj.CommonName == "" {
		return nil, fmt.Errorf("%w: client certificate without a common name", errUnauthenticated)
	}
	return &User{Name: subj.CommonName, Groups: append([]string{}, subj.Organization...)}, nil
}

func (a *Authenticator) token(ctx context.Context, token string) (*User, error) {
	key := sha256.Sum256([]byte(token))
	e, ok := a.cachedToken(key)
	if !ok {
		// One review per token in flight; a review that starts after
		// another stored its answer finds that instead.
		v, err := a.reviews.do(ctx, string(key[:]), func(ctx context.Context) (any, error) {
			if e, ok := a.cachedToken(key); ok {
				return e, nil
			}
			return a.review(ctx, key, token)
		})
		if err != nil {
			return nil, fmt.Errorf("token review: %w", err) // not cached: the next request asks again
		}
		e = v.(tokenEntry)
	}
	if e.user == nil {
		return nil, fmt.Errorf("%w: token refused", errUnauthenticated)
	}
	return e.user, nil
}

// cachedToken is the unexpired review of the token hashed to key.
func (a *Authenticator) cachedToken(key [sha256.Size]byte) (tokenEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.tokens[key]
	return e, ok && a.cfg.Clock.Now().Before(e.expires)
}

// review asks the API server about token and caches the answer.
func (a *Authenticator) review(ctx context.Context, key [sha256.Size]byte, token string) (tokenEntry, error) {
	tr, err := a.cfg.Tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return tokenEntry{}, err
	}
	now := a.cfg.Clock.Now()
	e := tokenEntry{expires: now.Add(a.cfg.CacheTTL)}
	if tr.Status.Authenticated {
		u := tr.Status.User
		e.user = &User{Name: u.Username, UID: u.UID, Groups: u.Groups}
		if len(u.Extra) > 0 {
			e.user.Extra = map[string][]string{}
			for k, v := range u.Extra {
				e.user.Extra[k] = v
			}
		}
	}
	a.mu.Lock()
	pruneExpired(a.tokens, now, func(e tokenEntry) time.Time { return e.expires })
	a.tokens[key] = e
	a.mu.Unlock()
	return e, nil
}

// pruneExpired drops expired entries once a cache is large, so that a
// stream of distinct credentials cannot grow it without bound.
func pruneExpired[K comparable, V any](m map[K]V, now time.Time, expires func(V) time.Time) {
	if len(m) < 1024 {
		return
	}
	for k, v := range m {
		if !now.Before(expires(v)) {
			delete(m, k)
		}
	}
}
