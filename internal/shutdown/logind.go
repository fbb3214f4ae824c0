package shutdown

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// LogindConfDropIn is where RaiseInhibitDelay writes logind's
// InhibitDelayMaxSec: the kubelet's file, so a node handed back to the
// kubelet keeps one override.
var LogindConfDropIn = "/etc/systemd/logind.conf.d/99-kubelet.conf"

// logind's D-Bus names.
const (
	logindService   = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindInterface = "org.freedesktop.login1.Manager"
)

// Logind is an Inhibitor over logind's D-Bus API on the system bus
// (DBUS_SYSTEM_BUS_ADDRESS, else the standard socket).
type Logind struct {
	conn   *dbus.Conn
	obj    dbus.BusObject
	closed chan struct{} // closed by Close: Watch's goroutine stops
}

// ConnectLogind opens a private connection to the system bus.
func ConnectLogind() (Inhibitor, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	return &Logind{conn: conn, obj: conn.Object(logindService, logindPath), closed: make(chan struct{})}, nil
}

// InhibitDelay implements Inhibitor.
func (l *Logind) InhibitDelay() (time.Duration, error) {
	v, err := l.obj.GetProperty(logindInterface + ".InhibitDelayMaxUSec")
	if err != nil {
		return 0, fmt.Errorf("read logind's InhibitDelayMaxUSec: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("logind's InhibitDelayMaxUSec is a %T", v.Value())
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// Inhibit implements Inhibitor: a delay lock on shutdown, held by the
// file descriptor logind hands over.
func (l *Logind) Inhibit() (io.Closer, error) {
	var fd dbus.UnixFD
	err := l.obj.Call(logindInterface+".Inhibit", 0, "shutdown", "nodeagent", "Kubernetes graceful node shutdown", "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("take logind's delay lock on shutdown: %w", err)
	}
	if fd < 0 {
		return nil, errors.New("logind handed over no lock")
	}
	return os.NewFile(uintptr(fd), "inhibit"), nil
}

// Watch implements Inhibitor.
func (l *Logind) Watch() (<-chan bool, error) {
	if err := l.conn.AddMatchSignal(dbus.WithMatchInterface(logindInterface), dbus.WithMatchMember("PrepareForShutdown"),
		dbus.WithMatchObjectPath(logindPath)); err != nil {
		return nil, fmt.Errorf("watch logind's PrepareForShutdown: %w", err)
	}
	signals := make(chan *dbus.Signal, 8)
	l.conn.Signal(signals)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		for s := range signals {
			if s.Name != logindInterface+".PrepareForShutdown" || len(s.Body) != 1 {
				continue
			}
			if down, ok := s.Body[0].(bool); ok {
				select {
				case out <- down:
				case <-l.closed:
					return
				}
			}
		}
	}()
	return out, nil
}

// RaiseInhibitDelay implements Inhibitor as the kubelet does: a
// logind.conf.d drop-in setting InhibitDelayMaxSec to d, then logind
// told to reload its configuration (SIGHUP through systemd's KillUnit).
func (l *Logind) RaiseInhibitDelay(d time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(LogindConfDropIn), 0o755); err != nil {
		return err
	}
	body := fmt.Sprintf("# graceful node shutdown (nodeagent, as the kubelet)\n[Login]\nInhibitDelayMaxSec=%d\n", int64(d.Round(time.Second)/time.Second))
	if err := atomicfile.Write(LogindConfDropIn, []byte(body), 0o644, true); err != nil {
		return fmt.Errorf("write %s: %w", LogindConfDropIn, err)
	}
	call := l.conn.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1").
		Call("org.freedesktop.systemd1.Manager.KillUnit", 0, "systemd-logind.service", "all", int32(unix.SIGHUP))
	if call.Err != nil {
		return fmt.Errorf("reload logind's configuration: %w", call.Err)
	}
	return nil
}

// PreparingForShutdown implements Inhibitor.
func (l *Logind) PreparingForShutdown() (bool, error) {
	v, err := l.obj.GetProperty(logindInterface + ".PreparingForShutdown")
	if err != nil {
		return false, fmt.Errorf("read logind's PreparingForShutdown: %w", err)
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("logind's PreparingForShutdown is a %T", v.Value())
	}
	return b, nil
}

// Close implements Inhibitor.
func (l *Logind) Close() error {
	close(l.closed)
	return l.conn.Close()
}
