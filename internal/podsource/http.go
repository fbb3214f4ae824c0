package podsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// HTTPConfig configures a manifest-URL source (the kubelet's --manifest-url).
type HTTPConfig struct {
	URL      string
	Header   http.Header
	NodeName string
	// Period is the poll period (--http-check-frequency).
	Period time.Duration
	Clock  clock.WithTicker
	Logger *zap.Logger
	Client *http.Client
	Sink   func(pods []*v1.Pod)
	// Problems, if set, receives {URL: reason} when a fetch fails and an
	// empty map when one succeeds again.
	Problems func(map[string]string)
}

// HTTP polls a URL that serves Pod manifests (one or more YAML or JSON
// documents, or a v1 PodList). A failed fetch or a broken body keeps the
// pods of the last good one; an unchanged body does nothing.
type HTTP struct {
	cfg      HTTPConfig
	log      *zap.Logger
	lastBody []byte
	seen     bool
}

// NewHTTP validates cfg and returns an HTTP source.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if cfg.URL == "" || cfg.NodeName == "" || cfg.Sink == nil || cfg.Logger == nil || cfg.Clock == nil {
		return nil, errors.New("manifest URL source: URL, NodeName, Sink, Logger and Clock are required")
	}
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	return &HTTP{cfg: cfg, log: cfg.Logger.Named("podsource").With(zap.String("source", pod.SourceHTTP), zap.String("url", cfg.URL))}, nil
}

// Fetch polls the URL once and hands the pods to the sink when the body
// changed (or on the first good fetch).
func (h *HTTP) Fetch(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.cfg.URL, nil)
	if err != nil {
		return fmt.Errorf("manifest URL: %w", err)
	}
	for k, vs := range h.cfg.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch manifest URL: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 10<<20))
	if err != nil {
		return fmt.Errorf("read manifest URL: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("manifest URL answered %s", resp.Status)
	}
	if h.seen && bytes.Equal(body, h.lastBody) {
		return nil
	}
	pods, err := StaticPods(body, h.cfg.NodeName, pod.SourceHTTP, h.log)
	if err != nil {
		return fmt.Errorf("manifest URL body: %w", err)
	}
	h.lastBody, h.seen = body, true
	h.cfg.Sink(pods)
	return nil
}

// Run fetches at once and then every Period until ctx ends.
func (h *HTTP) Run(ctx context.Context) error {
	t := h.cfg.Clock.NewTicker(h.cfg.Period)
	defer t.Stop()
	failing := false
	for {
		err := h.Fetch(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			h.log.Error("manifest URL unusable; its pods keep running as last read", zap.Error(err))
			if h.cfg.Problems != nil {
				h.cfg.Problems(map[string]string{h.cfg.URL: err.Error()})
			}
			failing = true
		case err == nil && failing:
			if h.cfg.Problems != nil {
				h.cfg.Problems(map[string]string{})
			}
			failing = false
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}
