// Package pluginmanager is the kubelet's plugin registration: node
// plugins (CSI drivers) put a registration socket into
// <root-dir>/plugins_registry; each new socket is asked GetInfo
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1), handed to the handler
// of its type, and told the outcome (NotifyRegistrationStatus); a socket
// that goes deregisters its plugin.
package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	regapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/utils/clock"
)

// Handler takes the plugins of one type (regapi.CSIPlugin).
type Handler interface {
	// ValidatePlugin refuses a plugin whose versions it cannot speak.
	ValidatePlugin(name string, versions []string) error
	// RegisterPlugin connects to the plugin's endpoint.
	RegisterPlugin(ctx context.Context, name, endpoint string) error
	// DeregisterPlugin forgets a plugin whose socket went.
	DeregisterPlugin(ctx context.Context, name string)
}

// Config wires a Manager.
type Config struct {
	// Dir is <root-dir>/plugins_registry.
	Dir      string
	Handlers map[string]Handler
	// CallTimeout bounds GetInfo and NotifyRegistrationStatus (10s).
	CallTimeout time.Duration
	// Clock times the retries of failed registrations (default: real).
	Clock  clock.WithTicker
	Logger *zap.Logger
}

// Manager watches the registration directory.
type Manager struct {
	cfg Config
	log *zap.Logger

	mu         sync.Mutex
	registered map[string]registration // socket path → its plugin
}

type registration struct{ typ, name string }

// New returns a Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Dir == "" || cfg.Logger == nil {
		return nil, errors.New("pluginmanager: Dir and Logger are required")
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg, log: cfg.Logger.Named("pluginmanager"), registered: map[string]registration{}}, nil
}

// Run registers the plugins whose sockets are in the directory and
// those that appear, until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(m.cfg.Dir, 0o750); err != nil {
		return fmt.Errorf("plugin registration directory: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(m.cfg.Dir); err != nil {
		return fmt.Errorf("watch %s: %w", m.cfg.Dir, err)
	}
	m.log.Info("watching for plugin registration sockets", zap.String("dir", m.cfg.Dir))
	// Each new socket is registered on its own goroutine (a plugin slow
	// to answer holds no other), all waited for on the way out.
	var wg sync.WaitGroup
	defer wg.Wait()
	entries, _ := os.ReadDir(m.cfg.Dir)
	for _, e := range entries {
		path := filepath.Join(m.cfg.Dir, e.Name())
		wg.Go(func() { m.added(ctx, path) })
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			switch {
			case ev.Op&fsnotify.Create != 0:
				wg.Go(func() { m.added(ctx, ev.Name) })
			case ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0:
				wg.Go(func() { m.removed(ctx, ev.Name) })
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			m.log.Warn("plugin registration watch", zap.Error(err))
		}
	}
}

// added registers the plugin of a new socket.
func (m *Manager) added(ctx context.Context, path string) {
	// A registration that fails (the Node not registered yet, the API
	// server away) is tried again while the socket is there, as the
	// kubelet's reconciler does: after 1s, doubling to 30s.
	delay := time.Second
	for !m.try(ctx, path) {
		t := m.cfg.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		delay = min(2*delay, 30*time.Second)
	}
}

// try registers the plugin of a socket once; done is false when it
// should be tried again (the socket is there and the plugin was refused
// or did not answer).
func (m *Manager) try(ctx context.Context, path string) (done bool) {
	info, err := os.Stat(path)
	if err != nil || info.Mode()&os.ModeSocket == 0 || strings.HasPrefix(filepath.Base(path), ".") {
		return true
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		m.log.Warn("plugin registration socket", zap.String("socket", path), zap.Error(err))
		return true
	}
	defer conn.Close()
	client := regapi.NewRegistrationClient(conn)
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	// A socket's file appears when it is bound, before its plugin
	// listens: the call waits for it to answer, within the timeout.
	pi, err := client.GetInfo(cctx, &regapi.InfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		m.log.Warn("plugin registration: GetInfo failed; trying again", zap.String("socket", path), zap.Error(err))
		return ctx.Err() != nil
	}
	log := m.log.With(zap.String("type", pi.Type), zap.String("name", pi.Name), zap.String("socket", path))
	err = m.register(ctx, pi, path)
	status := &regapi.RegistrationStatus{PluginRegistered: err == nil}
	if err != nil {
		status.Error = err.Error()
		log.Warn("plugin registration refused; trying again", zap.Error(err))
	} else {
		log.Info("plugin registered", zap.Strings("versions", pi.SupportedVersions))
	}
	if _, nerr := client.NotifyRegistrationStatus(cctx, status); nerr != nil {
		log.Warn("plugin registration: NotifyRegistrationStatus failed", zap.Error(nerr))
	}
	return err == nil || ctx.Err() != nil
}

func (m *Manager) register(ctx context.Context, pi *regapi.PluginInfo, path string) error {
	h := m.cfg.Handlers[pi.Type]
	if h == nil {
		return fmt.Errorf("no handler registered for plugin type: %s at socket %s", pi.Type, path)
	}
	if err := h.ValidatePlugin(pi.Name, pi.SupportedVersions); err != nil {
		return err
	}
	endpoint := pi.Endpoint
	if endpoint == "" {
		endpoint = path
	}
	// Recorded before the handler takes it, as the kubelet's actual
	// state: a socket removed meanwhile deregisters it, here or below.
	m.mu.Lock()
	m.registered[path] = registration{typ: pi.Type, name: pi.Name}
	m.mu.Unlock()
	if err := h.RegisterPlugin(ctx, pi.Name, endpoint); err != nil {
		m.mu.Lock()
		delete(m.registered, path)
		m.mu.Unlock()
		return err
	}
	if _, err := os.Stat(path); err != nil {
		m.removed(ctx, path) // went while it registered
		return fmt.Errorf("the registration socket went: %w", err)
	}
	return nil
}

// removed deregisters the plugin of a socket that went.
func (m *Manager) removed(ctx context.Context, path string) {
	m.mu.Lock()
	r, ok := m.registered[path]
	delete(m.registered, path)
	m.mu.Unlock()
	if !ok {
		return
	}
	if h := m.cfg.Handlers[r.typ]; h != nil {
		h.DeregisterPlugin(ctx, r.name)
	}
	m.log.Info("plugin deregistered", zap.String("type", r.typ), zap.String("name", r.name))
}
