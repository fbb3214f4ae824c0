package server

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		verb               string
		subs               []string
	}{
		{"exec post", "POST", "/exec/ns/p/c", "create", []string{"proxy"}},
		{"exec get", "GET", "/exec/ns/p/c", "get", []string{"proxy"}},
		{"port-forward", "GET", "/portForward/ns/p", "get", []string{"proxy"}},
		{"pods", "GET", "/pods", "get", []string{"pods", "proxy"}},
		{"pods slash", "GET", "/pods/", "get", []string{"pods", "proxy"}},
		{"running pods", "GET", "/runningpods/", "get", []string{"pods", "proxy"}},
		{"podsfoo is not pods", "GET", "/podsfoo", "get", []string{"proxy"}},
		{"healthz", "GET", "/healthz", "get", []string{"healthz", "proxy"}},
		{"healthz sub", "GET", "/healthz/ping", "get", []string{"healthz", "proxy"}},
		{"configz", "GET", "/configz", "get", []string{"configz", "proxy"}},
		{"statusz", "GET", "/statusz", "get", []string{"statusz", "proxy"}},
		{"stats", "GET", "/stats/summary", "get", []string{"stats"}},
		{"metrics", "GET", "/metrics", "get", []string{"metrics"}},
		{"metrics resource", "GET", "/metrics/resource", "get", []string{"metrics"}},
		{"logs", "GET", "/logs/syslog", "get", []string{"log"}},
		{"checkpoint", "POST", "/checkpoint/ns/p/c", "create", []string{"checkpoint"}},
		{"container logs", "GET", "/containerLogs/ns/p/c", "get", []string{"proxy"}},
		{"put", "PUT", "/x", "update", []string{"proxy"}},
		{"patch", "PATCH", "/x", "patch", []string{"proxy"}},
		{"delete", "DELETE", "/x", "delete", []string{"proxy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &User{Name: "alice"}
			got := RequestAttributes(u, httptest.NewRequest(tc.method, tc.path, nil), "node1")
			var want []Attributes
			for _, s := range tc.subs {
				want = append(want, Attributes{User: u, Verb: tc.verb, Subresource: s, Name: "node1", Path: tc.path})
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("attributes (-want +got):\n%s", d)
			}
		})
	}
}

// sarReactor allows alice nodes/proxy and nothing else, and counts the
// reviews.
func sarReactor(calls *int, fail *bool) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		if *fail {
			return true, nil, errors.New("apiserver away")
		}
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && ra.Resource == "nodes" && ra.Subresource == "proxy" && ra.Name == "node1" && ra.Version == "v1"
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC rule"
		}
		return true, sar, nil
	}
}

func TestWebhookAuthorizeAndCache(t *testing.T) {
	var calls int
	var fail bool
	cs := fake.NewSimpleClientset()
	cs.PrependReactor("create", "subjectaccessreviews", sarReactor(&calls, &fail))
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	w := &Webhook{Reviews: cs.AuthorizationV1().SubjectAccessReviews(), Clock: clk}
	ctx := context.Background()
	alice := Attributes{User: &User{Name: "alice", Groups: []string{"g"}}, Verb: "get", Subresource: "proxy", Name: "node1"}
	bob := Attributes{User: &User{Name: "bob"}, Verb: "get", Subresource: "proxy", Name: "node1"}

	check := func(a Attributes, wantAllowed bool, wantCalls int) {
		t.Helper()
		ok, reason, err := w.Authorize(ctx, a)
		if err != nil || ok != wantAllowed {
			t.Fatalf("%s: allowed %v (%q), %v; want %v", a.User.Name, ok, reason, err, wantAllowed)
		}
		if calls != wantCalls {
			t.Fatalf("%s: %d reviews, want %d", a.User.Name, calls, wantCalls)
		}
	}
	check(alice, true, 1)
	check(alice, true, 1) // cached
	check(bob, false, 2)
	check(bob, false, 2) // cached
	clk.Step(31 * time.Second)
	check(bob, false, 3)  // denial expired after 30s
	check(alice, true, 3) // allowance still cached
	other := alice
	other.Subresource = "stats"
	check(other, false, 4) // other attributes, other entry
	clk.Step(5 * time.Minute)
	check(alice, true, 5) // allowance expired after 5m

	fail = true
	clk.Step(time.Hour)
	if _, _, err := w.Authorize(ctx, alice); err == nil {
		t.Fatal("review error not returned")
	}
	fail = false
	check(alice, true, 7) // errors are not cached
}
