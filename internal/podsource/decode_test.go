package podsource

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// docSummary is the part of a Document a test compares.
type docSummary struct {
	Index   int
	PodName string
	Kind    string
	Warning bool
}

func summarizeDocs(docs []Document) []docSummary {
	var out []docSummary
	for _, d := range docs {
		s := docSummary{Index: d.Index, Kind: d.Kind, Warning: d.Warning != ""}
		if d.Pod != nil {
			s.PodName = d.Pod.Name
		}
		out = append(out, s)
	}
	return out
}

const (
	yamlPodA = `apiVersion: v1
kind: Pod
metadata:
  name: a
spec:
  containers:
  - name: app
    image: nginx:1.25
`
	yamlPodB = `apiVersion: v1
kind: Pod
metadata:
  name: b
spec:
  containers:
  - name: app
    image: busybox
`
	yamlConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
data:
  k: v
`
	yamlDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
`
	jsonPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"app","image":"nginx"}]}}`
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []docSummary
		wantErr string
		opts    []cmp.Option
	}{
		{
			name: "several yaml documents",
			in:   yamlPodA + "---\n" + yamlPodB,
			want: []docSummary{{Index: 0, PodName: "a"}, {Index: 1, PodName: "b"}},
		},
		{
			name: "json",
			in:   jsonPod,
			want: []docSummary{{Index: 0, PodName: "j"}},
		},
		{
			name: "json stream",
			in:   jsonPod + "\n" + strings.Replace(jsonPod, `"j"`, `"k"`, 1),
			want: []docSummary{{Index: 0, PodName: "j"}, {Index: 1, PodName: "k"}},
		},
		{
			name: "kind without apiVersion is a pod",
			in:   "kind: Pod\nmetadata:\n  name: x\n",
			want: []docSummary{{Index: 0, PodName: "x"}},
		},
		{
			name: "non-pod documents are returned without a pod",
			in:   yamlConfigMap + "---\n" + yamlPodA + "---\n" + yamlDeployment,
			want: []docSummary{
				{Index: 0, Kind: "v1 ConfigMap"},
				{Index: 1, PodName: "a"},
				{Index: 2, Kind: "apps/v1 Deployment"},
			},
		},
		{
			name: "a pod of another api version is not a pod",
			in:   "apiVersion: v2\nkind: Pod\nmetadata:\n  name: x\n",
			want: []docSummary{{Index: 0, Kind: "v2 Pod"}},
		},
		{
			name: "empty documents are skipped",
			in:   "---\n" + yamlPodA + "---\n---\n\n---\n" + yamlPodB + "---\n",
			want: []docSummary{{PodName: "a"}, {PodName: "b"}},
			// Index counts a whitespace-only document; it only labels log lines.
			opts: []cmp.Option{cmpopts.IgnoreFields(docSummary{}, "Index")},
		},
		{
			name: "empty file",
			in:   "\n",
		},
		{
			name: "unknown field gives a warning, not an error",
			in:   strings.Replace(yamlPodA, "    image: nginx:1.25\n", "    image: nginx:1.25\n    imagePolicy: Always\n", 1),
			want: []docSummary{{Index: 0, PodName: "a", Warning: true}},
		},
		{
			name:    "broken yaml fails the whole file",
			in:      yamlPodA + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: b\n",
			wantErr: "document 1",
		},
		{
			name:    "pod with a field of the wrong type fails the whole file",
			in:      yamlPodA + "---\napiVersion: v1\nkind: Pod\nspec: 5\n",
			wantErr: "document 1: decode pod",
		},
		{
			name:    "scalar document fails the file",
			in:      "hello\n---\n" + yamlPodA,
			wantErr: "document 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs, err := Decode([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode() error = %v, want one containing %q (docs %+v)", err, tt.wantErr, summarizeDocs(docs))
				}
				if docs != nil {
					t.Errorf("Decode() returned %d documents with an error; want none", len(docs))
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, summarizeDocs(docs), tt.opts...); diff != "" {
				t.Errorf("Decode() documents (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeWarningNamesTheField(t *testing.T) {
	in := strings.Replace(yamlPodA, "    image: nginx:1.25\n", "    image: nginx:1.25\n    imagePolicy: Always\n", 1)
	docs, err := Decode([]byte(in))
	if err != nil {
		t.Fatalf("Decode() error = %v", err)
	}
	if len(docs) != 1 || !strings.Contains(docs[0].Warning, "imagePolicy") {
		t.Fatalf("Decode() = %+v, want one document warning about imagePolicy", docs)
	}
	if got := docs[0].Pod.Spec.Containers[0].Image; got != "nginx:1.25" {
		t.Errorf("known fields must still be decoded: image = %q", got)
	}
}
