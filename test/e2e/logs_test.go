//go:build integration

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// logsCLI runs `nodeagent logs` against the agent's directories.
func (a *agent) logsCLI(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	args = append([]string{"logs", "--pod-logs-dir", a.logs, "--status-dir", filepath.Join(a.root, "status")}, args...)
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	return out.String(), errb.String(), err
}

func (a *agent) logsOK(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, errs, err := a.logsCLI(ctx, args...)
	if err != nil {
		t.Fatalf("nodeagent logs %v: %v\n%s", args, err, errs)
	}
	return out
}

// counterPod prints 20 numbered lines on stdout and 20 on stderr, tagged
// with its run (kept in an emptyDir across restarts); the first run then
// exits, the second stays.
func counterPod(name string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  volumes: [{name: d, emptyDir: {}}]
  containers:
  - name: c
    image: ` + busybox + `
    volumeMounts: [{name: d, mountPath: /d}]
    command:
    - sh
    - -c
    - |
      n=$(cat /d/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /d/n
      i=1
      while [ $i -le 20 ]; do echo "run $n out $i"; echo "run $n err $i" >&2; i=$((i+1)); done
      if [ $n -ge 2 ]; then exec sleep 3600; fi
      sleep 1; exit 1
`
}

// wantRun checks that out holds run n's 40 lines, each stream in order.
func wantRun(t *testing.T, out string, n int) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var stdout, stderr []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, fmt.Sprintf("run %d out ", n)):
			stdout = append(stdout, l)
		case strings.HasPrefix(l, fmt.Sprintf("run %d err ", n)):
			stderr = append(stderr, l)
		default:
			t.Errorf("unexpected line %q", l)
		}
	}
	for i := 1; i <= 20; i++ {
		if len(stdout) < i || stdout[i-1] != fmt.Sprintf("run %d out %d", n, i) {
			t.Fatalf("stdout lines of run %d not 1..20 in order: %q", n, stdout)
		}
		if len(stderr) < i || stderr[i-1] != fmt.Sprintf("run %d err %d", n, i) {
			t.Fatalf("stderr lines of run %d not 1..20 in order: %q", n, stderr)
		}
	}
	if len(lines) != 40 {
		t.Errorf("%d lines, want 40:\n%s", len(lines), out)
	}
}

// `nodeagent logs` reads a pod's container log from the agent's
// directories: both streams, --tail, --timestamps, --previous after a
// restart, errors as kubectl's; and -f follows a fast writer across many
// rotations, every line exactly once, in order, until the container
// exits.
func TestLogsCLI(t *testing.T) {
	a := newAgent(t, "--container-log-max-size=64Ki", "--container-log-max-files=5", "--container-log-monitor-interval=1s")
	a.start()
	a.write("counter.yaml", counterPod("counter"))
	eventually(t, 90*time.Second, "counter restarted once and running", func() bool {
		p := a.status("counter")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	// The second run has printed its lines once they are in its log.
	eventually(t, 30*time.Second, "the second run's lines", func() bool {
		return strings.Count(a.logsOK(t, "counter"), "\n") >= 40
	})

	t.Run("all", func(t *testing.T) {
		wantRun(t, a.logsOK(t, "counter"), 2)
	})
	t.Run("tail", func(t *testing.T) {
		all := strings.Split(strings.TrimSuffix(a.logsOK(t, "counter"), "\n"), "\n")
		got := a.logsOK(t, "counter", "--tail", "5")
		if want := strings.Join(all[len(all)-5:], "\n") + "\n"; got != want {
			t.Errorf("--tail 5:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("previous", func(t *testing.T) {
		wantRun(t, a.logsOK(t, "counter", "--previous", "-c", "c"), 1)
	})
	t.Run("timestamps", func(t *testing.T) {
		got := strings.TrimSuffix(a.logsOK(t, "--timestamps", "--tail", "1", "counter"), "\n")
		ts, msg, _ := strings.Cut(got, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || !strings.HasPrefix(msg, "run 2 ") {
			t.Fatalf("--timestamps line %q: %v", got, err)
		}
		if age := time.Since(at); age < 0 || age > 5*time.Minute {
			t.Errorf("timestamp %v, %v ago", at, age)
		}
	})
	t.Run("limit bytes", func(t *testing.T) {
		if got := a.logsOK(t, "counter", "--limit-bytes", "7"); len(got) != 7 || !strings.HasPrefix(got, "run 2 ") {
			t.Errorf("--limit-bytes 7: %q", got)
		}
	})
	t.Run("errors", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"counter", "-c", "nope"}, `container "nope" is not valid for pod ` + a.podName("counter") + `: one of [c]`},
			{[]string{"nope"}, `pod "nope" not found`},
		} {
			_, errs, err := a.logsCLI(ctx, tt.args...)
			if err == nil || !strings.Contains(errs, tt.want) {
				t.Errorf("nodeagent logs %v: %v, stderr %q; want an error with %q", tt.args, err, errs, tt.want)
			}
		}
	})
	t.Run("a planted symlink is refused", func(t *testing.T) {
		p := a.status("counter")
		dir := filepath.Join(a.logs, p.Namespace+"_"+p.Name+"_"+string(p.UID), "c")
		secret := filepath.Join(t.TempDir(), "secret")
		if err := os.WriteFile(secret, []byte("2024-01-02T03:04:05Z stdout F SECRET\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "0.log.20200101-000000")
		if err := os.Symlink(secret, link); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(link)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, errs, err := a.logsCLI(ctx, "counter", "--previous")
		if err == nil || !strings.Contains(errs, "unsafe log path") || strings.Contains(out, "SECRET") {
			t.Errorf("--previous with a symlink among the files: %v, stdout %q, stderr %q; want refused", err, out, errs)
		}
	})
	t.Run("follow across rotations", func(t *testing.T) { followAcrossRotations(t, a) })
}

// floodPod writes `batches` batches of 1000 numbered lines (~60 KB,
// about one 64Ki log file each), every 100th on stderr and each batch's
// last one 20000 bytes long (the runtime splits it into partial lines),
// 0.2s apart, after a pause for the reader to start; then it exits.
func floodPod(name string, batches int) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + busybox + `
    command:
    - sh
    - -c
    - |
      sleep 3
      b=0
      while [ $b -lt ` + strconv.Itoa(batches) + ` ]; do
        awk -v b=$b 'BEGIN {
          long = sprintf("%20000s", ""); gsub(/ /, "y", long)
          for (i = 0; i < 1000; i++) {
            n = b * 1000 + i
            if (i == 999) { printf "line %06d %s\n", n, long }
            else if (i % 100 == 0) { printf "line %06d err xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", n > "/dev/stderr" }
            else { printf "line %06d out xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", n }
          }
        }'
        b=$((b+1))
        sleep 0.2
      done
`
}

func followAcrossRotations(t *testing.T, a *agent) {
	const batches = 20
	a.write("flood.yaml", floodPod("flood", batches))
	var logDir string
	eventually(t, 60*time.Second, "flood running", func() bool {
		if c := a.running("flood", "c"); c != nil {
			logDir = filepath.Dir(containerStatus(t, c.Id).LogPath)
			return true
		}
		return false
	})
	eventually(t, 30*time.Second, "flood's status published", func() bool {
		p := a.status("flood")
		return p != nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})

	// Rotated files seen while following.
	rotated := map[string]bool{}
	var mu sync.Mutex
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			entries, _ := os.ReadDir(logDir)
			mu.Lock()
			for _, e := range entries {
				if n := e.Name(); strings.HasPrefix(n, "0.log.") && !strings.HasSuffix(n, ".tmp") {
					rotated[strings.TrimSuffix(n, ".gz")] = true
				}
			}
			mu.Unlock()
			select {
			case <-stopSampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	out, errs, err := a.logsCLI(ctx, "flood", "-f")
	close(stopSampling)
	<-sampled
	if err != nil {
		t.Fatalf("nodeagent logs -f: %v (after %v)\n%s", err, time.Since(start).Round(time.Millisecond), errs)
	}
	t.Logf("followed %d bytes in %v across %d rotations", len(out), time.Since(start).Round(time.Millisecond), len(rotated))

	long := strings.Repeat("y", 20000)
	seen := make([]int, batches*1000)
	last := map[string]int{"out": -1, "err": -1} // by stream: stderr is every 100th line
	bad := 0
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var n int
		var rest string
		if _, err := fmt.Sscanf(l, "line %06d", &n); err != nil || n < 0 || n >= len(seen) {
			if bad++; bad <= 5 {
				t.Errorf("unexpected line %.80q", l)
			}
			continue
		}
		rest = l[len("line 000000 "):]
		stream := "out"
		switch {
		case n%1000 == 999:
			if rest != long {
				t.Errorf("line %d: %d bytes, want the 20000 of the long line joined", n, len(rest))
			}
		case n%100 == 0:
			stream = "err"
		}
		if n <= last[stream] {
			if bad++; bad <= 5 {
				t.Errorf("line %d after line %d on std%s", n, last[stream], stream)
			}
		}
		last[stream] = n
		seen[n]++
	}
	var missing, repeated []int
	for n, c := range seen {
		switch {
		case c == 0:
			missing = append(missing, n)
		case c > 1:
			repeated = append(repeated, n)
		}
	}
	if len(missing) > 0 || len(repeated) > 0 {
		t.Errorf("%d lines missing (first %v), %d repeated (first %v)", len(missing), missing[:min(len(missing), 10)],
			len(repeated), repeated[:min(len(repeated), 10)])
	}
	if len(rotated) < 5 {
		t.Errorf("%d rotations while following, want several", len(rotated))
	}
}
