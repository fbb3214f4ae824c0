package cri

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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
		logPath := s.LogPath
		if !filepath.IsAbs(logPath) {
			// The CRI leaves the reported path to the runtime; it is the
			// sandbox's log directory joined with the container's.
			logPath = filepath.Join(r.podLogDir(owner.Namespace, owner.Name, owner.UID), logPath)
		}
		msg = logTail(logPath)
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

// logTail is the end of a CRI log file as a reader of the container's
// output sees it: the content of its last 80 lines (both streams, the
// "<time> <stream> <P|F> " prefixes removed, a partial line joined with
// its continuation), cut to the last 2 KiB. It is the kubelet's
// readLastStringFromContainerLogs.
func logTail(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	defer f.Close()
	start, err := tailLinesStart(f, maxTerminationLogLines)
	if err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	var out []byte
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if content, ok := parseCRILogLine(line); ok {
				out = append(out, content...)
				if len(out) > 2*maxTerminationLogBytes {
					out = append(out[:0], out[len(out)-maxTerminationLogBytes:]...)
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Sprintf("Error on reading termination message from logs: %v", err)
		}
	}
	if len(out) > maxTerminationLogBytes {
		out = out[len(out)-maxTerminationLogBytes:]
	}
	return string(out)
}

// tailLinesStart is the offset where the last n lines of f begin (a
// final line without its newline counts as a line).
func tailLinesStart(f *os.File, n int) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	const block = 4096
	size := fi.Size()
	buf := make([]byte, block)
	newlines := 0
	// A trailing newline ends the last line; it does not start one.
	end := size
	for end > 0 {
		off := end - block
		if off < 0 {
			off = 0
		}
		chunk := buf[:end-off]
		if _, err := f.ReadAt(chunk, off); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] != '\n' || off+int64(i) == size-1 {
				continue
			}
			newlines++
			if newlines == n {
				return off + int64(i) + 1, nil
			}
		}
		end = off
	}
	return 0, nil
}

// parseCRILogLine returns the content of one CRI log line,
// "<RFC3339Nano time> <stdout|stderr> <P|F>[:tags] <content>\n": the
// content with its newline, without it for a partial (P) line, which the
// next line continues. A line not in this format is skipped.
func parseCRILogLine(line []byte) ([]byte, bool) {
	rest := line
	var fields [3][]byte
	for i := range fields {
		sp := bytes.IndexByte(rest, ' ')
		if sp < 0 {
			return nil, false
		}
		fields[i], rest = rest[:sp], rest[sp+1:]
	}
	if s := string(fields[1]); s != "stdout" && s != "stderr" {
		return nil, false
	}
	tag, _, _ := bytes.Cut(fields[2], []byte(":"))
	switch string(tag) {
	case string(runtimeapi.LogTagPartial):
		return bytes.TrimSuffix(rest, []byte("\n")), true
	case string(runtimeapi.LogTagFull):
		return rest, true
	}
	return nil, false
}
