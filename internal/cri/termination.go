package cri

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/logs"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// The kubelet's bounds on a termination message
// (pkg/kubelet/container/runtime.go).
const (
	// maxTerminationMessage is what is read of the message file: its
	// last 4 KiB.
	maxTerminationMessage = 4 * 1024
	// maxTerminationLogBytes and maxTerminationLogLines bound the
	// message taken from the log (FallbackToLogsOnError): the last 2 KiB
	// of the last 80 lines.
	maxTerminationLogBytes = 2 * 1024
	maxTerminationLogLines = 80
)

// terminationMessageFile is where a container instance's termination
// message file lives on the host: <pod>/containers/<name>/<restart>.
func (r *Runtime) terminationMessageFile(uid types.UID, container string, restartCount int) string {
	return filepath.Join(r.cfg.Volumes.Dir(uid), "containers", volume.ChildDir("", container), strconv.Itoa(restartCount))
}

// createTerminationMessageFile creates a container instance's empty
// termination message file (emptying one left by an earlier attempt),
// writable by any user: the container may run as any UID. As the
// kubelet's makeMounts, the mode is set by a chmod after the creation,
// since the umask strips bits from the mode a file is created with.
func createTerminationMessageFile(file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("create termination message directory: %w", err)
	}
	if err := os.WriteFile(file, nil, 0o666); err != nil {
		return fmt.Errorf("create termination message file: %w", err)
	}
	if err := os.Chmod(file, 0o666); err != nil {
		return fmt.Errorf("make termination message file writable: %w", err)
	}
	return nil
}

// addTerminationMessage appends an exited container's termination
// message to the runtime's message, as the kubelet's
// convertToKubeContainerStatus does: the content of its message file, or,
// with terminationMessagePolicy FallbackToLogsOnError, a non-zero exit and
// an empty file, the tail of its log.
func (r *Runtime) addTerminationMessage(owner *pod.RuntimeStatus, pc *pod.Container, s *runtimeapi.ContainerStatus) {
	if pc.State != pod.ContainerExited {
		return
	}
	path := s.Annotations[AnnotationTerminationMsgPath]
	// A container that never ran has no log.
	fallback := v1.TerminationMessagePolicy(s.Annotations[AnnotationTerminationMsgPolicy]) == v1.TerminationMessageFallbackToLogsOnError &&
		pc.ExitCode != 0 && pc.Reason != "ContainerCannotRun" && pc.Reason != "StartError"
	msg, checkLogs := "", fallback
	if path != "" {
		msg, checkLogs = readTerminationMessage(r.terminationMessageFile(owner.UID, pc.Name, pc.RestartCount), fallback)
	}
	if checkLogs {
		msg = r.logTail(logs.ContainerRef{Namespace: owner.Namespace, Pod: owner.Name, UID: string(owner.UID), Container: pc.Name}, pc.RestartCount)
	}
	if msg == "" {
		return
	}
	if pc.Message != "" {
		pc.Message += ": "
	}
	pc.Message += msg
}

// readTerminationMessage reads the last 4 KiB of a message file and tells
// whether the log should be read instead (fallback and no message).
func readTerminationMessage(file string, fallback bool) (string, bool) {
	data, err := readLast(file, maxTerminationMessage)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fallback
	case err != nil:
		return fmt.Sprintf("Error on reading termination log %s: %v", file, err), false
	}
	return string(data), fallback && len(data) == 0
}

// readLast reads at most the last n bytes of a file.
func readLast(file string, n int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(io.LimitReader(f, n))
}

// logTail is the end of a container instance's log as a reader of its
// output sees it: the content of its last 80 lines (both streams, partial
// lines joined), cut to the last 2 KiB — the kubelet's
// readLastStringFromContainerLogs. It is read by internal/logs, as
// `kubectl logs` is: across rotations, without following a symlink out of
// the pod's log directory.
func (r *Runtime) logTail(ref logs.ContainerRef, restart int) string {
	dir, err := logs.OpenContainerDir(r.cfg.PodLogsDir, ref)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	defer dir.Close()
	// 80 lines may be the whole log of a container that writes no
	// newline: only the last 2 KiB are kept as they pass (the kubelet's
	// circular buffer).
	buf := &lastBytes{max: maxTerminationLogBytes}
	if err := logs.ReadRestart(dir, restart, logs.Options{TailLines: maxTerminationLogLines}, buf); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return string(buf.b)
}

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	b   []byte
	max int
}

func (l *lastBytes) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= l.max {
		l.b = append(l.b[:0], p[len(p)-l.max:]...)
		return n, nil
	}
	if over := len(l.b) + len(p) - l.max; over > 0 {
		l.b = append(l.b[:0], l.b[over:]...)
	}
	l.b = append(l.b, p...)
	return n, nil
}
