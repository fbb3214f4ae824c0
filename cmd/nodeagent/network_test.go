package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodeagent/nodeagent/internal/cri"
	"github.com/nodeagent/nodeagent/internal/cri/critest"
	"github.com/nodeagent/nodeagent/internal/pod"
)

// statusRuntime is critest's runtime with the Status answer injected; it
// records whether each Status call was verbose.
type statusRuntime struct {
	*critest.Fake
	resp    *runtimeapi.StatusResponse
	err     error
	verbose []bool
}

func (f *statusRuntime) Status(_ context.Context, in *runtimeapi.StatusRequest, _ ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	f.verbose = append(f.verbose, in.Verbose)
	return f.resp, f.err
}

// runtimeStatus answers with RuntimeReady, NetworkReady as given (with
// containerd's reason and message when false) and info as the verbose
// info.
func runtimeStatus(networkReady bool, info map[string]string) *runtimeapi.StatusResponse {
	net := &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Status: true}
	if !networkReady {
		net = &runtimeapi.RuntimeCondition{Type: runtimeapi.NetworkReady, Reason: "NetworkPluginNotReady",
			Message: "Network plugin returns error: cni plugin not initialized"}
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, net,
	}}, Info: info}
}

// The kubelet's words for a pod held back by containerd without a CNI
// config (pkg/kubelet/kubelet.go: NetworkNotReadyErrorMsg, updateRuntimeUp,
// RuntimeCondition.String).
const kubeletNotReady = "network is not ready: container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"

// brokenConflist names a plugin no bin dir has.
const brokenConflist = `{"cniVersion":"1.0.0","name":"bad","plugins":[{"type":"nosuch-plugin"}]}`

var netPod = &v1.Pod{
	ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
	Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.example/web:1"}}},
}

// The runtime's NetworkReady alone decides whether a pod that needs the
// pod network waits, whatever nodeagent finds in a CNI config dir; that
// finding is logged, and added to a not-ready runtime's message. The
// pod's hold is the real sandbox gate of internal/cri.
func TestPodNetworkFollowsTheRuntime(t *testing.T) {
	tests := []struct {
		name string
		// confDir: "" for an empty temp dir as the flag's default value,
		// "broken" for a temp dir with brokenConflist.
		confDir      string
		confDirGiven bool
		runtimeNames bool // the runtime's verbose info names confDir
		networkReady bool
		wantHeld     string   // the pod's sandbox error; "" when it gets a sandbox
		wantHeldHas  []string // instead of wantHeld: parts of it
		wantLogs     []string // messages logged (substrings), in any order
		wantChecked  bool     // nodeagent validates a dir
	}{
		{name: "runtime ready, empty default dir: not held, not validated",
			networkReady: true,
			wantLogs:     []string{"not validating CNI config: directory unknown"}},
		{name: "runtime not ready: held with the kubelet's message",
			wantHeld: kubeletNotReady,
			wantLogs: []string{"not validating CNI config: directory unknown"}},
		{name: "runtime ready, its own dir named and empty: validated, logged, not held",
			runtimeNames: true, networkReady: true, wantChecked: true,
			wantLogs: []string{"validating CNI config", "CNI config is broken"}},
		{name: "explicit dir with a broken conflist, runtime ready: logged, not held",
			confDir: "broken", confDirGiven: true, networkReady: true, wantChecked: true,
			wantLogs: []string{"validating CNI config", "CNI config is broken"}},
		{name: "explicit dir with a broken conflist, runtime not ready: held, the finding added",
			confDir: "broken", confDirGiven: true, wantChecked: true,
			wantHeldHas: []string{kubeletNotReady + "; nodeagent's CNI config check: CNI config ", "10-bad.conflist", `"nosuch-plugin"`},
			wantLogs:    []string{"validating CNI config", "CNI config is broken"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			conf := t.TempDir()
			if tt.confDir == "broken" {
				os.WriteFile(filepath.Join(conf, "10-bad.conflist"), []byte(brokenConflist), 0o644)
			}
			var info map[string]string
			if tt.runtimeNames {
				info = map[string]string{"config": `{"cni":{"confDir":"` + conf + `","binDirs":["` + t.TempDir() + `"]}}`}
			}
			clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
			rtm := &statusRuntime{Fake: critest.New(clk), resp: runtimeStatus(tt.networkReady, info)}
			core, logs := observer.New(zapcore.InfoLevel)
			o := cniSettings{cniConfDir: conf, cniConfDirGiven: tt.confDirGiven, cniBinDir: t.TempDir(), runtimeRequestTimeout: time.Second}
			n := newPodNetwork(o, rtm, clk, zap.New(core))

			n.Poll(ctx)
			if m := n.firstCheck(ctx); (m != nil) != tt.wantChecked {
				t.Errorf("validating a dir = %v, want %v", m != nil, tt.wantChecked)
			}
			rt, err := cri.New(cri.Config{Client: rtm, Logger: zap.NewNop(), Clock: clk, RootDir: t.TempDir(), PodLogsDir: t.TempDir(),
				NodeName: "node1", NetworkHealth: n.PodErr})
			if err != nil {
				t.Fatal(err)
			}
			res := rt.SyncPod(ctx, netPod, &pod.RuntimeStatus{UID: netPod.UID})
			made := slices.Contains(rtm.Methods(), "RunPodSandbox")
			switch {
			case tt.wantHeld == "" && tt.wantHeldHas == nil:
				if !made || res.SandboxError != "" {
					t.Errorf("held: sandbox made %v, error %q", made, res.SandboxError)
				}
			case made:
				t.Errorf("a sandbox was made; want held with %q", tt.wantHeld)
			case tt.wantHeld != "" && res.SandboxError != tt.wantHeld:
				t.Errorf("held with\n%q\nwant\n%q", res.SandboxError, tt.wantHeld)
			}
			for _, w := range tt.wantHeldHas {
				if !strings.Contains(res.SandboxError, w) {
					t.Errorf("held with %q, want it to contain %q", res.SandboxError, w)
				}
			}
			// The node's Ready condition gets the same judgement, without
			// the pod's prefix (internal/node adds its own).
			if nodeErr := n.Err(); (nodeErr == nil) != tt.networkReady {
				t.Errorf("node's network error %v with NetworkReady=%v", nodeErr, tt.networkReady)
			}
			for _, w := range tt.wantLogs {
				if logs.FilterMessageSnippet(w).Len() == 0 {
					t.Errorf("no log %q in %v", w, messages(logs))
				}
			}
			if got := logs.FilterMessageSnippet("pod network readiness").Len(); got != 1 {
				t.Errorf("%d readiness decisions logged, want 1", got)
			}
		})
	}
}

func messages(logs *observer.ObservedLogs) []string {
	var out []string
	for _, e := range logs.All() {
		out = append(out, e.Message)
	}
	return out
}

// Before the runtime first answers, the network is unknown (as the
// kubelet's), nothing is decided, and the verbose question is asked again
// until it is; from then on Status is not verbose.
func TestPodNetworkWaitsForTheRuntimeToAnswer(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	conf := t.TempDir()
	rtm := &statusRuntime{Fake: critest.New(clk), err: errors.New("connection refused")}
	core, logs := observer.New(zapcore.InfoLevel)
	n := newPodNetwork(cniSettings{cniConfDir: conf, cniBinDir: t.TempDir()}, rtm, clk, zap.New(core))

	if err := n.PodErr(); err == nil || !strings.Contains(err.Error(), "network state unknown") {
		t.Errorf("before any poll: %v", err)
	}
	n.Poll(ctx)
	if err := n.PodErr(); err == nil || err.Error() != "container runtime network not ready: get runtime status: connection refused" {
		t.Errorf("runtime down: %v", err)
	}
	rtm.err, rtm.resp = nil, runtimeStatus(true, map[string]string{"config": `{"cni":{"confDir":"` + conf + `"}}`})
	n.Poll(ctx)
	n.Poll(ctx)
	if err := n.PodErr(); err != nil {
		t.Errorf("runtime ready: %v", err)
	}
	if d := cmp.Diff([]bool{true, true, false}, rtm.verbose); d != "" {
		t.Errorf("verbose calls (-want +got):\n%s", d)
	}
	if logs.FilterMessageSnippet("validating CNI config").Len() != 1 {
		t.Errorf("the runtime's dir not chosen once: %v", messages(logs))
	}
	// Run returns once ctx ends (it re-checks and GCs until then).
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	n.Run(cctx)
}

func TestCNIDirs(t *testing.T) {
	const def, defBin = "/etc/cni/net.d", "/opt/cni/bin"
	k3s, k3sBin := "/var/lib/rancher/k3s/agent/etc/cni/net.d", []string{"/var/lib/rancher/k3s/data/current/bin"}
	tests := []struct {
		name    string
		o       cniSettings
		rtConf  string
		rtBins  []string
		want    checkedDirs
		warning bool
	}{
		{name: "default dir, the runtime names none: nothing checked",
			o: cniSettings{cniConfDir: def, cniBinDir: defBin}},
		{name: "default dir, the runtime names its own (k3s): that one, with its plugins",
			o: cniSettings{cniConfDir: def, cniBinDir: defBin}, rtConf: k3s, rtBins: k3sBin,
			want: checkedDirs{conf: k3s, bins: k3sBin, from: "the runtime"}},
		{name: "the runtime names its conf dir only: the default plugin dir",
			o: cniSettings{cniConfDir: def, cniBinDir: defBin}, rtConf: def,
			want: checkedDirs{conf: def, bins: []string{defBin}, from: "the runtime"}},
		{name: "given, the runtime agrees (trailing slash)",
			o: cniSettings{cniConfDir: def + "/", cniConfDirGiven: true, cniBinDir: defBin}, rtConf: def, rtBins: []string{defBin},
			want: checkedDirs{conf: def + "/", bins: []string{defBin}, from: "--cni-conf-dir"}},
		{name: "given, the runtime reads another: the flag's, told",
			o: cniSettings{cniConfDir: "/srv/cni", cniConfDirGiven: true, cniBinDir: "/srv/bin", cniBinDirGiven: true}, rtConf: k3s, rtBins: k3sBin,
			want: checkedDirs{conf: "/srv/cni", bins: []string{"/srv/bin"}, from: "--cni-conf-dir"}, warning: true},
		{name: "given, the runtime names none",
			o:    cniSettings{cniConfDir: "/srv/cni", cniConfDirGiven: true, cniBinDir: defBin},
			want: checkedDirs{conf: "/srv/cni", bins: []string{defBin}, from: "--cni-conf-dir"}},
		{name: "--pod-cidr, the runtime names none: the dir nodeagent writes",
			o:    cniSettings{cniConfDir: def, cniBinDir: defBin, podCIDR: "10.1.0.0/24"},
			want: checkedDirs{conf: def, bins: []string{defBin}, from: "--pod-cidr (nodeagent writes the conflist there)"}},
		{name: "--pod-cidr, the runtime reads another: the runtime's, told",
			o: cniSettings{cniConfDir: def, cniBinDir: defBin, podCIDR: "10.1.0.0/24"}, rtConf: k3s, rtBins: k3sBin,
			want: checkedDirs{conf: k3s, bins: k3sBin, from: "the runtime"}, warning: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cniDirs(tt.o, tt.rtConf, tt.rtBins)
			if (got.mismatch != "") != tt.warning {
				t.Errorf("mismatch %q, want one: %v", got.mismatch, tt.warning)
			}
			got.mismatch = ""
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(checkedDirs{})); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// --cni-conf-dir and --cni-bin-dir count as given only on the command
// line (KubeletConfiguration has no CNI fields since dockershim).
func TestCNIDirFlagsGiven(t *testing.T) {
	o, err := parseOptions([]string{"--manifest-dir", "/m"})
	if err != nil {
		t.Fatal(err)
	}
	if o.cniConfDirGiven || o.cniBinDirGiven || o.cniConfDir != "/etc/cni/net.d" {
		t.Errorf("defaults: %+v", o)
	}
	o, err = parseOptions([]string{"--manifest-dir", "/m", "--cni-conf-dir", "/srv/cni", "--cni-bin-dir", "/srv/bin"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.cniConfDirGiven || !o.cniBinDirGiven {
		t.Errorf("given: %+v", o)
	}
}
