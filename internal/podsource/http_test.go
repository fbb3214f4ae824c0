package podsource

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"
)

const httpPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: c, image: "busybox:1"}]
`

func TestHTTPSource(t *testing.T) {
	var mu sync.Mutex
	body, code := httpPodYAML, http.StatusOK
	var gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		gotHeader = r.Header.Get("X-Token")
		w.WriteHeader(code)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	var sets [][]*v1.Pod
	h, err := NewHTTP(HTTPConfig{
		URL: srv.URL, Header: http.Header{"X-Token": {"abc"}}, NodeName: "Node1",
		Clock: testclock.NewFakeClock(time.Unix(0, 0)), Logger: zaptest.NewLogger(t),
		Sink: func(p []*v1.Pod) { sets = append(sets, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := h.Fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if len(sets) != 1 || len(sets[0]) != 1 || sets[0][0].Name != "web-node1" || sets[0][0].Annotations[ConfigSourceAnnotation] != "http" {
		t.Fatalf("first fetch gave %+v", sets)
	}
	if gotHeader != "abc" {
		t.Fatalf("header X-Token = %q", gotHeader)
	}
	// A file pod with the same content has another UID.
	d, _ := Decode([]byte(httpPodYAML))
	DefaultStatic(d[0].Pod, "Node1", "file")
	if d[0].Pod.UID == sets[0][0].UID {
		t.Fatal("http and file pods of the same content share a UID")
	}
	// Same body: nothing; server error and broken body: error, nothing.
	if err := h.Fetch(ctx); err != nil || len(sets) != 1 {
		t.Fatalf("unchanged body: err %v, sets %d", err, len(sets))
	}
	mu.Lock()
	code = http.StatusInternalServerError
	mu.Unlock()
	if err := h.Fetch(ctx); err == nil || len(sets) != 1 {
		t.Fatalf("500: err %v, sets %d", err, len(sets))
	}
	mu.Lock()
	code, body = http.StatusOK, "kind: Pod\napiVersion: v1\nmetadata: {name: [\n"
	mu.Unlock()
	if err := h.Fetch(ctx); err == nil || len(sets) != 1 {
		t.Fatalf("broken body: err %v, sets %d", err, len(sets))
	}
	// A PodList with two pods, then an empty body: no pods.
	mu.Lock()
	body = `{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i:1"}]}},{"metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"i:1"}]}}]}`
	mu.Unlock()
	if err := h.Fetch(ctx); err != nil || len(sets) != 2 || len(sets[1]) != 2 {
		t.Fatalf("pod list: err %v, sets %+v", err, sets)
	}
	mu.Lock()
	body = ""
	mu.Unlock()
	if err := h.Fetch(ctx); err != nil || len(sets) != 3 || len(sets[2]) != 0 {
		t.Fatalf("empty body: err %v, sets %d", err, len(sets))
	}
}
