package podsource

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Document is one decoded document of a manifest file.
type Document struct {
	// Index is the document's position in the file, from 0.
	Index int
	// Pod is set when the document is a Pod.
	Pod *v1.Pod
	// Kind is the document's kind when it is not a Pod (ignored).
	Kind string
	// Warning notes fields the decoder did not know.
	Warning string
}

// Decode reads every YAML or JSON document of data. Documents of another
// kind are returned with Pod == nil so the caller can log them; a document
// that does not parse fails the whole file, because a half-read file would
// silently drop pods.
func Decode(data []byte) ([]Document, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var docs []Document
	for i := 0; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || string(raw) == "null" {
			continue // empty document between separators
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(raw, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if tm.Kind == "PodList" && (tm.APIVersion == "v1" || tm.APIVersion == "") {
			var list v1.PodList
			if err := json.Unmarshal(raw, &list); err != nil {
				return nil, fmt.Errorf("document %d: decode pod list: %w", i, err)
			}
			for j := range list.Items {
				docs = append(docs, Document{Index: i, Pod: &list.Items[j]})
			}
			continue
		}
		if tm.Kind != "Pod" || (tm.APIVersion != "v1" && tm.APIVersion != "") {
			docs = append(docs, Document{Index: i, Kind: fmt.Sprintf("%s %s", tm.APIVersion, tm.Kind)})
			continue
		}
		p := &v1.Pod{}
		if err := json.Unmarshal(raw, p); err != nil {
			return nil, fmt.Errorf("document %d: decode pod: %w", i, err)
		}
		doc := Document{Index: i, Pod: p}
		strict := json.NewDecoder(bytes.NewReader(raw))
		strict.DisallowUnknownFields()
		if err := strict.Decode(&v1.Pod{}); err != nil {
			doc.Warning = err.Error()
		}
		docs = append(docs, doc)
	}
}
