package main

import (
	"context"
	"path/filepath"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	regapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/csi"
	"github.com/nodeagent/nodeagent/internal/devicemanager"
	"github.com/nodeagent/nodeagent/internal/pluginmanager"
	"github.com/nodeagent/nodeagent/internal/podmanager"
	"github.com/nodeagent/nodeagent/internal/podresources"
)

// newDevices builds the device manager (<root-dir>/device-plugins, its
// checkpoint restored), the plugin registration watcher
// (<root-dir>/plugins_registry) and the pod resources API
// (<root-dir>/pod-resources), after the CPU manager and the pod manager
// they read.
func (a *agent) newDevices() (err error) {
	if a.devices, err = devicemanager.New(devicemanager.Config{
		Dir: filepath.Join(a.o.rootDir, "device-plugins"), Gone: a.podGone, Clock: a.clk, Logger: a.log,
		OnRegister: a.mets.Devices.Registered, OnAllocate: a.mets.Devices.Allocated,
	}); err != nil {
		return err
	}
	// The plugin registration directory hands CSI drivers (API mode) and
	// device plugins that register there to their managers.
	handlers := map[string]pluginmanager.Handler{regapi.DevicePlugin: a.devices}
	if a.csi != nil {
		handlers[regapi.CSIPlugin] = a.csi
	}
	if a.plugins, err = pluginmanager.New(pluginmanager.Config{Dir: filepath.Join(a.o.rootDir, "plugins_registry"), Handlers: handlers, Logger: a.log}); err != nil {
		return err
	}
	a.podResources, err = podresources.New(podresources.Config{
		Dir: filepath.Join(a.o.rootDir, "pod-resources"), Pods: a.desired.ActivePods,
		Devices: a.devices, CPUs: a.cpuMgr, OnRequest: a.mets.Devices.PodResourcesRequest, Logger: a.log,
	})
	return err
}

// podGone tells whether a pod's devices may go to the next pod, as the
// kubelet's active pods decide: a pod removed from the node (deleted,
// even while its containers are being killed: the scheduler places the
// next pod at once) or refused; an evicted one once its kill ended; a
// finished one once its containers stopped.
func (a *agent) podGone(uid types.UID) bool {
	switch a.desired.State(uid) {
	case podmanager.Unknown, podmanager.Refused, podmanager.Terminating:
		return true
	case podmanager.Evicted:
		return !a.desired.IsTerminating(uid)
	case podmanager.Finished:
		snap, _ := a.plegG.Snapshot()
		st := snap[uid]
		return st == nil || !st.Running()
	}
	return false
}

// newCSI builds, in API mode, the CSI manager (its published volumes
// recovered).
func (a *agent) newCSI() (err error) {
	if a.api != nil {
		a.csi, err = csi.New(csi.Config{RootDir: a.o.rootDir, NodeName: a.nodeName, Client: a.api.Client.Clientset,
			Token: a.api.Objects.ServiceAccountToken, Logger: a.log})
	}
	return err
}

// runDevices serves the device plugins' registration, the plugin
// registration directory and the pod resources API; a socket that cannot be served is logged, and the
// pods run on without it.
func (a *agent) runDevices(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		if err := a.podResources.Run(ctx); err != nil {
			a.log.Error("pod resources API not served", zap.Error(err))
		}
	})
	wg.Go(func() {
		if err := a.plugins.Run(ctx); err != nil {
			a.log.Error("plugins cannot register (plugins_registry)", zap.Error(err))
		}
	})
	if err := a.devices.Run(ctx); err != nil {
		a.log.Error("device plugins cannot register", zap.Error(err))
	}
}

// admissionAllocatable is the node's allocatable with the device
// plugins' resources, as admission counts them.
func (a *agent) admissionAllocatable() v1.ResourceList {
	out := a.allocatable.DeepCopy()
	for k, q := range a.devices.AdmissionAllocatable() {
		out[k] = q
	}
	return out
}

// devicePhase is the run chain's devices: a container's allocated
// devices into its CRI config.
type devicePhase struct{ m *devicemanager.Manager }

func (devicePhase) Name() string { return "device-manager" }

func (p devicePhase) MutateConfig(ctx context.Context, t cri.Target, cfg *runtimeapi.ContainerConfig) error {
	return p.m.MutateConfig(ctx, t.Pod, t.Container, cfg)
}
