package cri_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
)

// handlersFake reports runtime handlers in its status.
type handlersFake struct {
	*critest.Fake
	handlers []*runtimeapi.RuntimeHandler
}

func (f handlersFake) Status(ctx context.Context, in *runtimeapi.StatusRequest, opts ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	resp, err := f.Fake.Status(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	resp.RuntimeHandlers = f.handlers
	return resp, nil
}

func TestUserNamespaces(t *testing.T) {
	handler := func(name string, userns bool) *runtimeapi.RuntimeHandler {
		return &runtimeapi.RuntimeHandler{Name: name, Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: userns}}
	}
	tests := []struct {
		name     string
		handlers []*runtimeapi.RuntimeHandler
		wantErr  string
	}{
		{name: "default handler supports them", handlers: []*runtimeapi.RuntimeHandler{handler("", true), handler("runc", true)}},
		{name: "default handler does not", handlers: []*runtimeapi.RuntimeHandler{handler("", false), handler("crun", true)}, wantErr: "does not support user namespaces"},
		{name: "no features", handlers: []*runtimeapi.RuntimeHandler{{Name: ""}}, wantErr: "does not support user namespaces"},
		{name: "no handlers reported", wantErr: "does not report"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := handlersFake{Fake: critest.New(testclock.NewFakeClock(time.Unix(0, 0))), handlers: tt.handlers}
			err := cri.UserNamespaces(context.Background(), c, time.Second)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("UserNamespaces() = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}
