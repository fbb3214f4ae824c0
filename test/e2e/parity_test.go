//go:build integration

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/test/e2e/cluster"
)

// waitPhase waits until the API shows the pod in phase and returns it.
func waitPhase(t *testing.T, c *cluster.Cluster, name string, phase v1.PodPhase, within time.Duration) *v1.Pod {
	t.Helper()
	var got *v1.Pod
	eventually(t, within, "pod "+name+" "+string(phase)+" in the API", func() bool {
		got = apiPod(c, t, "default", name)
		return got != nil && got.Status.Phase == phase
	})
	return got
}

// findPodCondition is p's condition of type t, or nil.
func findPodCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestAPIKubeletParity: what a kubelet user sees of pods that end —
// their logs readable until they are deleted, then every trace gone —
// and of the pod features the kubelet honours: activeDeadlineSeconds,
// readiness gates, a non-root container's termination message,
// hostNetwork pods' IPs, a RuntimeClass whose handler the runtime lacks.
func TestAPIKubeletParity(t *testing.T) {
	c := apiCluster(t)
	port := freePort(t)
	a := joined(t, c, "--port", strconv.Itoa(port), "--client-ca-file", c.CAFile)
	ctx := context.Background()
	kubectl := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return c.Kubectl(cctx, args...)
	}

	t.Run("finished pod keeps its logs until deleted", func(t *testing.T) {
		p := createPod(t, c, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: a.podName("done"), Namespace: "default"},
			Spec: v1.PodSpec{NodeName: a.node, RestartPolicy: v1.RestartPolicyNever,
				InitContainers: []v1.Container{{Name: "init", Image: busybox, Command: []string{"true"}}},
				Containers:     []v1.Container{{Name: "main", Image: busybox, Command: []string{"sh", "-c", "echo hi-from-done"}}}},
		})
		got := waitPhase(t, c, p.Name, v1.PodSucceeded, 60*time.Second)
		if out, err := kubectl("logs", p.Name); err != nil || out != "hi-from-done\n" {
			t.Fatalf("kubectl logs of the finished pod: %v: %q", err, out)
		}
		// The init container completed: ready, as the kubelet reports it;
		// Initialized True with the kubelet's reason for a Succeeded pod.
		if ics := got.Status.InitContainerStatuses; len(ics) != 1 || !ics[0].Ready {
			t.Fatalf("init container statuses %+v, want the completed one ready", ics)
		}
		if ic := findPodCondition(got, v1.PodInitialized); ic == nil || ic.Status != v1.ConditionTrue || ic.Reason != "PodCompleted" {
			t.Fatalf("Initialized condition %+v, want True/PodCompleted", ic)
		}
		// The sandbox is stopped (its IP released), not removed; the API
		// keeps the IP the pod had.
		eventually(t, 30*time.Second, "sandbox stopped and the API's sandbox condition False", func() bool {
			sbs := a.sandboxes("done")
			got = apiPod(c, t, "default", p.Name)
			rc := findPodCondition(got, v1.PodReadyToStartContainers)
			return len(sbs) == 1 && sbs[0].State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY && rc != nil && rc.Status == v1.ConditionFalse
		})
		if got.Status.PodIP == "" || len(a.containers("done", "")) != 2 {
			t.Fatalf("finished pod: podIP %q, %d containers kept (want its IP and both containers)", got.Status.PodIP, len(a.containers("done", "")))
		}
		// Deleted: every trace goes.
		if out, err := kubectl("delete", "pod", p.Name, "--wait=true"); err != nil {
			t.Fatalf("kubectl delete: %v %s", err, out)
		}
		eventually(t, 30*time.Second, "sandbox, containers and logs of the deleted pod gone", func() bool {
			_, err := os.Stat(filepath.Join(a.logs, "default_"+p.Name+"_"+string(p.UID)))
			return len(a.sandboxes("done")) == 0 && len(a.containers("done", "")) == 0 && os.IsNotExist(err)
		})
	})

	t.Run("a Job's pod and its logs", func(t *testing.T) {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "job-" + a.node, Namespace: "default"},
			Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), Template: v1.PodTemplateSpec{Spec: v1.PodSpec{
				NodeName: a.node, RestartPolicy: v1.RestartPolicyNever,
				Containers: []v1.Container{{Name: "main", Image: busybox, Command: []string{"sh", "-c", "echo from-the-job"}}},
			}}},
		}
		if _, err := c.Admin.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bg := metav1.DeletePropagationBackground
		t.Cleanup(func() {
			c.Admin.BatchV1().Jobs("default").Delete(context.Background(), job.Name, metav1.DeleteOptions{PropagationPolicy: &bg})
		})
		eventually(t, 90*time.Second, "Job complete", func() bool {
			j, err := c.Admin.BatchV1().Jobs("default").Get(ctx, job.Name, metav1.GetOptions{})
			return err == nil && j.Status.Succeeded == 1
		})
		if out, err := kubectl("logs", "job/"+job.Name); err != nil || out != "from-the-job\n" {
			t.Fatalf("kubectl logs job/%s: %v: %q", job.Name, err, out)
		}
	})

	t.Run("previous logs of a restarted container", func(t *testing.T) {
		p := createPod(t, c, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: a.podName("again"), Namespace: "default"},
			Spec: v1.PodSpec{NodeName: a.node, Containers: []v1.Container{{Name: "main", Image: busybox,
				Command: []string{"sh", "-c", "echo attempt; sleep 1; exit 1"}}}},
		})
		eventually(t, 60*time.Second, "container restarted once", func() bool {
			got := apiPod(c, t, "default", p.Name)
			return got != nil && len(got.Status.ContainerStatuses) == 1 && got.Status.ContainerStatuses[0].RestartCount >= 1
		})
		if out, err := kubectl("logs", "--previous", p.Name); err != nil || out != "attempt\n" {
			t.Fatalf("kubectl logs --previous: %v: %q", err, out)
		}
	})

	t.Run("activeDeadlineSeconds", func(t *testing.T) {
		p := apiSleeper(a, "deadline")
		p.Spec.ActiveDeadlineSeconds = ptr.To(int64(5))
		p = createPod(t, c, p)
		got := waitPhase(t, c, p.Name, v1.PodFailed, 45*time.Second)
		if got.Status.Reason != "DeadlineExceeded" || got.Status.Message != "Pod was active on the node longer than the specified deadline" {
			t.Fatalf("ended with reason %q message %q, want DeadlineExceeded", got.Status.Reason, got.Status.Message)
		}
		if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
			t.Fatalf("container statuses %+v, want the container terminated", cs)
		}
		// Ended, not removed: its logs stay readable.
		if _, err := kubectl("logs", p.Name); err != nil {
			t.Fatalf("kubectl logs of the pod past its deadline: %v", err)
		}
	})

	t.Run("readiness gate", func(t *testing.T) {
		gate := v1.PodConditionType("example.com/ready")
		p := apiSleeper(a, "gated")
		p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
		p = createRunning(t, c, p)
		var got *v1.Pod
		eventually(t, 30*time.Second, "container ready, pod not Ready for want of the gate", func() bool {
			got = apiPod(c, t, "default", p.Name)
			r := findPodCondition(got, v1.PodReady)
			return len(got.Status.ContainerStatuses) == 1 && got.Status.ContainerStatuses[0].Ready &&
				r != nil && r.Status == v1.ConditionFalse && r.Reason == "ReadinessGatesNotReady"
		})
		got.Status.Conditions = append(got.Status.Conditions, v1.PodCondition{Type: gate, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()})
		if _, err := c.Admin.CoreV1().Pods("default").UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "pod Ready once its gate is True", func() bool {
			got = apiPod(c, t, "default", p.Name)
			r := findPodCondition(got, v1.PodReady)
			return r != nil && r.Status == v1.ConditionTrue && findPodCondition(got, gate) != nil
		})
	})

	t.Run("termination message of a non-root container", func(t *testing.T) {
		p := createPod(t, c, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: a.podName("nonroot"), Namespace: "default"},
			Spec: v1.PodSpec{NodeName: a.node, RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{
				Name: "main", Image: busybox, Command: []string{"sh", "-c", "printf bye-as-1000 > /dev/termination-log"},
				SecurityContext: &v1.SecurityContext{RunAsUser: ptr.To(int64(1000))},
			}}},
		})
		got := waitPhase(t, c, p.Name, v1.PodSucceeded, 60*time.Second)
		if cs := got.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.Message != "bye-as-1000" {
			t.Fatalf("container statuses %+v, want the termination message", cs)
		}
	})

	t.Run("hostNetwork pod IPs are the node's", func(t *testing.T) {
		p := apiSleeper(a, "hostnet")
		p.Spec.HostNetwork = true
		createRunning(t, c, p)
		got := apiPod(c, t, "default", p.Name)
		if got.Status.HostIP == "" || got.Status.PodIP != got.Status.HostIP || len(got.Status.PodIPs) == 0 || got.Status.PodIPs[0].IP != got.Status.HostIP {
			t.Fatalf("hostNetwork pod: hostIP %q podIP %q podIPs %v", got.Status.HostIP, got.Status.PodIP, got.Status.PodIPs)
		}
	})

	t.Run("RuntimeClass with a handler the runtime lacks", func(t *testing.T) {
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "absent-" + a.node}, Handler: "no-such-handler"}
		if _, err := c.Admin.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.Admin.NodeV1().RuntimeClasses().Delete(context.Background(), rc.Name, metav1.DeleteOptions{})
		})
		p := apiSleeper(a, "isolated")
		p.Spec.RuntimeClassName = &rc.Name
		p = createPod(t, c, p)
		eventually(t, 60*time.Second, "FailedCreatePodSandBox naming the handler", func() bool {
			evs, err := c.Admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(p.UID)})
			if err != nil {
				return false
			}
			for _, e := range evs.Items {
				if e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, "no-such-handler") {
					return true
				}
			}
			return false
		})
		if got := apiPod(c, t, "default", p.Name); got.Status.Phase != v1.PodPending || len(a.sandboxes("isolated")) != 0 {
			t.Fatalf("pod %s with %d sandboxes, want Pending with none (never on the default handler)", got.Status.Phase, len(a.sandboxes("isolated")))
		}
	})
}
