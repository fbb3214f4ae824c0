package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/cni"
	"github.com/nodeagent/nodeagent/internal/cri"
)

// cniSettings are the settings of the pod network's CNI config: the
// dirs, whether given on the command line, the pod CIDR flag.
type cniSettings struct {
	cniConfDir, cniBinDir           string
	cniConfDirGiven, cniBinDirGiven bool
	podCIDR                         string
	cniGCPeriod                     time.Duration
	runtimeRequestTimeout           time.Duration
	rootDir                         string
}

func (o *options) cni() cniSettings {
	return cniSettings{
		cniConfDir: o.cniConfDir, cniBinDir: o.cniBinDir, cniConfDirGiven: o.cniConfDirGiven, cniBinDirGiven: o.cniBinDirGiven,
		podCIDR: o.PodCIDR, cniGCPeriod: o.cniGCPeriod, runtimeRequestTimeout: o.RuntimeRequestTimeout.Duration, rootDir: o.rootDir,
	}
}

// ensureCNIConfig writes the node's conflist for its pod CIDR(s)
// (comma-separated, one per family) unless the CNI config dir holds an
// operator's. A bad CIDR is an error; a conflist the plugins refuse is
// logged with their error and the previous config stays.
func ensureCNIConfig(ctx context.Context, o cniSettings, podCIDRs string, log *zap.Logger) error {
	var cidrs []string
	for _, c := range strings.Split(podCIDRs, ",") {
		if c = strings.TrimSpace(c); c != "" {
			cidrs = append(cidrs, c)
		}
	}
	// The bridge plugin checks MAC spoofing with nftables rules: on where
	// it can run nft.
	_, nftErr := exec.LookPath("nft")
	w, err := cni.Ensure(ctx, o.cniConfDir, o.cniBinDir, cni.NetworkConfig{
		Name: "nodeagent", Bridge: "nabr0", PodCIDRs: cidrs, DataDir: filepath.Join(o.rootDir, "cni", "networks"),
		MACSpoofCheck: nftErr == nil,
	})
	switch {
	case errors.Is(err, cni.ErrRefused):
		log.Error("CNI config for the pod CIDR not written", zap.Strings("podCIDRs", cidrs), zap.Error(err))
		return nil
	case err != nil:
		return fmt.Errorf("CNI config for --pod-cidr %q: %w", podCIDRs, err)
	case w.Operator:
		log.Info("CNI config dir holds the operator's config; left alone", zap.String("file", w.File))
	case w.Wrote:
		log.Info("wrote the CNI config for the pod CIDR", zap.String("file", w.File), zap.Strings("podCIDRs", cidrs))
		if nftErr != nil {
			log.Warn("no nft command: the pod network's MAC spoofing check (the bridge plugin's macspoofchk) is off; install nftables to have it", zap.Error(nftErr))
		}
	}
	return nil
}

// errNetworkUnknown is the pod network's state before the runtime was
// first asked, as the kubelet's ErrNetworkUnknown.
var errNetworkUnknown = errors.New("network state unknown")

// podNetwork is the pod network's readiness as the kubelet judges it: by
// the runtime's NetworkReady condition alone (pkg/kubelet/kubelet.go,
// updateRuntimeUp). The runtime knows which CNI config it loaded, from
// whichever dir it was configured with (k3s's containerd reads its own);
// nodeagent's --cni-conf-dir default says nothing about that.
//
// Beside it, nodeagent checks one CNI config dir itself (a cni.Monitor:
// validation, re-checks, CNI GC), only where it knows the dir (cniDirs).
// What that check finds is logged, and added to the message of a runtime
// that says NetworkReady=false; it never holds pods back on its own: a
// runtime that says NetworkReady=true is believed, and a plugin it cannot
// run fails the sandbox with the runtime's own error, as under the
// kubelet.
//
// Poll is called by the health poll (one goroutine); Run on its own
// goroutine; Err and PodErr from any.
type podNetwork struct {
	o    cniSettings
	conn cri.Client
	clk  clock.WithTicker
	log  *zap.Logger

	runtimeErr atomic.Pointer[error]       // NetworkReady as last read: nil error when true
	mon        atomic.Pointer[cni.Monitor] // the dir nodeagent checks; nil when none
	settled    chan struct{}               // closed once the dir is decided
}

func newPodNetwork(o cniSettings, conn cri.Client, clk clock.WithTicker, log *zap.Logger) *podNetwork {
	return &podNetwork{o: o, conn: conn, clk: clk, log: log, settled: make(chan struct{})}
}

// Poll reads the runtime's NetworkReady with one Status call. Until the
// runtime has answered once, the call is verbose, and its first answer
// decides which CNI config dir nodeagent checks (logged once).
func (n *podNetwork) Poll(ctx context.Context) {
	select {
	case <-n.settled:
		_, err := n.status(ctx, false)
		n.runtimeErr.Store(&err)
	default:
		info, err := n.status(ctx, true)
		n.runtimeErr.Store(&err)
		if info != nil {
			n.settle(info)
		}
	}
}

// status asks the runtime for its status: nil info when the call failed,
// else the (maybe empty) verbose info; err is the NetworkReady judgement.
func (n *podNetwork) status(ctx context.Context, verbose bool) (map[string]string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := n.conn.Status(cctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, fmt.Errorf("get runtime status: %w", err)
	}
	info := r.GetInfo()
	if info == nil {
		info = map[string]string{}
	}
	return info, networkReady(r.GetStatus())
}

// networkReady is the kubelet's reading of the NetworkReady condition:
// nil when true, else the condition as the kubelet prints it
// ("NetworkReady=false reason:R message:M").
func networkReady(st *runtimeapi.RuntimeStatus) error {
	for _, c := range st.GetConditions() {
		if c.GetType() == runtimeapi.NetworkReady {
			if c.GetStatus() {
				return nil
			}
			return fmt.Errorf("%s=%t reason:%s message:%s", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage())
		}
	}
	return errors.New("NetworkReady not reported")
}

// settle decides the dir from the runtime's verbose info, logs the
// decision once and, with a dir, makes the Monitor Run drives.
func (n *podNetwork) settle(info map[string]string) {
	defer close(n.settled)
	rtConf, rtBins := cni.RuntimeDirs(info)
	d := cniDirs(n.o, rtConf, rtBins)
	if d.mismatch != "" {
		n.log.Warn(d.mismatch, zap.String("cniConfDir", n.o.cniConfDir), zap.String("runtimeCNIConfDir", rtConf))
	}
	if d.conf == "" {
		n.log.Info("pod network readiness: from the runtime's NetworkReady; not validating CNI config: directory unknown (give --cni-conf-dir to have it checked)")
		return
	}
	m, err := cni.NewMonitor(cni.MonitorConfig{
		ConfDir: d.conf, BinDirs: d.bins,
		Sandboxes: cri.Sandboxes{Client: n.conn, Timeout: n.o.runtimeRequestTimeout},
		GCPeriod:  n.o.cniGCPeriod,
		Clock:     n.clk, Logger: n.log,
	})
	if err != nil { // cannot happen: cniDirs gives both dirs
		n.log.Error("CNI config check not started", zap.Error(err))
		return
	}
	n.mon.Store(m)
	n.log.Info("pod network readiness: from the runtime's NetworkReady; validating CNI config",
		zap.String("dir", d.conf), zap.Strings("binDirs", d.bins), zap.String("from", d.from))
}

// Run waits until the dir is decided, then checks the config there at
// once, re-checks it and runs CNI GC (cni.Monitor.Run) until ctx ends.
// Without a dir it returns.
func (n *podNetwork) Run(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-n.settled:
	}
	if m := n.firstCheck(ctx); m != nil {
		m.Run(ctx)
	}
}

// firstCheck validates the decided dir in full; nil without one.
func (n *podNetwork) firstCheck(ctx context.Context) *cni.Monitor {
	m := n.mon.Load()
	if m != nil {
		m.Recheck(ctx, true)
	}
	return m
}

// Err is the pod network's readiness as the node's Ready condition shows
// it (internal/node adds "container runtime network not ready: "): the
// runtime's NetworkReady, with nodeagent's own finding on its CNI config
// dir added when the runtime says false.
func (n *podNetwork) Err() error {
	p := n.runtimeErr.Load()
	if p == nil {
		return errNetworkUnknown
	}
	if *p == nil {
		return nil
	}
	if m := n.mon.Load(); m != nil {
		if cerr := m.Err(); cerr != nil {
			return fmt.Errorf("%w; nodeagent's CNI config check: %w", *p, cerr)
		}
	}
	return *p
}

// PodErr is Err as the kubelet words it for a pod that needs the pod
// network: internal/cri holds the sandbox back with "network is not
// ready: " and this.
func (n *podNetwork) PodErr() error {
	if err := n.Err(); err != nil {
		return fmt.Errorf("container runtime network not ready: %w", err)
	}
	return nil
}

// checkedDirs is which CNI config dir nodeagent checks, and why.
type checkedDirs struct {
	conf     string   // "": none
	bins     []string // the plugin dirs it validates against
	from     string   // where conf came from
	mismatch string   // a warning when the runtime reads another dir than nodeagent uses
}

// cniDirs decides which CNI config dir nodeagent checks, given what the
// runtime named (rtConf "" when it named none):
//
//  1. --cni-conf-dir given: that one, the operator's word;
//  2. else the runtime's own, when it names it;
//  3. else, with --pod-cidr, --cni-conf-dir's default, where nodeagent
//     writes the node's conflist;
//  4. else none: nodeagent does not know the dir, and checks nothing.
//
// The plugin dirs are --cni-bin-dir when given, else the runtime's when
// it names them, else --cni-bin-dir's default. When the runtime names a
// conf dir other than the one nodeagent checks or writes into, the
// mismatch is returned to be told.
func cniDirs(o cniSettings, rtConf string, rtBins []string) checkedDirs {
	var d checkedDirs
	switch {
	case o.cniConfDirGiven:
		d.conf, d.from = o.cniConfDir, "--cni-conf-dir"
	case rtConf != "":
		d.conf, d.from = rtConf, "the runtime"
	case o.podCIDR != "":
		d.conf, d.from = o.cniConfDir, "--pod-cidr (nodeagent writes the conflist there)"
	default:
		return d
	}
	switch {
	case o.cniBinDirGiven || len(rtBins) == 0:
		d.bins = []string{o.cniBinDir}
	default:
		d.bins = rtBins
	}
	if rtConf != "" && filepath.Clean(rtConf) != filepath.Clean(o.cniConfDir) {
		switch {
		case o.cniConfDirGiven:
			d.mismatch = "--cni-conf-dir is not the runtime's CNI config dir: nodeagent checks (and, for the pod CIDR, writes) --cni-conf-dir, while pods get the runtime's"
		case o.podCIDR != "":
			d.mismatch = "the pod CIDR's conflist goes to --cni-conf-dir, which is not the runtime's CNI config dir: give --cni-conf-dir the runtime's"
		}
	}
	return d
}
