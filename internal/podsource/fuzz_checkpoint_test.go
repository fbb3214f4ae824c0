package podsource

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// FuzzAPICheckpoint feeds arbitrary bytes to readCheckpoint as the API
// source's checkpoint file. It must never panic; every pod it accepts is
// an API pod as Run hands it over (a name, a UID, the config.source
// annotation "api"), one per item of the file; reading is deterministic;
// and the accepted set, checkpointed again (writeCheckpoint of its
// PodList JSON), is read back with the same pods — after one such round,
// which may normalize (times to the second, quantities to their
// canonical form), the pods and their JSON no longer change. Seeds:
// testdata/fuzz/FuzzAPICheckpoint.
func FuzzAPICheckpoint(f *testing.F) {
	marked := func(uid, name string, mutate func(*v1.Pod)) *v1.Pod {
		p := MarkAPI(apiPod(uid, name, v1.PodRunning))
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	list := func(pods ...*v1.Pod) []byte {
		l := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}}
		for _, p := range pods {
			l.Items = append(l.Items, *p)
		}
		b, err := json.Marshal(l)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add(list(marked("u1", "a", nil)))
	f.Add(list(marked("u1", "a", nil), marked("u2", "b", func(p *v1.Pod) {
		p.Labels = map[string]string{"app": "b"}
		p.Status.Phase = v1.PodSucceeded
	})))
	f.Add(list())
	f.Add([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":null}`))
	f.Add([]byte(`{"items":[{"metadata":{"name":"x"}}]}`))
	f.Add([]byte(`{"items":[{"metadata":{"name":"x","uid":"u","annotations":{"kubernetes.io/config.source":"file"}}}]}`))
	f.Add([]byte(`{"items":[{"metadata":{"name":"x","uid":"u","annotations":{"kubernetes.io/config.source":"api"}},` +
		`"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"1500m","memory":"1.5Gi"}}}]},` +
		`"status":{"startTime":"2024-01-02T03:04:05.999Z"}}]}`))
	f.Add([]byte(`{"items":[{"metadata":{"name":"x","uid":"u","annotations":{"kubernetes.io/config.source":"api"}}}],"items":[]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "api-pods.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		pods, err := readCheckpoint(path)
		if err != nil {
			return
		}
		var l v1.PodList
		if err := json.Unmarshal(data, &l); err != nil || len(l.Items) != len(pods) {
			t.Fatalf("%d pods accepted from a PodList of %d items (%v)", len(pods), len(l.Items), err)
		}
		checkAPIPods(t, pods)
		again, err := readCheckpoint(path)
		if err != nil || len(again) != len(pods) {
			t.Fatalf("second read: %d pods, %v; first %d pods", len(again), err, len(pods))
		}
		for i := range pods {
			if !apiequality.Semantic.DeepEqual(pods[i], again[i]) {
				t.Fatalf("pod %d read twice differs", i)
			}
		}

		// Checkpointed again: the same pods, then a fixed point.
		body1, pods1 := rewriteCheckpoint(t, filepath.Join(dir, "again", "1.json"), pods)
		if len(pods1) != len(pods) {
			t.Fatalf("rewritten checkpoint: %d pods, want %d", len(pods1), len(pods))
		}
		for i, p := range pods {
			q := pods1[i]
			if p.UID != q.UID || p.Name != q.Name || p.Namespace != q.Namespace ||
				!apiequality.Semantic.DeepEqual(p.Annotations, q.Annotations) || !apiequality.Semantic.DeepEqual(p.Labels, q.Labels) ||
				len(p.Spec.Containers) != len(q.Spec.Containers) || len(p.Spec.InitContainers) != len(q.Spec.InitContainers) ||
				p.Status.Phase != q.Status.Phase {
				t.Fatalf("pod %d rewritten: %s/%s (%s), read back as %s/%s (%s)", i, p.Namespace, p.Name, p.UID, q.Namespace, q.Name, q.UID)
			}
		}
		body2, pods2 := rewriteCheckpoint(t, filepath.Join(dir, "again", "2.json"), pods1)
		if string(body1) != string(body2) {
			t.Fatalf("checkpoint not stable once rewritten:\n%s\n%s", body1, body2)
		}
		for i := range pods1 {
			if !apiequality.Semantic.DeepEqual(pods1[i], pods2[i]) {
				t.Fatalf("pod %d not stable once rewritten", i)
			}
		}
	})
}

// checkAPIPods checks what readCheckpoint promises of the pods it
// accepts: each is an API pod as Run hands them over.
func checkAPIPods(t *testing.T, pods []*v1.Pod) {
	t.Helper()
	uids := map[types.UID]bool{}
	for i, p := range pods {
		if p == nil || p.UID == "" || p.Name == "" || p.Namespace == "" {
			t.Fatalf("pod %d accepted without a name, namespace or UID: %+v", i, p)
		}
		if uids[p.UID] || p.Annotations[v1.MirrorPodAnnotationKey] != "" {
			t.Fatalf("pod %d (%s) accepted with a repeated UID or as a mirror pod", i, p.Name)
		}
		uids[p.UID] = true
		if !IsAPIPod(p) || p.Annotations[ConfigSourceAnnotation] != pod.SourceAPI {
			t.Fatalf("pod %d (%s) accepted without the API source annotation: %v", i, p.Name, p.Annotations)
		}
	}
}

// rewriteCheckpoint writes pods as the checkpoint's PodList JSON at path
// and reads them back, which must succeed.
func rewriteCheckpoint(t *testing.T, path string, pods []*v1.Pod) ([]byte, []*v1.Pod) {
	t.Helper()
	l := v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: make([]v1.Pod, len(pods))}
	for i, p := range pods {
		l.Items[i] = *p
	}
	body, err := json.Marshal(l)
	if err != nil {
		t.Fatalf("accepted pods do not encode: %v", err)
	}
	if err := writeCheckpoint(path, body); err != nil {
		t.Fatal(err)
	}
	back, err := readCheckpoint(path)
	if err != nil {
		t.Fatalf("accepted pods, checkpointed again, refused: %v\n%s", err, body)
	}
	checkAPIPods(t, back)
	return body, back
}
