//go:build integration

package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeletClientPEM is the kubelet's certificate store's current
// certificate, which kubelet-finalize points kubelet.conf at.
const kubeletClientPEM = "/var/lib/kubelet/pki/kubelet-client-current.pem"

// kubeadmNode is hack/kubeadm-node.sh's node: its own network and mount
// namespaces, where /etc/kubernetes, /var/lib/kubelet, … are directories
// under dir, with a rig (registry, containerd) of its own.
type kubeadmNode struct {
	t      *testing.T
	dir    string
	script string
	env    map[string]string
}

// newKubeadmNode sets a node up; upArgs are more of `up`'s arguments
// (--join DIR for a second node).
func newKubeadmNode(t *testing.T, upArgs ...string) *kubeadmNode {
	t.Helper()
	script, err := filepath.Abs("../../hack/kubeadm-node.sh")
	if err != nil {
		t.Fatal(err)
	}
	n := &kubeadmNode{t: t, dir: t.TempDir(), script: script, env: map[string]string{}}
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "down", n.dir).CombinedOutput(); err != nil {
			t.Errorf("hack/kubeadm-node.sh down: %v\n%s", err, out)
		}
	})
	cmd := exec.Command("bash", append([]string{script, "up", n.dir}, upArgs...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/kubeadm-node.sh up: %v\n%s", err, tail(stderr.String(), 40))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			n.env[k] = strings.Trim(v, "'")
		}
	}
	if n.env["KUBEADM_NODE_PID"] == "" {
		t.Fatalf("hack/kubeadm-node.sh up printed no node: %s", out)
	}
	return n
}

// command runs name inside the node's namespaces (nsenter without a PID
// namespace execs: the process is name's own).
func (n *kubeadmNode) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"--target", n.env["KUBEADM_NODE_PID"], "--mount", "--net", "--", name}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// path is where the node's path p (under one of its bound directories) is
// on the host.
func (n *kubeadmNode) path(p string) string {
	for _, bound := range []string{"/etc/kubernetes", "/var/lib/kubelet"} {
		if rest, ok := strings.CutPrefix(p, bound); ok {
			return filepath.Join(n.dir, "fs"+strings.ReplaceAll(bound, "/", "-"), rest)
		}
	}
	n.t.Fatalf("%s is not in a directory of the node", p)
	return ""
}

// kubectl gets an object (or list) as the cluster's admin, into obj.
func (n *kubeadmNode) kubectl(obj any, args ...string) error {
	out, err := n.command(rigBinary(n.t, "kubectl"), append(append([]string{"--kubeconfig", "/etc/kubernetes/admin.conf"}, args...), "-o", "json")...).Output()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
	}
	return json.Unmarshal(out, obj)
}

func rigBinary(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s (hack/install-controlplane.sh builds it): %v", name, err)
	}
	return p
}

// kubeadmExecStart is the command line systemd runs for kubelet.service
// with kubeadm's 10-kubeadm.conf and nodeagent's drop-in
// (deploy/kubeadm/20-nodeagent.conf): its ExecStart, the variables
// expanded from kubeadm's drop-in and kubeadm-flags.env, as systemd splits
// them (at white space); extra is KUBELET_EXTRA_ARGS (/etc/default/kubelet).
func kubeadmExecStart(t *testing.T, flagsEnv, extra string) []string {
	t.Helper()
	dropIn, err := os.ReadFile("../../deploy/kubeadm/20-nodeagent.conf")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		// kubeadm's 10-kubeadm.conf (kubernetes/release, cmd/krel/templates/latest/kubeadm/10-kubeadm.conf)
		"KUBELET_KUBECONFIG_ARGS": "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf",
		"KUBELET_CONFIG_ARGS":     "--config=/var/lib/kubelet/config.yaml",
		"KUBELET_EXTRA_ARGS":      extra,
	}
	env, err := os.ReadFile(flagsEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(env), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vars[k] = strings.Trim(v, `"`)
		}
	}
	var execStart string
	sc := bufio.NewScanner(bytes.NewReader(dropIn))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ExecStart="); ok && v != "" {
			execStart = v
		}
	}
	if execStart == "" {
		t.Fatal("deploy/kubeadm/20-nodeagent.conf has no ExecStart")
	}
	var args []string
	for _, word := range strings.Fields(execStart) {
		if name, ok := strings.CutPrefix(word, "$"); ok {
			args = append(args, strings.Fields(vars[name])...)
			continue
		}
		args = append(args, word)
	}
	if args[0] != "/usr/local/bin/nodeagent" {
		t.Fatalf("the drop-in runs %s, not nodeagent", args[0])
	}
	return args[1:]
}

// TestKubeadmInit: `kubeadm init` with nodeagent as its kubelet, started
// as kubeadm's systemd drop-in starts the kubelet (deploy/kubeadm), in a
// node of its own (hack/kubeadm-node.sh: the API server advertised on a
// non-loopback address of a network namespace the test makes; kubeadm's
// control-plane images built from the control plane's binaries and pulled
// from the node's registry). kubeadm completes every phase but the
// kube-proxy and CoreDNS add-ons (no images for them here);
// kubelet-finalize switches kubelet.conf to the certificate store, whose
// certificate was renewed through a CSR; the node is Ready with the
// control-plane label and taint; the control plane's mirror pods are
// Running with the node's IP as pod IP; every field of kubeadm's
// config.yaml is implemented; after the restart kubelet-finalize asks for,
// nodeagent runs on the rotatable certificate and adopts the control plane
// without restarting it.
func TestKubeadmInit(t *testing.T) {
	b := make([]byte, 3)
	rand.Read(b)
	name := "kubeadm-" + hex.EncodeToString(b)
	// the agent's cgroup tree, removed as the other tests' are, once the
	// node (and its containers) are down
	cg := &agent{t: t, node: name}
	t.Cleanup(cg.removeCgroups)
	n := newKubeadmNode(t)

	cfg := filepath.Join(n.dir, "kubeadm.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: %[1]s
  bindPort: 6443
nodeRegistration:
  name: %[2]s
  criSocket: %[3]s
  imagePullPolicy: IfNotPresent
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %[4]s
imageRepository: %[5]s
etcd:
  local:
    imageTag: %[6]s
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# this machine has no systemd (kubeadm's default driver is systemd)
cgroupDriver: cgroupfs
cgroupRoot: %[7]s
`, n.env["KUBEADM_NODE_IP"], name, n.env["KUBEADM_CRI_SOCKET"], n.env["KUBEADM_KUBERNETES_VERSION"],
		n.env["KUBEADM_IMAGE_REPOSITORY"], n.env["KUBEADM_ETCD_TAG"], cg.cgroupRoot())), 0o644); err != nil {
		t.Fatal(err)
	}

	// kubeadm init; preflight errors are warnings (no systemd, cgroup v1,
	// no kubelet binary to ask its version).
	kinit := n.kubeadm("init", "init", "--config", cfg, "--ignore-preflight-errors=all",
		"--skip-phases=addon/kube-proxy,addon/coredns")

	// systemd's part: kubelet-start writes the flags and the config, then
	// asks systemd to start the kubelet.
	flagsEnv := n.path("/var/lib/kubelet/kubeadm-flags.env")
	kinit.waitForFiles(flagsEnv, n.path("/var/lib/kubelet/config.yaml"))
	embedded := kubeconfigCertificate(t, n.path("/etc/kubernetes/kubelet.conf"))
	if embedded == nil {
		t.Fatal("kubeadm's kubelet.conf has no embedded client certificate")
	}
	args := kubeadmExecStart(t, flagsEnv, "")
	agentOut := &syncBuffer{}
	agentCmd := n.startAgent(args, agentOut)
	t.Cleanup(func() {
		stopProcess(agentCmd)
		if t.Failed() {
			log := fmt.Sprintf("/tmp/nodeagent-e2e-agent-%s.log", name)
			os.WriteFile(log, []byte(agentOut.String()), 0o644)
			t.Logf("---- nodeagent (in full: %s) ----\n%s", log, tail(agentOut.String(), 80))
		}
	})

	kinit.succeed("Your Kubernetes control-plane has initialized successfully!")
	for _, phase := range []string{"[wait-control-plane]", "[mark-control-plane]", "[kubelet-finalize] Updating"} {
		if !strings.Contains(kinit.out.String(), phase) {
			t.Errorf("kubeadm init did not run %s", phase)
		}
	}
	if w := regexp.MustCompile(`config file fields nodeagent does not implement[^\n]*`).FindString(agentOut.String()); w != "" {
		t.Errorf("a field of kubeadm's config.yaml is not implemented: %s", w)
	}

	// kubelet-finalize: kubelet.conf names the certificate store, whose
	// certificate is the node's, renewed through a CSR.
	kc, err := clientcmd.LoadFromFile(n.path("/etc/kubernetes/kubelet.conf"))
	if err != nil {
		t.Fatal(err)
	}
	user := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	if user.ClientCertificate != kubeletClientPEM || user.ClientKey != kubeletClientPEM || len(user.ClientCertificateData) != 0 {
		t.Fatalf("kubelet.conf after kubelet-finalize: certificate %q, key %q, embedded %d bytes; want %s", user.ClientCertificate, user.ClientKey, len(user.ClientCertificateData), kubeletClientPEM)
	}
	// nodeagent asked for a new certificate at once (as the kubelet: the
	// copied one is a bootstrap certificate). The controller-manager's
	// approver may have judged that CSR before kubeadm's bootstrap-token
	// phase let nodes renew their certificates, and then leaves it
	// pending (the kubelet meets the same race): the admin approves one
	// left pending for 15 s.
	eventually(t, 60*time.Second, "the store's certificate renewed through a CSR", func() bool {
		var csrs certificatesv1.CertificateSigningRequestList
		if err := n.kubectl(&csrs, "get", "csr"); err != nil {
			return false
		}
		for _, csr := range csrs.Items {
			if csr.Spec.Username == "system:node:"+name && len(csr.Status.Conditions) == 0 && time.Since(csr.CreationTimestamp.Time) > 15*time.Second {
				t.Logf("CSR %s pending: approved by the admin", csr.Name)
				n.command(rigBinary(t, "kubectl"), "--kubeconfig", "/etc/kubernetes/admin.conf", "certificate", "approve", csr.Name).Run()
			}
		}
		cert := n.pemCertificate(kubeletClientPEM)
		return cert != nil && !cert.Equal(embedded) && cert.Subject.CommonName == "system:node:"+name
	})

	checkNode := func() {
		t.Helper()
		node := n.waitReady("the node", name)
		if _, ok := node.Labels["node-role.kubernetes.io/control-plane"]; !ok {
			t.Errorf("node labels %v: no control-plane label", node.Labels)
		}
		tainted := false
		for _, taint := range node.Spec.Taints {
			tainted = tainted || taint.Key == "node-role.kubernetes.io/control-plane" && taint.Effect == v1.TaintEffectNoSchedule
		}
		if !tainted {
			t.Errorf("node taints %v: no control-plane NoSchedule taint", node.Spec.Taints)
		}
		ip := n.env["KUBEADM_NODE_IP"]
		var addr string
		for _, a := range node.Status.Addresses {
			if a.Type == v1.NodeInternalIP {
				addr = a.Address
			}
		}
		if addr != ip {
			t.Errorf("node InternalIP %q, want %s (the default route's interface)", addr, ip)
		}
	}
	checkNode()

	components := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	mirrors := func() map[string]v1.Pod {
		var list v1.PodList
		if err := n.kubectl(&list, "get", "pods", "-n", "kube-system"); err != nil {
			t.Fatal(err)
		}
		m := map[string]v1.Pod{}
		for _, p := range list.Items {
			m[p.Name] = p
		}
		return m
	}
	var before map[string]v1.Pod
	eventually(t, 60*time.Second, "the control plane's mirror pods Running and Ready, with the node's IP", func() bool {
		before = mirrors()
		for _, c := range components {
			p, ok := before[c+"-"+name]
			if !ok || p.Status.Phase != v1.PodRunning || p.Status.PodIP != n.env["KUBEADM_NODE_IP"] ||
				len(p.Status.PodIPs) != 1 || p.Status.PodIPs[0].IP != n.env["KUBEADM_NODE_IP"] ||
				findPodCondition(&p, v1.PodReady) == nil || findPodCondition(&p, v1.PodReady).Status != v1.ConditionTrue {
				return false
			}
		}
		return true
	})
	for _, c := range components {
		p := before[c+"-"+name]
		for _, a := range []string{"kubernetes.io/config.hash", "kubernetes.io/config.mirror", "kubernetes.io/config.seen", "kubernetes.io/config.source"} {
			if p.Annotations[a] == "" {
				t.Errorf("mirror pod %s has no %s annotation: %v", p.Name, a, p.Annotations)
			}
		}
	}

	// kubelet-finalize restarts the kubelet (systemd's part again): on
	// the rewritten kubelet.conf, the Lease is renewed, the node stays
	// Ready, no control-plane container restarts.
	stopProcess(agentCmd)
	restarted := time.Now()
	agentOut = &syncBuffer{}
	agentCmd = n.startAgent(args, agentOut)
	eventually(t, 60*time.Second, "the Lease renewed by the restarted nodeagent", func() bool {
		var lease coordinationv1.Lease
		if err := n.kubectl(&lease, "get", "lease", "-n", "kube-node-lease", name); err != nil || lease.Spec.RenewTime == nil {
			return false
		}
		return lease.Spec.RenewTime.After(restarted)
	})
	checkNode()
	after := mirrors()
	for _, c := range components {
		b, a := before[c+"-"+name], after[c+"-"+name]
		if len(b.Status.ContainerStatuses) != 1 || len(a.Status.ContainerStatuses) != 1 ||
			a.Status.ContainerStatuses[0].ContainerID != b.Status.ContainerStatuses[0].ContainerID ||
			a.Status.ContainerStatuses[0].RestartCount != b.Status.ContainerStatuses[0].RestartCount {
			t.Errorf("%s: container %+v before the restart, %+v after", c, b.Status.ContainerStatuses, a.Status.ContainerStatuses)
		}
	}
	if strings.Contains(agentOut.String(), "Unauthorized") {
		t.Errorf("the restarted nodeagent was refused by the API server:\n%s", tail(agentOut.String(), 30))
	}

	kubeadmJoin(t, n)
}

// kubeadmJoin: a second node joins first's cluster with `kubeadm join`
// (the join command `kubeadm token create --print-join-command` gives),
// nodeagent as its kubelet started from the drop-in's command line, its
// own cgroup root given as KUBELET_EXTRA_ARGS (the cluster's
// KubeletConfiguration names the first node's): the TLS bootstrap with
// kubeadm's bootstrap token, the CSR approved by the controller-manager
// as kubeadm set it up, kubelet.conf written by nodeagent on the
// certificate store, the node Ready in the cluster.
func kubeadmJoin(t *testing.T, first *kubeadmNode) {
	b := make([]byte, 3)
	rand.Read(b)
	name := "kubeadm-" + hex.EncodeToString(b)
	cg := &agent{t: t, node: name}
	t.Cleanup(cg.removeCgroups)
	n := newKubeadmNode(t, "--join", first.dir)
	out, err := first.command(rigBinary(t, "kubeadm"), "token", "create", "--print-join-command",
		"--kubeconfig", "/etc/kubernetes/admin.conf").Output()
	if err != nil {
		t.Fatalf("kubeadm token create: %v", err)
	}
	join := strings.Fields(strings.TrimSpace(string(out)))
	if len(join) < 3 || join[0] != "kubeadm" || join[1] != "join" {
		t.Fatalf("join command %q", out)
	}
	joining := n.kubeadm("join", append(join[1:], "--node-name", name,
		"--cri-socket", n.env["KUBEADM_CRI_SOCKET"], "--ignore-preflight-errors=all")...)
	flagsEnv := n.path("/var/lib/kubelet/kubeadm-flags.env")
	joining.waitForFiles(flagsEnv, n.path("/var/lib/kubelet/config.yaml"), n.path("/etc/kubernetes/bootstrap-kubelet.conf"))
	agentOut := &syncBuffer{}
	agentCmd := n.startAgent(kubeadmExecStart(t, flagsEnv, "--cgroup-root="+cg.cgroupRoot()), agentOut)
	t.Cleanup(func() {
		stopProcess(agentCmd)
		if t.Failed() {
			t.Logf("---- nodeagent on the joined node ----\n%s", tail(agentOut.String(), 60))
		}
	})
	joining.succeed("This node has joined the cluster")
	kc, err := clientcmd.LoadFromFile(n.path("/etc/kubernetes/kubelet.conf"))
	if err != nil {
		t.Fatalf("the joined node's kubelet.conf (written by nodeagent after the TLS bootstrap): %v", err)
	}
	if user := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]; user == nil || user.ClientCertificate != kubeletClientPEM {
		t.Errorf("the joined node's kubelet.conf does not name %s: %+v", kubeletClientPEM, user)
	}
	if cert := n.pemCertificate(kubeletClientPEM); cert == nil || cert.Subject.CommonName != "system:node:"+name {
		t.Errorf("the joined node's certificate: %v", cert)
	}
	first.waitReady("the joined node", name)
}

// waitReady waits until the cluster's Node name is Ready, as the node's
// admin sees it, and returns it.
func (n *kubeadmNode) waitReady(what, name string) v1.Node {
	n.t.Helper()
	var node v1.Node
	eventually(n.t, 60*time.Second, what+" Ready", func() bool {
		return n.kubectl(&node, "get", "node", name) == nil && isReady(&node)
	})
	return node
}

// kubeadmProc is a kubeadm command running in a node.
type kubeadmProc struct {
	t    *testing.T
	what string
	out  *syncBuffer
	done chan error
}

// kubeadm starts `kubeadm args…` in the node; what names it in the
// test's log (its output is shown when the test fails).
func (n *kubeadmNode) kubeadm(what string, args ...string) *kubeadmProc {
	n.t.Helper()
	cmd := n.command(rigBinary(n.t, "kubeadm"), args...)
	p := &kubeadmProc{t: n.t, what: what, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	n.t.Cleanup(func() {
		cmd.Process.Kill()
		p.done <- <-p.done // ended (by now, if not before)
		if n.t.Failed() {
			n.t.Logf("---- kubeadm %s ----\n%s", what, tail(p.out.String(), 60))
		}
	})
	return p
}

// waitForFiles waits until the files exist — kubelet-start wrote them and
// asks systemd for the kubelet — failing when kubeadm ends first.
func (p *kubeadmProc) waitForFiles(paths ...string) {
	p.t.Helper()
	eventually(p.t, 2*time.Minute, "kubeadm "+p.what+"'s kubelet-start phase ("+strings.Join(paths, ", ")+")", func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			p.t.Fatalf("kubeadm %s ended before kubelet-start: %v", p.what, err)
		default:
		}
		for _, path := range paths {
			if _, err := os.Stat(path); err != nil {
				return false
			}
		}
		return true
	})
}

// succeed waits for kubeadm to end well, saying success.
func (p *kubeadmProc) succeed(success string) {
	p.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		if err != nil {
			p.t.Fatalf("kubeadm %s failed: %v", p.what, err)
		}
	case <-time.After(5 * time.Minute):
		p.t.Fatalf("kubeadm %s did not finish within 5 minutes", p.what)
	}
	if !strings.Contains(p.out.String(), success) {
		p.t.Fatalf("kubeadm %s ended without success:\n%s", p.what, tail(p.out.String(), 30))
	}
}

// startAgent starts nodeagent in the node with args, its output to out.
func (n *kubeadmNode) startAgent(args []string, out *syncBuffer) *exec.Cmd {
	n.t.Helper()
	cmd := n.command(binary, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	return cmd
}

// stopProcess ends cmd with SIGTERM, SIGKILL after 30 s.
func stopProcess(cmd *exec.Cmd) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// kubeconfigCertificate is the client certificate embedded in a
// kubeconfig, nil when it names a file.
func kubeconfigCertificate(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	user := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	if user == nil || len(user.ClientCertificateData) == 0 {
		return nil
	}
	return firstCertificate(user.ClientCertificateData)
}

// pemCertificate is the first certificate of the node's PEM file p (the
// store's link names its target by its path in the node).
func (n *kubeadmNode) pemCertificate(p string) *x509.Certificate {
	n.t.Helper()
	if target, err := os.Readlink(n.path(p)); err == nil {
		p = target
	}
	b, err := os.ReadFile(n.path(p))
	if err != nil {
		return nil
	}
	return firstCertificate(b)
}

func firstCertificate(b []byte) *x509.Certificate {
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			return nil
		}
		if block.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil
			}
			return c
		}
	}
}
