package cri_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
)

// The poller keeps RuntimeReady as last read, nil before the first read,
// and runs its companion read with every poll.
func TestHealthPoller(t *testing.T) {
	tests := []struct {
		name      string
		statusErr error
		poll      bool
		wantErr   bool
		wantAlso  int
	}{
		{name: "not read yet"},
		{name: "ready", poll: true, wantAlso: 1},
		{name: "status call fails", statusErr: errors.New("connection refused"), poll: true, wantErr: true, wantAlso: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			f := critest.New(clk)
			if tt.statusErr != nil {
				f.SetError("Status", tt.statusErr)
			}
			also := 0
			h := cri.NewHealthPoller(f, clk, func(context.Context) { also++ })
			if tt.poll {
				h.Poll(context.Background())
			}
			got := struct {
				Err  bool
				Also int
			}{h.Err() != nil, also}
			want := struct {
				Err  bool
				Also int
			}{tt.wantErr, tt.wantAlso}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
