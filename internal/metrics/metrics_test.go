package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestHandler(t *testing.T) {
	m := New(Gauges{Workers: func() float64 { return 3 }, DroppedEvents: func() float64 { return 7 }})
	m.ObserveIteration("pleg", 2*time.Millisecond)
	m.ObserveRelist(time.Millisecond)
	m.ObservePodSync(10 * time.Millisecond)
	healthErr := error(nil)
	srv := httptest.NewServer(m.Handler(func() error { return healthErr }))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "ok" {
		t.Fatalf("healthz = %d %q", code, body)
	}
	healthErr = errors.New("pleg was last seen active 4m ago")
	if code, body := get("/healthz"); code != 500 || !strings.Contains(body, "pleg") {
		t.Fatalf("unhealthy healthz = %d %q", code, body)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`nodeagent_sync_loop_iteration_duration_seconds_count{kind="pleg"} 1`,
		"nodeagent_pleg_relist_duration_seconds_count 1",
		"nodeagent_pod_worker_sync_duration_seconds_count 1",
		"nodeagent_pod_workers 3",
		"nodeagent_pleg_events_dropped_total 7",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}
