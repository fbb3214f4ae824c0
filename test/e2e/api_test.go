//go:build integration

package e2e

import (
	"context"
	"github.com/google/go-cmp/cmp"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

// The API-mode tests share one real control plane (etcd, kube-apiserver
// with Node,RBAC and NodeRestriction, kube-controller-manager), started
// by the first of them and stopped by TestMain. They do not run in
// parallel: one of them takes the API server away.
var (
	clusterOnce sync.Once
	theCluster  *cluster.Cluster
	clusterErr  error
	clusterDir  string
)

func apiCluster(t *testing.T) *cluster.Cluster {
	t.Helper()
	clusterOnce.Do(func() {
		clusterDir, clusterErr = os.MkdirTemp("", "nodeagent-e2e-cluster")
		if clusterErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		theCluster, clusterErr = cluster.Start(ctx, cluster.Options{Dir: clusterDir, Logf: t.Logf})
		t.Logf("control plane started in %v", time.Since(start).Round(time.Millisecond))
	})
	if clusterErr != nil {
		t.Fatalf("control plane: %v", clusterErr)
	}
	return theCluster
}

func stopCluster() {
	if theCluster != nil {
		theCluster.Stop()
	}
	if clusterDir != "" {
		os.RemoveAll(clusterDir)
	}
}

// newAPIAgent is an agent in API mode that bootstraps its client
// certificate through a CSR, which the test approves as an operator would.
func newAPIAgent(t *testing.T, c *cluster.Cluster, extra ...string) *agent {
	t.Helper()
	a := newAgent(t)
	kubeconfig := filepath.Join(a.root, "kubeconfig")
	a.extra = append([]string{"--kubeconfig", kubeconfig, "--bootstrap-kubeconfig", c.BootstrapKubeconfig,
		"--cert-dir", filepath.Join(a.root, "pki"), "--node-status-update-frequency", "2s",
		// An edited ConfigMap reaches its volume at the pod's next sync.
		"--sync-frequency", "10s"}, extra...)
	t.Cleanup(func() {
		// The agent is stopped first (newAgent's cleanup runs after this
		// one); the Node goes with the test.
		c.Admin.CoreV1().Nodes().Delete(context.Background(), a.node, metav1.DeleteOptions{})
	})
	return a
}

// approveUntilIssued approves the node's client CSR until its kubeconfig
// is written.
func approveUntilIssued(t *testing.T, c *cluster.Cluster, a *agent) {
	t.Helper()
	kubeconfig := filepath.Join(a.root, "kubeconfig")
	// Up to two minutes: the controller-manager signs the CSR, and after
	// TestAPIServerOutageAndAgentRestart took the API server away for a
	// minute its watches come back only after their backoff (seen: ~45 s).
	eventually(t, 120*time.Second, "client certificate issued through the CSR", func() bool {
		if _, err := os.Stat(kubeconfig); err == nil {
			return true
		}
		c.ApproveCSRs(context.Background(), certificatesv1.KubeAPIServerClientKubeletSignerName)
		return false
	})
}

// joined is an API-mode agent started, its certificate issued and its
// Node Ready.
func joined(t *testing.T, c *cluster.Cluster, extra ...string) *agent {
	t.Helper()
	a := newAPIAgent(t, c, extra...)
	a.start()
	approveUntilIssued(t, c, a)
	eventually(t, 30*time.Second, "Node Ready", func() bool { return nodeReady(c, a.node) })
	return a
}

// createPod creates p through the API; it is force-deleted at the end of
// the test.
func createPod(t *testing.T, c *cluster.Cluster, p *v1.Pod) *v1.Pod {
	t.Helper()
	p, err := c.Admin.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		c.Admin.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	return p
}

// createRunning is createPod, then waits until the API shows it Running.
func createRunning(t *testing.T, c *cluster.Cluster, p *v1.Pod) *v1.Pod {
	t.Helper()
	p = createPod(t, c, p)
	eventually(t, 60*time.Second, "pod Running in the API", func() bool {
		got := apiPod(c, t, p.Namespace, p.Name)
		return got != nil && got.Status.Phase == v1.PodRunning
	})
	return p
}

func nodeReady(c *cluster.Cluster, name string) bool {
	n, err := c.Admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	return err == nil && isReady(n)
}

// isReady reports whether n's Ready condition is True.
func isReady(n *v1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

func apiPod(c *cluster.Cluster, t *testing.T, ns, name string) *v1.Pod {
	t.Helper()
	p, err := c.Admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Logf("get pod %s/%s: %v", ns, name, err)
		return nil
	}
	return p
}

// apiSleeper is a pod on a's node that exits on SIGTERM within a second.
func apiSleeper(a *agent, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: a.podName(name), Namespace: "default"},
		Spec: v1.PodSpec{NodeName: a.node, Containers: []v1.Container{{
			Name: "main", Image: busybox,
			Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"},
		}}},
	}
}

func execIn(t *testing.T, id string, cmd ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := conn.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 15})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	return string(r.Stdout) + string(r.Stderr)
}

// TestAPINodeJoinsAndRunsAPIPods: TLS bootstrap, the Node Ready with its
// Lease renewing, a pod created through the API runs with an API status
// that matches the runtime, and kubectl delete stops it gracefully and
// the object disappears.
func TestAPINodeJoinsAndRunsAPIPods(t *testing.T) {
	c := apiCluster(t)
	a := newAPIAgent(t, c)
	a.start()
	start := time.Now()
	approveUntilIssued(t, c, a)
	eventually(t, 30*time.Second, "Node Ready", func() bool { return nodeReady(c, a.node) })
	t.Logf("node Ready %v after the start (CSR approval included)", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()
	n, err := c.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["kubernetes.io/hostname"] != a.node || n.Labels["kubernetes.io/os"] != "linux" ||
		!strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") || n.Status.Capacity.Cpu().IsZero() ||
		n.Status.Allocatable.Memory().Cmp(*n.Status.Capacity.Memory()) >= 0 {
		t.Fatalf("node = labels %v nodeInfo %+v capacity %v allocatable %v", n.Labels, n.Status.NodeInfo, n.Status.Capacity, n.Status.Allocatable)
	}
	// The Lease renews.
	var first *coordinationv1.Lease
	eventually(t, 20*time.Second, "node Lease", func() bool {
		first, err = c.Admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, a.node, metav1.GetOptions{})
		return err == nil && first.Spec.RenewTime != nil
	})
	eventually(t, 25*time.Second, "Lease renewed", func() bool {
		l, err := c.Admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, a.node, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first.Spec.RenewTime.Time)
	})

	p, err := c.Admin.CoreV1().Pods("default").Create(ctx, apiSleeper(a, "web"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "pod Running and Ready in the API", func() bool {
		got := apiPod(c, t, "default", p.Name)
		return got != nil && got.Status.Phase == v1.PodRunning && len(got.Status.ContainerStatuses) == 1 && got.Status.ContainerStatuses[0].Ready
	})
	got := apiPod(c, t, "default", p.Name)
	sbs := a.sandboxes("web")
	ctr := a.running("web", "main")
	if len(sbs) != 1 || ctr == nil {
		t.Fatalf("runtime: %d sandboxes, running container %v", len(sbs), ctr)
	}
	sbst, err := conn.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sbs[0].Id})
	if err != nil {
		t.Fatal(err)
	}
	cs := got.Status.ContainerStatuses[0]
	if got.Status.PodIP != sbst.Status.Network.Ip || cs.ContainerID != "containerd://"+ctr.Id || cs.RestartCount != 0 ||
		cs.State.Running == nil || got.Status.HostIP == "" || got.Status.QOSClass != v1.PodQOSBestEffort || got.Status.StartTime == nil ||
		cs.ImageID == "" || cs.Started == nil || !*cs.Started {
		t.Fatalf("API status %+v\nruntime: ip %s container %s", got.Status, sbst.Status.Network.Ip, ctr.Id)
	}
	if sbs[0].Metadata.Uid != string(p.UID) {
		t.Fatalf("sandbox uid %s, want the API's %s", sbs[0].Metadata.Uid, p.UID)
	}

	// The kubelet's events, in the API, about the pod.
	evs, err := c.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range evs.Items {
		reasons[e.Reason] = true
		if e.Source.Component != "kubelet" || e.Source.Host != a.node || e.InvolvedObject.UID != p.UID {
			t.Fatalf("event %+v", e)
		}
	}
	for _, want := range []string{"Pulled", "Created", "Started"} {
		if !reasons[want] {
			t.Fatalf("events %v lack %s", reasons, want)
		}
	}

	// A pod the node refuses is Failed in the API with the handler's
	// reason.
	refused := apiSleeper(a, "picky")
	refused.Spec.NodeSelector = map[string]string{"disk": "ssd"}
	createPod(t, c, refused)
	eventually(t, 30*time.Second, "refused pod Failed with reason NodeAffinity", func() bool {
		got := apiPod(c, t, "default", refused.Name)
		return got != nil && got.Status.Phase == v1.PodFailed && got.Status.Reason == "NodeAffinity"
	})

	// kubectl delete (grace 30 s): the container gets SIGTERM and leaves,
	// the agent deletes the object once it is gone — well before the
	// grace period would have ended in SIGKILL.
	// Every version of the pod is watched: the last one before the object
	// goes is terminal (Succeeded: the container left with 0 on SIGTERM).
	w, err := c.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + p.Name, ResourceVersion: got.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if out, err := c.Kubectl(ctx, "delete", "pod", p.Name, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete: %v %s", err, out)
	}
	var last *v1.Pod
	deadline := time.After(20 * time.Second) // well before the 30 s grace period ran out
	for deletedSeen := false; !deletedSeen; {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == "DELETED" {
				deletedSeen = true
			} else if v, ok := ev.Object.(*v1.Pod); ok {
				last = v
			}
		case <-deadline:
			t.Fatal("pod object not deleted within 20 s")
		}
	}
	if last == nil || last.Status.Phase != v1.PodSucceeded || last.Status.ContainerStatuses[0].State.Terminated == nil ||
		last.Status.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Fatalf("last status before the deletion: %+v", last)
	}
	if len(a.sandboxes("web")) != 0 {
		t.Fatal("the pod's sandbox outlived its API object")
	}

	// A deleted Node is registered again.
	if err := c.Admin.CoreV1().Nodes().Delete(ctx, a.node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Node registered again and Ready", func() bool {
		again, err := c.Admin.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
		return err == nil && again.UID != n.UID && nodeReady(c, a.node)
	})
}

// TestAPIPodReadsConfigMapsSecretsAndItsToken: a ConfigMap volume follows
// an edit within seconds (watched, not polled); a missing Secret is CreateContainerConfigError until it is
// created; the projected service-account token authenticates as the
// pod's service account; the service variables are there.
func TestAPIPodReadsConfigMapsSecretsAndItsToken(t *testing.T) {
	c := apiCluster(t)
	// A resync every 5 minutes: the ConfigMap edit below can only arrive
	// in time through its watch.
	a := joined(t, c, "--sync-frequency", "5m")
	ctx := context.Background()
	cmName, secretName := "cfg-"+a.node, "creds-"+a.node
	if _, err := c.Admin.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName},
		Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Admin.CoreV1().ConfigMaps("default").Delete(context.Background(), cmName, metav1.DeleteOptions{})
		c.Admin.CoreV1().Secrets("default").Delete(context.Background(), secretName, metav1.DeleteOptions{})
	})
	p := apiSleeper(a, "reader")
	p.Spec.Volumes = []v1.Volume{{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: cmName}}}},
		{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: secretName}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "cfg", MountPath: "/cfg"}, {Name: "creds", MountPath: "/creds"}}
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: secretName}, Key: "password"}}}}
	p = createPod(t, c, p)
	eventually(t, 60*time.Second, "CreateContainerConfigError in the API", func() bool {
		got := apiPod(c, t, "default", p.Name)
		if got == nil || len(got.Status.ContainerStatuses) != 1 || got.Status.ContainerStatuses[0].State.Waiting == nil {
			return false
		}
		w := got.Status.ContainerStatuses[0].State.Waiting
		return w.Reason == "CreateContainerConfigError" && strings.Contains(w.Message, secretName)
	})
	if _, err := c.Admin.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName},
		StringData: map[string]string{"password": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "pod Running once the Secret exists", func() bool {
		got := apiPod(c, t, "default", p.Name)
		return got != nil && got.Status.Phase == v1.PodRunning && a.running("reader", "main") != nil
	})
	ctr := a.running("reader", "main")
	if got := execIn(t, ctr.Id, "cat", "/cfg/greeting"); got != "hello" {
		t.Fatalf("/cfg/greeting = %q", got)
	}
	if got := execIn(t, ctr.Id, "cat", "/creds/password"); got != "s3cret" {
		t.Fatalf("/creds/password = %q", got)
	}
	// Secrets never touch the node's disk: the secret volume and the
	// projected token volume are tmpfs mounts on the host.
	uid := string(apiPod(c, t, "default", p.Name).UID)
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	vols := filepath.Join(a.root, "pods", uid, "volumes")
	for _, prefix := range []string{filepath.Join(vols, "kubernetes.io~secret", "creds"), filepath.Join(vols, "kubernetes.io~projected", "kube-api-access-")} {
		found := false
		for _, line := range strings.Split(string(mounts), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && strings.HasPrefix(f[4], prefix) {
				_, post, _ := strings.Cut(line, " - ")
				found = strings.HasPrefix(post, "tmpfs ")
				if !found {
					t.Errorf("%s is mounted as %q; want tmpfs", f[4], post)
				}
			}
		}
		if !found {
			t.Errorf("no tmpfs mount at %s*", prefix)
		}
	}
	env := execIn(t, ctr.Id, "env")
	for _, want := range []string{"PASSWORD=s3cret", "KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443"} {
		if !strings.Contains(env, want+"\n") {
			t.Fatalf("env lacks %s:\n%s", want, env)
		}
	}
	// An edit of the ConfigMap reaches the file in seconds: the object is
	// watched and its change syncs the pod.
	cm, err := c.Admin.CoreV1().ConfigMaps("default").Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["greeting"] = "bonjour"
	if _, err := c.Admin.CoreV1().ConfigMaps("default").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "ConfigMap edit in the mounted file", func() bool {
		return execIn(t, ctr.Id, "cat", "/cfg/greeting") == "bonjour"
	})
	// The projected token (the kube-api-access volume the API server
	// injected) authenticates as the pod's service account. busybox has
	// no TLS client, so the test presents the pod's token for it.
	token := execIn(t, ctr.Id, "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token")
	ca := execIn(t, ctr.Id, "cat", "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")
	ns := execIn(t, ctr.Id, "cat", "/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if ns != "default" || !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Fatalf("namespace %q, ca.crt %q", ns, ca)
	}
	podClient, err := kubernetes.NewForConfig(&rest.Config{Host: c.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca)}})
	if err != nil {
		t.Fatal(err)
	}
	who, err := podClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the pod's token was refused: %v", err)
	}
	if who.Status.UserInfo.Username != "system:serviceaccount:default:default" {
		t.Fatalf("the pod's token is %q", who.Status.UserInfo.Username)
	}
}

// TestAPIMirrorPods: a static pod's mirror pod appears, comes back after
// kubectl delete (the static pod keeps running), and follows an edit of
// the manifest.
func TestAPIMirrorPods(t *testing.T) {
	c := apiCluster(t)
	a := newAPIAgent(t, c)
	a.write("static.yaml", `apiVersion: v1
kind: Pod
metadata: {name: static, namespace: default, labels: {v: "1"}}
spec:
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`)
	a.start()
	approveUntilIssued(t, c, a)
	name := a.podName("static")
	mirror := func() *v1.Pod {
		p := apiPod(c, t, "default", name)
		if p == nil || p.Annotations["kubernetes.io/config.mirror"] == "" || p.DeletionTimestamp != nil {
			return nil
		}
		return p
	}
	eventually(t, 60*time.Second, "mirror pod Running", func() bool {
		m := mirror()
		return m != nil && m.Status.Phase == v1.PodRunning
	})
	m := mirror()
	if len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Kind != "Node" || m.OwnerReferences[0].Name != a.node {
		t.Fatalf("mirror owner %+v", m.OwnerReferences)
	}
	if n, err := c.Admin.CoreV1().Nodes().Get(context.Background(), a.node, metav1.GetOptions{}); err == nil {
		// A figure, not a bound (creation times have second resolution).
		t.Logf("mirror pod created %v after the Node", m.CreationTimestamp.Sub(n.CreationTimestamp.Time))
	}
	ctr := a.running("static", "main")
	if ctr == nil {
		t.Fatal("static pod not running")
	}
	if out, err := c.Kubectl(context.Background(), "delete", "pod", name, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete: %v %s", err, out)
	}
	eventually(t, 60*time.Second, "mirror pod re-created", func() bool {
		n := mirror()
		return n != nil && n.UID != m.UID
	})
	if now := a.running("static", "main"); now == nil || now.Id != ctr.Id {
		t.Fatal("deleting the mirror pod touched the static pod")
	}
	// An edit of the manifest: the mirror pod follows.
	a.write("static.yaml", `apiVersion: v1
kind: Pod
metadata: {name: static, namespace: default, labels: {v: "2"}}
spec:
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
`)
	eventually(t, 60*time.Second, "mirror pod of the edited static pod", func() bool {
		n := mirror()
		return n != nil && n.Labels["v"] == "2" && n.Status.Phase == v1.PodRunning
	})
	// The manifest removed: the mirror pod goes.
	a.remove("static.yaml")
	eventually(t, 60*time.Second, "mirror pod deleted with its static pod", func() bool { return apiPod(c, t, "default", name) == nil })
}

// TestAPIServerOutageAndAgentRestart: the API server away for 60 s
// restarts nothing and the node status resumes; a SIGKILLed agent
// restarted restarts no container and regresses no status.
func TestAPIServerOutageAndAgentRestart(t *testing.T) {
	c := apiCluster(t)
	a := joined(t, c)
	ctx := context.Background()
	p := createRunning(t, c, apiSleeper(a, "steady"))
	ctr := a.running("steady", "main")

	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	apiBack := false
	t.Cleanup(func() {
		if !apiBack { // the test failed during the outage: the next ones need it
			c.StartAPIServer(context.Background())
		}
	})
	down := time.Now()
	time.Sleep(60 * time.Second) // the outage itself: nothing to wait for
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	apiBack = true
	if now := a.running("steady", "main"); now == nil || now.Id != ctr.Id {
		t.Fatal("the container was restarted during the API outage")
	}
	back := time.Now()
	// The node's heartbeat resumes (its Lease), and it is Ready — the node
	// lifecycle controller may have marked it Unknown meanwhile; the agent
	// then posts its status again at once.
	eventually(t, 60*time.Second, "Lease renewed and node Ready after the outage", func() bool {
		l, err := c.Admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, a.node, metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(back) && nodeReady(c, a.node)
	})
	t.Logf("API server down %v; heartbeat and Ready back %v after its return", back.Sub(down).Round(time.Second), time.Since(back).Round(time.Millisecond))
	// SIGKILL and restart: nothing restarts, and no write to the API
	// shows the pod any worse than before — every version of it is
	// watched from before the kill until the restarted agent has synced
	// the pod, and for a few seconds more (an observation window: proving
	// that nothing happens needs one).
	before := apiPod(c, t, "default", p.Name)
	w, err := c.Admin.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + p.Name, ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	a.kill9()
	os.Remove(filepath.Join(a.root, "status", "default_"+p.Name+".json"))
	a.start()
	eventually(t, 60*time.Second, "the restarted agent synced the pod", func() bool {
		st := a.status("steady")
		return st != nil && st.Status.Phase == v1.PodRunning && len(st.Status.ContainerStatuses) == 1 && st.Status.ContainerStatuses[0].Ready
	})
	window := time.After(3 * time.Second)
	versions := 0
	last := before
watch:
	for {
		select {
		case ev := <-w.ResultChan():
			got, ok := ev.Object.(*v1.Pod)
			if !ok {
				continue
			}
			versions++
			t.Logf("pod version %d after the restart (-before +after):\n%s", versions, cmp.Diff(last.Status, got.Status))
			last = got
			// Not one field worse: phase, readiness, restarts, the pod IP,
			// the container's start time and the sandbox's condition.
			cs := got.Status.ContainerStatuses
			if got.Status.Phase != v1.PodRunning || len(cs) != 1 || !cs[0].Ready || cs[0].RestartCount != 0 ||
				got.Status.PodIP == "" || cs[0].State.Running == nil || cs[0].State.Running.StartedAt.IsZero() ||
				findPodCondition(got, v1.PodReadyToStartContainers) == nil || findPodCondition(got, v1.PodReadyToStartContainers).Status != v1.ConditionTrue {
				t.Fatalf("the API saw the pod regress after the agent restart: %+v", got.Status)
			}
		case <-window:
			break watch
		}
	}
	t.Logf("%d pod versions written around the restart", versions)
	after := apiPod(c, t, "default", p.Name)
	if now := a.running("steady", "main"); now == nil || now.Id != ctr.Id {
		t.Fatal("the container was restarted by the agent restart")
	}
	bs, as := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]
	if after.Status.Phase != v1.PodRunning || as.ContainerID != bs.ContainerID || as.RestartCount != 0 || !as.Ready ||
		!after.Status.StartTime.Equal(before.Status.StartTime) {
		t.Fatalf("status regressed:\nbefore %+v\nafter  %+v", before.Status, after.Status)
	}
}

// TestAPICheckpointRunsPodsWhileTheAPIServerIsAway: the agent restarted
// while the API server is down runs the pods it last had from it — a
// container that died meanwhile is started again — instead of waiting.
func TestAPICheckpointRunsPodsWhileTheAPIServerIsAway(t *testing.T) {
	c := apiCluster(t)
	a := joined(t, c)
	ctx := context.Background()
	p := createRunning(t, c, apiSleeper(a, "kept"))
	ctr := a.running("kept", "main")
	for _, f := range []string{"api-pods.json", "services.json"} {
		eventually(t, 10*time.Second, "checkpoint "+f, func() bool {
			_, err := os.Stat(filepath.Join(a.root, "checkpoints", f))
			return err == nil
		})
	}
	a.kill9()
	if err := c.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	apiBack := false
	t.Cleanup(func() {
		if !apiBack {
			c.StartAPIServer(context.Background())
		}
	})
	// The container dies while nobody watches.
	if _, err := conn.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: ctr.Id, Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	a.start()
	eventually(t, 60*time.Second, "the checkpointed pod's container started again with the API server down", func() bool {
		now := a.running("kept", "main")
		return now != nil && now.Id != ctr.Id
	})
	if !strings.Contains(a.out.String(), "running the pods it last bound to this node") {
		t.Fatal("the agent did not say it runs the checkpoint")
	}
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	apiBack = true
	eventually(t, 60*time.Second, "the restart reported to the API once it is back", func() bool {
		got := apiPod(c, t, "default", p.Name)
		return got != nil && len(got.Status.ContainerStatuses) == 1 && got.Status.ContainerStatuses[0].RestartCount == 1 &&
			got.Status.ContainerStatuses[0].State.Running != nil
	})
}
