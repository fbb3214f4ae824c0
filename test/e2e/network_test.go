//go:build integration

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// webPod serves "<greeting>" on port 8080 with busybox httpd; hostPort
// maps it on the node when non-zero.
func webPod(name, greeting string, hostPort int) string {
	ports := ""
	if hostPort != 0 {
		ports = fmt.Sprintf("    ports: [{containerPort: 8080, hostPort: %d}]\n", hostPort)
	}
	return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: ` + busybox + `
    command: ["sh", "-c", "mkdir -p /www && echo ` + greeting + ` >/www/index.html && exec httpd -f -p 8080 -h /www"]
` + ports
}

// podCIDR is the rig's pod CIDR.
func podCIDR(t *testing.T) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(envOr("NODEAGENT_POD_CIDR", "10.99.0.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// gatewayIP is the bridge's address: the pod CIDR's first host.
func gatewayIP(t *testing.T) string {
	ip := append(net.IP{}, podCIDR(t).IP.To4()...)
	ip[3]++
	return ip.String()
}

// ipStore is the host-local store of the rig's network.
func ipStore(t *testing.T) string {
	t.Helper()
	root := os.Getenv("NODEAGENT_RIG_DIR")
	if root == "" {
		t.Fatal("NODEAGENT_RIG_DIR not set: cannot find the IP store")
	}
	return filepath.Join(root, "cni", "ipam", "nodeagent")
}

// reservations maps each reserved IP of the rig's network to its
// container ID.
func reservations(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(ipStore(t))
	if err != nil {
		t.Fatalf("read IP store: %v", err)
	}
	for _, e := range entries {
		if net.ParseIP(e.Name()) == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(ipStore(t), e.Name()))
		if err != nil {
			continue // released meanwhile
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			out[e.Name()] = f[0]
		}
	}
	return out
}

// readySandboxIPs maps every READY sandbox of the runtime (any agent's)
// with a pod IP to that IP.
func readySandboxIPs(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := conn.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}})
	if err != nil {
		t.Fatalf("list sandboxes: %v", err)
	}
	out := map[string]string{}
	for _, sb := range r.Items {
		st, err := conn.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.Id})
		if err != nil || st.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if ip := st.Status.GetNetwork().GetIp(); ip != "" { // hostNetwork sandboxes have none
			out[sb.Id] = ip
		}
	}
	return out
}

// podIP waits for the pod's IP in its published status.
func (a *agent) podIP(t *testing.T, name string) string {
	t.Helper()
	var ip string
	eventually(t, 60*time.Second, name+" running with a pod IP", func() bool {
		p := a.status(name)
		if p == nil || p.Status.PodIP == "" || a.running(name, "") == nil {
			return false
		}
		ip = p.Status.PodIP
		return true
	})
	return ip
}

// Two pods get distinct IPs from the pod CIDR, and one fetches a page
// from the other across the rig's bridge.
func TestNetworkPodToPod(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("web.yaml", webPod("web", "hello-from-"+a.node, 0))
	a.write("client.yaml", sleeper("client", "c"))
	webIP, clientIP := a.podIP(t, "web"), a.podIP(t, "client")
	cidr := podCIDR(t)
	if webIP == clientIP || !cidr.Contains(net.ParseIP(webIP)) || !cidr.Contains(net.ParseIP(clientIP)) {
		t.Fatalf("pod IPs %s and %s: want two distinct IPs of %s", webIP, clientIP, cidr)
	}
	// Each IP is reserved in the IP store by its own sandbox.
	res := reservations(t)
	if res[webIP] != a.sandboxes("web")[0].Id || res[clientIP] != a.sandboxes("client")[0].Id {
		t.Errorf("IP store %v does not hold %s and %s for their sandboxes", res, webIP, clientIP)
	}
	c := a.running("client", "main")
	var out string
	eventually(t, 30*time.Second, "client fetches the page", func() bool {
		out = execIn(t, c.Id, "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc `+webIP+` 8080`)
		return strings.Contains(out, "hello-from-"+a.node)
	})
	if !strings.Contains(out, "200 OK") {
		t.Errorf("response: %q", out)
	}
}

// A hostPort pod answers on the node side of the bridge, through portmap.
func TestNetworkHostPort(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	b := make([]byte, 2)
	rand.Read(b)
	port := 31000 + int(b[0])<<4 + int(b[1]&0xf) // 31000..35095, unlikely taken
	a.write("hp.yaml", webPod("hp", "hostport-"+a.node, port))
	a.podIP(t, "hp")
	for _, host := range []string{gatewayIP(t), "127.0.0.1"} {
		addr := net.JoinHostPort(host, fmt.Sprint(port))
		var got string
		eventually(t, 30*time.Second, "page on "+addr, func() bool {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return false
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprint(c, "GET / HTTP/1.0\r\n\r\n")
			body, _ := io.ReadAll(c)
			got = string(body)
			return strings.Contains(got, "hostport-"+a.node)
		})
		t.Logf("%s answered: %q", addr, strings.SplitN(got, "\r\n", 2)[0])
	}
	// Removed: the mapping goes with the sandbox.
	a.remove("hp.yaml")
	eventually(t, 60*time.Second, "pod gone", func() bool { return len(a.sandboxes("hp")) == 0 })
	eventually(t, 10*time.Second, "port closed", func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(gatewayIP(t), fmt.Sprint(port)), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
}

// 50 pods created and deleted, ten at a time, beside two that stay: no
// IP of a live pod is ever released (checked while the pods churn and GC
// runs every 2 s), and the IP store ends holding exactly the live
// sandboxes' IPs. Not parallel: it judges the whole store.
func TestNetworkChurnIPStore(t *testing.T) {
	a := newAgent(t, "--cni-gc-period", "2s")
	a.start()
	a.write("keep1.yaml", sleeper("keep1", "k"))
	a.write("keep2.yaml", sleeper("keep2", "k"))
	keepIPs := map[string]string{}
	for _, k := range []string{"keep1", "keep2"} {
		keepIPs[a.podIP(t, k)] = a.sandboxes(k)[0].Id
	}
	checkKeepers := func(when string) {
		t.Helper()
		res := reservations(t)
		for ip, id := range keepIPs {
			if res[ip] != id {
				t.Fatalf("%s: live pod IP %s of sandbox %s released (store has %q)", when, ip, id[:12], res[ip])
			}
		}
	}
	var churned []string
	const rounds, perRound = 5, 10
	for r := 0; r < rounds; r++ {
		for i := 0; i < perRound; i++ {
			a.write(fmt.Sprintf("c%d.yaml", i), sleeper(fmt.Sprintf("c%d", i), fmt.Sprint(r)))
		}
		eventually(t, 120*time.Second, fmt.Sprintf("round %d: %d pods running", r, perRound), func() bool {
			checkKeepers(fmt.Sprintf("round %d, starting", r))
			for i := 0; i < perRound; i++ {
				if a.running(fmt.Sprintf("c%d", i), "main") == nil {
					return false
				}
			}
			return true
		})
		for i := 0; i < perRound; i++ {
			for _, sb := range a.sandboxes(fmt.Sprintf("c%d", i)) {
				churned = append(churned, sb.Id)
			}
			a.remove(fmt.Sprintf("c%d.yaml", i))
		}
		eventually(t, 120*time.Second, fmt.Sprintf("round %d: pods removed", r), func() bool {
			checkKeepers(fmt.Sprintf("round %d, stopping", r))
			for i := 0; i < perRound; i++ {
				if len(a.sandboxes(fmt.Sprintf("c%d", i))) != 0 {
					return false
				}
			}
			return true
		})
	}
	if len(churned) != rounds*perRound {
		t.Fatalf("churned %d sandboxes, want %d", len(churned), rounds*perRound)
	}
	// The store holds exactly the ready sandboxes' IPs, each for its own
	// sandbox: no IP of a churned pod is left, none of a live pod is gone.
	var res map[string]string
	var live map[string]string
	eventually(t, 30*time.Second, "IP store == ready sandboxes' IPs", func() bool {
		res, live = reservations(t), readySandboxIPs(t)
		if len(res) != len(live) {
			return false
		}
		for id, ip := range live {
			if res[ip] != id {
				return false
			}
		}
		return true
	})
	checkKeepers("after the churn")
	for _, id := range churned {
		for ip, owner := range res {
			if owner == id {
				t.Errorf("IP %s still reserved by churned sandbox %s", ip, id[:12])
			}
		}
	}
	t.Logf("store %v == ready sandboxes %v after %d pods", res, live, len(churned))
}

// unusedIP returns an IP of the pod CIDR that no reservation holds,
// counting down from the top.
func unusedIP(t *testing.T, taken map[string]string) string {
	t.Helper()
	cidr := podCIDR(t)
	base := cidr.IP.To4()
	ones, _ := cidr.Mask.Size()
	for host := 1<<(32-ones) - 2; host > 1; host-- {
		ip := net.IPv4(base[0], base[1], base[2]+byte(host>>8), base[3]+byte(host))
		if _, ok := taken[ip.String()]; !ok && cidr.Contains(ip) {
			return ip.String()
		}
	}
	t.Fatal("pod CIDR full")
	return ""
}

func fakeContainerID() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// An IP leaked while the agent was down (a sandbox gone behind the
// runtime's back, its reservation left) is released within a GC period
// after the restart, by the cache entry's CNI DEL or by the store
// reconcile; a live pod's IP stays. Not parallel: it plants leaks in the
// shared store.
func TestNetworkLeakedIPReleasedAfterRestart(t *testing.T) {
	a := newAgent(t) // the default --cni-gc-period, 30s
	a.start()
	a.write("live.yaml", sleeper("live", "l"))
	liveIP := a.podIP(t, "live")
	liveSB := a.sandboxes("live")[0].Id
	a.kill9()

	old := time.Now().Add(-10 * time.Minute)
	store := ipStore(t)
	// Leak 1: a reservation only (its owner destroyed, no cache entry).
	id1 := fakeContainerID()
	ip1 := unusedIP(t, reservations(t))
	if err := os.WriteFile(filepath.Join(store, ip1), []byte(id1+"\r\neth0"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(store, ip1), old, old)
	// Leak 2: a reservation with libcni's cache entry, as containerd
	// leaves them when a sandbox's netns vanished: released by a CNI DEL.
	id2 := fakeContainerID()
	ip2 := unusedIP(t, reservations(t))
	if err := os.WriteFile(filepath.Join(store, ip2), []byte(id2+"\r\neth0"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(store, ip2), old, old)
	cacheFile := filepath.Join("/var/lib/cni/results", "nodeagent-"+id2+"-eth0")
	conf, err := os.ReadFile(filepath.Join(cniConf, "10-nodeagent.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	entry, _ := json.Marshal(map[string]any{"kind": "cniCacheV1", "containerId": id2, "ifName": "eth0",
		"networkName": "nodeagent", "netns": "/var/run/netns/cni-gone-" + id2[:8], "config": conf})
	os.MkdirAll(filepath.Dir(cacheFile), 0o755)
	if err := os.WriteFile(cacheFile, entry, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(cacheFile, old, old)
	t.Cleanup(func() {
		os.Remove(cacheFile)
		os.Remove(filepath.Join(store, ip1))
		os.Remove(filepath.Join(store, ip2))
	})
	t.Logf("planted leaks %s (%s) and %s (%s, cached)", ip1, id1[:12], ip2, id2[:12])

	restarted := time.Now()
	a.start()
	eventually(t, 50*time.Second, "leaked IPs released", func() bool {
		res := reservations(t)
		if res[liveIP] != liveSB {
			t.Fatalf("live pod's IP %s released (store has %q)", liveIP, res[liveIP])
		}
		_, has1 := res[ip1]
		_, has2 := res[ip2]
		return !has1 && !has2
	})
	t.Logf("released %v after the restart", time.Since(restarted).Round(time.Second))
	if _, err := os.Stat(cacheFile); err == nil {
		t.Error("the leaked attachment's cache entry stayed")
	}
	// Released by this agent, and told (the log follows the release).
	eventually(t, 5*time.Second, "releases logged", func() bool {
		log := a.out.String()
		return strings.Contains(log, "released leaked pod IP") && strings.Contains(log, ip1) &&
			strings.Contains(log, "released leaked pod network attachment") && strings.Contains(log, id2)
	})
	if a.running("live", "main") == nil || a.sandboxes("live")[0].Id != liveSB {
		t.Error("the live pod did not survive")
	}
}

// A conflist naming an unknown plugin, given to a fresh agent through its
// own --cni-conf-dir (not the directory the runtime reads), is reported
// with the plugin error and the mismatch, and pods still start: the
// runtime's NetworkReady judges the pod network, as with the kubelet; a
// conflist nodeagent generates for --pod-cidr is
// validated by the real plugins (VERSION, STATUS) and written, one the
// plugins refuse is not, and an edit that breaks it at run time is
// reported loudly. Running pods stay up throughout.
func TestNetworkInvalidConflist(t *testing.T) {
	t.Parallel()
	keeper := newAgent(t)
	keeper.start()
	keeper.write("k.yaml", sleeper("k", "k"))
	keeper.podIP(t, "k")
	kc := keeper.running("k", "main").Id

	// 1. An operator's broken conflist.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "10-bad.conflist"), []byte(`{"cniVersion":"1.0.0","name":"bad","plugins":[{"type":"nosuch-plugin"}]}`), 0o644)
	a := newAgent(t, "--cni-conf-dir", bad)
	a.start()
	eventually(t, 30*time.Second, "the broken config reported", func() bool {
		return strings.Contains(a.out.String(), `failed to find plugin \"nosuch-plugin\"`) ||
			strings.Contains(a.out.String(), `failed to find plugin "nosuch-plugin"`)
	})
	eventually(t, 10*time.Second, "the directory mismatch reported", func() bool {
		return strings.Contains(a.out.String(), "not the runtime's CNI config dir")
	})
	a.write("w.yaml", sleeper("w", "w"))
	a.podIP(t, "w") // started on the runtime's network

	// 2. Generated for --pod-cidr into an empty dir: validated and written.
	gen := t.TempDir()
	// No GC: its network shares the rig's name but not its store.
	g := newAgent(t, "--cni-conf-dir", gen, "--pod-cidr", "10.250.0.0/24,fd00:250::/64", "--cni-gc-period", "0")
	g.start()
	file := filepath.Join(gen, "10-nodeagent.conflist")
	eventually(t, 30*time.Second, "conflist generated", func() bool { _, err := os.Stat(file); return err == nil })
	body, _ := os.ReadFile(file)
	for _, want := range []string{`"generatedBy": "nodeagent"`, `"cniVersion": "` + map[bool]string{true: "1.0.0", false: "1.1.0"}[os.Getenv("NODEAGENT_RIG_CONTAINERD") == "debian"] + `"`,
		`"subnet": "10.250.0.0/24"`, `"subnet": "fd00:250::/64"`, `"type": "portmap"`, `"type": "bandwidth"`, `"macspoofchk": true`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("generated conflist lacks %s:\n%s", want, body)
		}
	}
	eventually(t, 10*time.Second, "generated conflist accepted", func() bool { return strings.Contains(g.out.String(), "CNI network") })
	// Broken at run time: reported loudly, within the re-check period.
	os.WriteFile(file, []byte(strings.Replace(string(body), `"type": "bandwidth"`, `"type": "bandwidthh"`, 1)), 0o644)
	eventually(t, 20*time.Second, "run-time breakage reported", func() bool {
		return strings.Contains(g.out.String(), "CNI config is broken") && strings.Contains(g.out.String(), "bandwidthh")
	})

	// 3. Generated but refused: the plugins are not all there.
	few := t.TempDir()
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		os.Symlink(filepath.Join(cniBin, p), filepath.Join(few, p))
	}
	empty := t.TempDir()
	r := newAgent(t, "--cni-conf-dir", empty, "--cni-bin-dir", few, "--pod-cidr", "10.251.0.0/24", "--cni-gc-period", "0")
	r.start()
	eventually(t, 30*time.Second, "generated config refused", func() bool {
		return strings.Contains(r.out.String(), "CNI config refused") && strings.Contains(r.out.String(), "portmap")
	})
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a refused config was written: %v", entries)
	}

	// The rig's running pod was never touched.
	if c := keeper.running("k", "main"); c == nil || c.Id != kc {
		t.Error("the running pod did not stay up")
	}
}

// The bandwidth annotation reaches the kernel: the shaped pod's host-side
// interface gets a token bucket at the annotation's rate. A timed
// transfer cannot show it on this box: containerd's CRI passes the
// plugin a burst of MaxUint32 bits (~512 MiB, sandbox_run.go), so the
// first half gigabyte of a connection is never slowed; the test logs the
// timing of a 3 MiB fetch for information and checks the qdisc instead.
func TestNetworkBandwidth(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tc"); err != nil {
		t.Fatal("tc (iproute2) is needed to read the qdiscs: install iproute2")
	}
	a := newAgent(t)
	a.start()
	a.write("bigweb.yaml", `apiVersion: v1
kind: Pod
metadata: {name: bigweb}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: `+busybox+`
    command: ["sh", "-c", "mkdir -p /www && dd if=/dev/zero of=/www/big bs=1024 count=3072 && exec httpd -f -p 8080 -h /www"]
`)
	client := func(name, annotations string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, annotations: {` + annotations + `}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busybox + `
    command: ["sh", "-c", "` + sleepLoop + `"]
`
	}
	a.write("clients.yaml", client("shaped", `kubernetes.io/ingress-bandwidth: 8M`)+"---\n"+client("free", ""))
	webIP := a.podIP(t, "bigweb")
	a.podIP(t, "shaped")
	a.podIP(t, "free")
	// Only this test asks for bandwidth: an 8 Mbit token bucket is its own.
	eventually(t, 10*time.Second, "a tbf qdisc at 8Mbit for the shaped pod", func() bool {
		out, _ := exec.Command("tc", "qdisc", "show").CombinedOutput()
		return strings.Contains(string(out), "tbf") && strings.Contains(string(out), "rate 8Mbit")
	})
	fetch := func(name string) time.Duration {
		c := a.running(name, "main")
		var took time.Duration
		eventually(t, 30*time.Second, name+" fetches 3 MiB", func() bool {
			start := time.Now()
			out := execIn(t, c.Id, "sh", "-c", `printf 'GET /big HTTP/1.0\r\n\r\n' | nc `+webIP+` 8080 | wc -c`)
			took = time.Since(start)
			n, _ := strconv.Atoi(strings.TrimSpace(out))
			return n > 3<<20
		})
		return took
	}
	t.Logf("3 MiB, within containerd's burst: unshaped %v, shaped %v", fetch("free").Round(time.Millisecond), fetch("shaped").Round(time.Millisecond))
	a.remove("clients.yaml")
	eventually(t, 30*time.Second, "the token bucket gone with the pod", func() bool {
		out, _ := exec.Command("tc", "qdisc", "show").CombinedOutput()
		return !strings.Contains(string(out), "rate 8Mbit")
	})
}

// The pod network checks MAC spoofing (the bridge plugin's macspoofchk,
// on in the conflist nodeagent generates and in the rig's, which has its
// shape): a pod that changes its interface's MAC address reaches no one
// any more, while it reached its peer before.
func TestNetworkMACSpoofing(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	a.start()
	a.write("web.yaml", webPod("web", "hello-from-"+a.node, 0))
	a.write("spoofer.yaml", `apiVersion: v1
kind: Pod
metadata: {name: spoofer}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: `+busybox+`
    command: [sleep, "3600"]
    securityContext: {capabilities: {add: [NET_ADMIN]}}
`)
	webIP := a.podIP(t, "web")
	a.podIP(t, "spoofer")
	c := a.running("spoofer", "main")
	fetch := `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 ` + webIP + ` 8080`
	eventually(t, 30*time.Second, "the spoofer fetches the page with its own MAC", func() bool {
		return strings.Contains(execIn(t, c.Id, "sh", "-c", fetch), "hello-from-"+a.node)
	})
	out := execIn(t, c.Id, "sh", "-c", "ip neigh flush all; ip link set eth0 address 02:42:de:ad:be:ef && ip link show eth0")
	if !strings.Contains(out, "02:42:de:ad:be:ef") {
		t.Fatalf("MAC not changed: %s", out)
	}
	for i := 0; i < 3; i++ {
		if out := execIn(t, c.Id, "sh", "-c", fetch); strings.Contains(out, "hello-from-"+a.node) {
			t.Fatalf("attempt %d: a pod with a spoofed MAC reached its peer: %q", i, out)
		}
	}
}
