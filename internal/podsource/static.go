package podsource

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"go.uber.org/zap"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations the kubelet puts on static pods.
const (
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
	// ConfigSeenAnnotation is when the agent first saw the pod (RFC 3339,
	// nanoseconds), set as the pod enters the agent (Mux).
	ConfigSeenAnnotation = "kubernetes.io/config.seen"
)

// DefaultStatic turns a decoded manifest pod into the pod the agent runs,
// as the kubelet does for static pods:
//
//   - API defaults (restartPolicy, grace period, pull policy, DNS policy, …);
//   - UID: when the manifest has none, the MD5 of the defaulted pod and the
//     node name. The source's file name is deliberately not part of it, so a
//     rename is not a restart (the kubelet hashes the path too); any change
//     to the pod's content changes the UID, so the pod is replaced;
//   - name suffixed with "-<nodename>", namespace "default" when empty,
//     spec.nodeName set, the config.hash and config.source annotations, and
//     a NoExecute toleration for every taint.
//
// The returned hash is the content hash, recorded on the sandbox so that a
// manifest that pins its UID is still replaced when its spec changes.
func DefaultStatic(p *v1.Pod, nodeName, source string) (hash string) {
	applyAPIDefaults(p)
	body, err := json.Marshal(p)
	if err != nil {
		panic(err) // a decoded v1.Pod always marshals
	}
	h := md5.New()
	h.Write(body)
	h.Write([]byte("host:" + nodeName))
	if source != "file" {
		// Pods of different sources never share a UID; file pods keep the
		// UID they had before there were other sources.
		h.Write([]byte("source:" + source))
	}
	hash = hex.EncodeToString(h.Sum(nil))
	if p.UID == "" {
		p.UID = types.UID(hash)
	}
	p.Name = p.Name + "-" + strings.ToLower(nodeName)
	if p.Namespace == "" {
		p.Namespace = metav1.NamespaceDefault
	}
	p.Spec.NodeName = nodeName
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[ConfigHashAnnotation] = hash
	p.Annotations[ConfigSourceAnnotation] = source
	p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute})
	return hash
}

// StaticPods decodes a manifest (one or more documents) into defaulted,
// validated static pods of source; documents of other kinds are logged
// and skipped. One invalid pod fails the whole manifest.
func StaticPods(data []byte, nodeName, source string, log *zap.Logger) ([]*v1.Pod, error) {
	docs, err := Decode(data)
	if err != nil {
		return nil, err
	}
	var pods []*v1.Pod
	var others []string
	for _, doc := range docs {
		if doc.Pod == nil {
			log.Info("ignoring a document that is not a Pod", zap.Int("document", doc.Index), zap.String("kind", doc.Kind))
			others = append(others, fmt.Sprintf("document %d is a %s", doc.Index, orUnknown(doc.Kind)))
			continue
		}
		if doc.Warning != "" {
			log.Warn("manifest has fields this agent does not know; they are ignored",
				zap.Int("document", doc.Index), zap.String("detail", doc.Warning))
		}
		p := doc.Pod
		DefaultStatic(p, nodeName, source)
		if errs := Validate(p); len(errs) > 0 {
			return nil, fmt.Errorf("document %d (pod %q): %w", doc.Index, p.Name, errs.ToAggregate())
		}
		// The pod's log directory <namespace>_<name>_<uid> is one file
		// name: a name the API allows (253) can still make it too long, and
		// the pod could never start.
		if n := len(p.Namespace) + len(p.Name) + len(p.UID) + 2; n > maxFileName {
			return nil, fmt.Errorf("document %d (pod %q): metadata.name: too long: the pod's log directory <namespace>_<name>_<uid> would have %d bytes, more than the %d of a file name; shorten the name (the node name %q is appended to it)",
				doc.Index, p.Name, n, maxFileName, nodeName)
		}
		pods = append(pods, p)
	}
	if len(pods) == 0 && len(others) > 0 {
		return nil, fmt.Errorf("no Pod in the manifest: %s", strings.Join(others, ", "))
	}
	return pods, nil
}

// maxFileName is the longest file name (NAME_MAX).
const maxFileName = 255

func orUnknown(kind string) string {
	if kind == "" {
		return "document without a kind"
	}
	return kind
}
