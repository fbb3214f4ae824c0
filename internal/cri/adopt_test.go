package cri

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/internal/pod"
)

func staticPod(uid string, labels map[string]string, image string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd-n1", Namespace: "kube-system", UID: pod.UID(uid), Labels: labels,
		Annotations: map[string]string{configHashAnnotation: uid, "kubernetes.io/config.source": "file"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Image: image, Command: []string{"etcd"}}}}}
}

// runningStatic is the runtime's view of a running static pod of uid, made
// by the kubelet or by nodeagent (for the manifest adoptedFrom, or "").
func runningStatic(uid string, labels map[string]string, hash string, kubelet bool, adoptedFrom string) *pod.RuntimeStatus {
	return &pod.RuntimeStatus{UID: pod.UID(uid), Name: "etcd-n1", Namespace: "kube-system",
		Sandboxes: []*pod.Sandbox{{ID: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY, SpecHash: uid,
			Kubelet: kubelet, AdoptedFrom: adoptedFrom, PodLabels: labels}},
		Containers: []*pod.Container{{ID: "c", SandboxID: "sb", Name: "etcd", State: pod.ContainerRunning, Hash: hash}}}
}

func TestAdopterTakesTheKubeletsStaticPods(t *testing.T) {
	image := "registry.k8s.io/etcd:3.6.4-0"
	manifest := staticPod("nodeagents", map[string]string{"tier": "control-plane"}, image)
	kubelets := KubeletHash(&manifest.Spec.Containers[0])
	tier := map[string]string{"tier": "control-plane"}
	agents := HashContainer(&manifest.Spec.Containers[0])
	for _, tt := range []struct {
		name  string
		st    *pod.RuntimeStatus
		adopt bool
	}{
		{"the kubelet's, same containers and labels", runningStatic("kubelets", tier, kubelets, true, ""), true},
		{"the kubelet's, another image", runningStatic("kubelets", tier, "1234abcd", true, ""), false},
		{"the kubelet's, other labels (another version)", runningStatic("kubelets", map[string]string{"tier": "x"}, kubelets, true, ""), false},
		{"nodeagent's own older version (an edit replaces it)", runningStatic("older", tier, agents, false, ""), false},
		{"nodeagent's, of this manifest adopted", runningStatic("kubelets", tier, agents, false, "nodeagents"), true},
		{"nodeagent's, of another manifest adopted", runningStatic("kubelets", tier, agents, false, "edited"), false},
	} {
		snap := map[pod.UID]*pod.RuntimeStatus{tt.st.UID: tt.st}
		listed := time.Unix(1, 0)
		a := NewAdopter(func() (map[pod.UID]*pod.RuntimeStatus, time.Time) { return snap, listed }, clock.RealClock{}, zaptest.NewLogger(t))
		got := a.Adopt(context.Background(), []*v1.Pod{manifest})[0]
		if adopted := got.UID == tt.st.UID; adopted != tt.adopt {
			t.Errorf("%s: adopted %v, want %v", tt.name, adopted, tt.adopt)
			continue
		}
		if !tt.adopt {
			if got != manifest {
				t.Errorf("%s: the pod was copied", tt.name)
			}
			continue
		}
		if got.Annotations[configHashAnnotation] != string(tt.st.UID) || got.Annotations[AnnotationAdopted] != "nodeagents" ||
			manifest.UID != "nodeagents" || manifest.Annotations[AnnotationAdopted] != "" {
			t.Errorf("%s: adopted as %+v (the source's pod must stay as it was)", tt.name, got.ObjectMeta)
		}
		// Kept for the agent's life, also when the runtime shows nothing
		// for a moment (a sandbox being recreated).
		snap = map[pod.UID]*pod.RuntimeStatus{}
		if again := a.Adopt(context.Background(), []*v1.Pod{manifest})[0]; again.UID != tt.st.UID {
			t.Errorf("%s: adoption not kept: %s", tt.name, again.UID)
		}
		// The manifest edited (same containers and labels, a new UID): not
		// adopted, the pod is replaced.
		edited := staticPod("edited", tier, image)
		snap = map[pod.UID]*pod.RuntimeStatus{tt.st.UID: tt.st}
		if got := a.Adopt(context.Background(), []*v1.Pod{edited})[0]; got.UID != "edited" {
			t.Errorf("%s: an edited manifest adopted as %s", tt.name, got.UID)
		}
	}
}

// Before the runtime was first listed, Adopt waits for it; ctx ending
// first, nothing is adopted.
func TestAdopterWaitsForTheFirstListing(t *testing.T) {
	manifest := staticPod("nodeagents", nil, "img")
	a := NewAdopter(func() (map[pod.UID]*pod.RuntimeStatus, time.Time) { return nil, time.Time{} }, clock.RealClock{}, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := a.Adopt(ctx, []*v1.Pod{manifest}); got[0] != manifest {
		t.Fatal("adopted without a listing")
	}
}
