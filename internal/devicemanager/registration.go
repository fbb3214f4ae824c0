package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registration serves the plugins' Register calls on kubelet.sock.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

// Register checks the plugin's API version and resource name, connects
// to its socket in the plugin directory, reads its options and starts
// its ListAndWatch, as the kubelet's registration server; the errors are
// the kubelet's. A plugin registering a resource again replaces the
// previous one.
func (r registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := r.m
	log := m.log.With(zap.String("resource", req.ResourceName), zap.String("endpoint", req.Endpoint))
	log.Info("device plugin registration request")
	if m.cfg.OnRegister != nil {
		m.cfg.OnRegister(req.ResourceName)
	}
	if !slices.Contains(pluginapi.SupportedVersions[:], req.Version) {
		err := fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", req.Version, pluginapi.SupportedVersions)
		log.Warn("device plugin refused", zap.Error(err))
		return &pluginapi.Empty{}, err
	}
	if !IsExtendedResourceName(req.ResourceName) {
		err := fmt.Errorf("the ResourceName %q is invalid", req.ResourceName)
		log.Warn("device plugin refused", zap.Error(err))
		return &pluginapi.Empty{}, err
	}
	if req.Endpoint == "" || filepath.Base(req.Endpoint) != req.Endpoint {
		err := fmt.Errorf("the endpoint %q is not a socket name in %s", req.Endpoint, m.cfg.Dir)
		log.Warn("device plugin refused", zap.Error(err))
		return &pluginapi.Empty{}, err
	}
	if err := m.connect(ctx, req.ResourceName, filepath.Join(m.cfg.Dir, req.Endpoint), log); err != nil {
		log.Warn("device plugin refused", zap.Error(err))
		return &pluginapi.Empty{}, err
	}
	return &pluginapi.Empty{}, nil
}

// connect dials a plugin's socket, reads its options, makes it the
// resource's plugin and starts its ListAndWatch.
func (m *Manager) connect(ctx context.Context, resource, socket string, log *zap.Logger) error {
	ep, err := dial(ctx, resource, socket, m.cfg.CallTimeout)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.stopped {
		m.mu.Unlock()
		ep.close()
		return errors.New("the device manager is stopping")
	}
	old := m.plugins[resource]
	m.plugins[resource] = ep
	m.lastOpts[resource] = ep.opts
	if _, ok := m.devices[resource]; !ok {
		m.devices[resource] = nil // registered; its devices come with the first list
	}
	m.mu.Unlock()
	if old != nil {
		old.close()
	}
	log.Info("device plugin registered", zap.Bool("preStartRequired", ep.opts.GetPreStartRequired()),
		zap.Bool("getPreferredAllocationAvailable", ep.opts.GetGetPreferredAllocationAvailable()))
	go ep.listAndWatch(m)
	return nil
}

// ValidatePlugin (pluginmanager.Handler) checks a device plugin that
// registers through plugins_registry: the API version and the resource
// name, as Register does.
func (m *Manager) ValidatePlugin(name string, versions []string) error {
	if !slices.ContainsFunc(versions, func(v string) bool { return slices.Contains(pluginapi.SupportedVersions[:], v) }) {
		return fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", versions, pluginapi.SupportedVersions)
	}
	if !IsExtendedResourceName(name) {
		return fmt.Errorf("the ResourceName %q is invalid", name)
	}
	return nil
}

// RegisterPlugin (pluginmanager.Handler) connects to a device plugin
// that registered through plugins_registry, at the endpoint it gave.
func (m *Manager) RegisterPlugin(ctx context.Context, name, endpoint string) error {
	if m.cfg.OnRegister != nil {
		m.cfg.OnRegister(name)
	}
	return m.connect(ctx, name, endpoint, m.log.With(zap.String("resource", name), zap.String("endpoint", endpoint)))
}

// DeregisterPlugin (pluginmanager.Handler): a plugin whose registration
// socket went is known gone when its ListAndWatch ends.
func (m *Manager) DeregisterPlugin(context.Context, string) {}

// IsExtendedResourceName is the API's rule for an extended resource (the
// kubelet's v1helper.IsExtendedResourceName): a domain-prefixed name
// outside kubernetes.io, valid once prefixed "requests." as a quota
// resource.
func IsExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") || strings.HasPrefix(name, "requests.") {
		return false
	}
	return len(validation.IsQualifiedName("requests."+name)) == 0
}

// endpoint is a registered plugin's connection.
type endpoint struct {
	resource, socket string
	conn             *grpc.ClientConn
	client           pluginapi.DevicePluginClient
	opts             *pluginapi.DevicePluginOptions
	ctx              context.Context
	cancel           context.CancelFunc
}

// dial connects to the plugin's socket and reads its options.
func dial(ctx context.Context, res, socket string, timeout time.Duration) (*endpoint, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %w", err)
	}
	ep := &endpoint{resource: res, socket: socket, conn: conn, client: pluginapi.NewDevicePluginClient(conn)}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	opts, err := ep.client.GetDevicePluginOptions(cctx, &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("failed to get device plugin options: %w", err)
	}
	ep.opts = opts
	ep.ctx, ep.cancel = context.WithCancel(context.Background())
	return ep, nil
}

// listAndWatch receives the plugin's device lists until its stream ends.
func (ep *endpoint) listAndWatch(m *Manager) {
	stream, err := ep.client.ListAndWatch(ep.ctx, &pluginapi.Empty{})
	if err != nil {
		m.gone(ep, fmt.Errorf("ListAndWatch: %w", err))
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("ListAndWatch ended")
			}
			m.gone(ep, err)
			return
		}
		m.listed(ep, resp.Devices)
	}
}

func (ep *endpoint) close() {
	if ep.cancel != nil {
		ep.cancel()
	}
	ep.conn.Close()
}

// listenUnix listens on a fresh socket at path.
func listenUnix(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return net.Listen("unix", path)
}
