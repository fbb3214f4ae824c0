//go:build integration

package e2e

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Pods served at --manifest-url run beside the directory's; a changed body
// replaces them, a failing server keeps them, an emptied body removes them.
func TestManifestURL(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	body, code := sleeper("web", "one"), http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Node") == "" {
			http.Error(w, "missing header", http.StatusForbidden)
			return
		}
		w.WriteHeader(code)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	set := func(b string, c int) { mu.Lock(); body, code = b, c; mu.Unlock() }

	a := newAgent(t, "--manifest-url", srv.URL, "--manifest-url-header", "X-Node:yes", "--http-check-frequency", "1s")
	a.start()
	a.write("file.yaml", sleeper("fromfile", "f"))
	eventually(t, 60*time.Second, "url and file pods running", func() bool {
		return a.running("web", "main") != nil && a.running("fromfile", "main") != nil
	})
	sb := a.sandboxes("web")[0]
	if sb.Annotations["kubernetes.io/config.source"] != "http" {
		t.Errorf("config.source = %q, want http", sb.Annotations["kubernetes.io/config.source"])
	}
	set("", http.StatusInternalServerError)
	eventually(t, 10*time.Second, "failure logged", func() bool {
		return strings.Contains(a.out.String(), "manifest URL unusable")
	})
	if c := a.running("web", "main"); c == nil || len(a.sandboxes("web")) != 1 || a.sandboxes("web")[0].Id != sb.Id {
		t.Fatal("a failing server disturbed the pod")
	}
	set(sleeper("web", "two"), http.StatusOK)
	eventually(t, 60*time.Second, "replaced", func() bool {
		sbs := a.sandboxes("web")
		return len(sbs) == 1 && sbs[0].Id != sb.Id && a.running("web", "main") != nil
	})
	set("", http.StatusOK)
	eventually(t, 60*time.Second, "url pod removed", func() bool { return len(a.sandboxes("web")) == 0 })
	if a.running("fromfile", "main") == nil {
		t.Fatal("the file pod was disturbed")
	}
}
