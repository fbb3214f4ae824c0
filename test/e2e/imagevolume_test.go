//go:build integration

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image volumes (volumes[].image) on the real runtime: on containerd 2.2+
// the busybox image is mounted read-only at /img (its /etc/passwd read
// there) and its etc directory through a subPath; on a runtime without
// image volumes (Debian's containerd 1.6) the container is refused with
// CreateContainerConfigError naming the runtime's version, and nothing is
// created.
func TestImageVolume(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	v, err := conn.Version(ctx, &runtimeapi.VersionRequest{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	// The pod mounts a sub path of the image: containerd 2.2 or newer.
	var major, minor int
	fmt.Sscanf(strings.TrimPrefix(v.RuntimeVersion, "v"), "%d.%d", &major, &minor)
	supported := major > 2 || (major == 2 && minor >= 2)
	a := newAgent(t)
	a.start()
	a.write("imgvol.yaml", `apiVersion: v1
kind: Pod
metadata: {name: imgvol}
spec:
  volumes:
  - name: img
    image: {reference: `+busybox+`, pullPolicy: IfNotPresent}
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts:
    - {name: img, mountPath: /img}
    - {name: img, mountPath: /img-etc, subPath: etc}
`)
	if !supported {
		eventually(t, 60*time.Second, "the image-volume pod refused with CreateContainerConfigError", func() bool {
			return a.waiting("imgvol") == "CreateContainerConfigError"
		})
		msg := a.status("imgvol").Status.ContainerStatuses[0].State.Waiting.Message
		if want := "does not support image volumes"; !strings.Contains(msg, want) || !strings.Contains(msg, v.RuntimeVersion) {
			t.Errorf("waiting message = %q, want the runtime's version %s and %q", msg, v.RuntimeVersion, want)
		}
		if cs := a.containers("imgvol", "main"); len(cs) != 0 {
			t.Errorf("containers created on a runtime without image volumes: %v", cs)
		}
		return
	}
	eventually(t, 60*time.Second, "the image-volume pod running", func() bool {
		return a.running("imgvol", "main") != nil
	})
	c := a.running("imgvol", "main")
	if got := execIn(t, c.Id, "head", "-n", "1", "/img/etc/passwd"); !strings.HasPrefix(got, "root:x:0:0:") {
		t.Errorf("/img/etc/passwd starts %q, want the image's root entry", got)
	}
	if got := execIn(t, c.Id, "head", "-n", "1", "/img-etc/passwd"); !strings.HasPrefix(got, "root:x:0:0:") {
		t.Errorf("/img-etc/passwd (subPath etc) starts %q, want the image's root entry", got)
	}
	ectx, ecancel := context.WithTimeout(context.Background(), 20*time.Second)
	r, err := conn.ExecSync(ectx, &runtimeapi.ExecSyncRequest{ContainerId: c.Id, Cmd: []string{"touch", "/img/written"}, Timeout: 15})
	ecancel()
	if err != nil || r.ExitCode == 0 {
		t.Errorf("touch /img/written: exit %v, err %v; want a read-only file system", r.GetExitCode(), err)
	}
	mounts := execIn(t, c.Id, "cat", "/proc/mounts")
	for _, line := range strings.Split(mounts, "\n") {
		if f := strings.Fields(line); len(f) > 3 && (f[1] == "/img" || f[1] == "/img-etc") && !strings.HasPrefix(f[3], "ro") {
			t.Errorf("image volume mounted read-write: %s", line)
		}
	}
}
