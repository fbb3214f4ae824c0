package probe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestHTTPGetRedirects: a redirect to the same host is followed; one to
// another host is not (the check ends with the redirect, a success, and
// the other host never hears of it); a loop stops after 10.
func TestHTTPGetRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		elsewhere.Add(1)
		w.Write([]byte("other host")) //nolint:errcheck
	}))
	defer other.Close()
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/local":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/ok":
			w.Write([]byte("ok here")) //nolint:errcheck
		case "/away":
			// localhost is the same machine but not the same host name.
			http.Redirect(w, r, "http://localhost:"+otherPort+"/", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		}
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	get := func(path string) (string, error) {
		return HTTPGet(context.Background(), &v1.HTTPGetAction{Path: path}, host, port, "kube-probe/1.37")
	}
	if body, err := get("/local"); err != nil || body != "ok here" {
		t.Errorf("same-host redirect: %q, %v; want it followed", body, err)
	}
	if _, err := get("/away"); err != nil {
		t.Errorf("redirect to another host: %v; want the redirect itself, a success", err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("the other host got %d requests; want none", n)
	}
	if _, err := get("/loop"); err == nil || !strings.Contains(err.Error(), "stopped after 10 redirects") {
		t.Errorf("redirect loop: %v; want stopped after 10", err)
	}
}
