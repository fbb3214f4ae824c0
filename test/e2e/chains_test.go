//go:build integration

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The handler chains on the real rig: an unsafe sysctl is refused at
// admission (Failed, SysctlForbidden) and never reaches the runtime; with
// --allow-privileged=false a privileged pod is kept Pending by the run
// chain (reason Forbidden, containers Blocked), not failed, and the
// others run.
func TestHandlerChains(t *testing.T) {
	t.Parallel()
	a := newAgent(t, "--allow-privileged=false")
	a.start()
	a.write("chains.yaml", `apiVersion: v1
kind: Pod
metadata: {name: sysctl}
spec:
  securityContext: {sysctls: [{name: kernel.msgmax, value: "65536"}]}
  containers:
  - {name: main, image: `+busybox+`, command: ["sh", "-c", "`+sleepLoop+`"]}
---
apiVersion: v1
kind: Pod
metadata: {name: priv}
spec:
  containers:
  - {name: main, image: `+busybox+`, command: ["sh", "-c", "`+sleepLoop+`"], securityContext: {privileged: true}}
---
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  containers:
  - {name: main, image: `+busybox+`, command: ["sh", "-c", "`+sleepLoop+`"]}
`)
	eventually(t, 60*time.Second, "plain pod running, sysctl pod refused, privileged pod blocked", func() bool {
		s, p, ok := a.status("sysctl"), a.status("priv"), a.status("plain")
		return s != nil && p != nil && ok != nil && ok.Status.Phase == v1.PodRunning &&
			s.Status.Phase == v1.PodFailed && s.Status.Reason == "SysctlForbidden" &&
			p.Status.Phase == v1.PodPending && p.Status.Reason == "Forbidden" &&
			len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "Blocked"
	})
	if n := len(a.sandboxes("sysctl")) + len(a.sandboxes("priv")); n != 0 {
		t.Fatalf("%d sandboxes of refused or blocked pods", n)
	}
	if p := a.status("priv"); !a.hasEvent(p, "Forbidden", "specified privileged container, but is disallowed") {
		t.Fatal("no Forbidden event for the blocked pod")
	}
}
