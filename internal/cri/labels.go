package cri

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// The kubelet's label and annotation keys (pkg/kubelet/types/labels.go and
// kuberuntime/labels.go), so crictl, log tooling and operators' habits work.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"

	AnnotationContainerHash           = "io.kubernetes.container.hash"
	AnnotationRestartCount            = "io.kubernetes.container.restartCount"
	AnnotationTerminationMsgPath      = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMsgPolicy    = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationPodTerminationGrace     = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationContainerPorts          = "io.kubernetes.container.ports"
	AnnotationContainerPreStop        = "io.kubernetes.container.preStopHandler"
	AnnotationKubernetesContainerType = "io.kubernetes.container.type"

	// LabelManaged marks what this agent created, so a runtime shared with
	// something else is safe from its housekeeping.
	LabelManaged = "io.nodeagent.managed"
	// LabelNode is the node name of the agent that made it: agents of
	// different node names sharing one runtime leave each other alone.
	LabelNode = "io.nodeagent.node"
	// AnnotationSpecHash records the pod content hash a sandbox was made
	// for; a different hash means the pod must be replaced.
	AnnotationSpecHash = "io.nodeagent.pod.spec-hash"
	// AnnotationInit marks init containers.
	AnnotationInit = "io.nodeagent.container.init"
	// AnnotationEphemeral marks ephemeral containers (kubectl debug),
	// which are never restarted; the kubelet tells them apart by the
	// pod's spec, which a restarted agent or housekeeping may not have.
	AnnotationEphemeral = "io.nodeagent.container.ephemeral"
)

func podLabels(p *v1.Pod) map[string]string {
	l := make(map[string]string, len(p.Labels)+4)
	for k, v := range p.Labels {
		l[k] = v
	}
	l[LabelPodName] = p.Name
	l[LabelPodNamespace] = p.Namespace
	l[LabelPodUID] = string(p.UID)
	l[LabelManaged] = "true"
	l[LabelNode] = p.Spec.NodeName
	return l
}

func podAnnotations(p *v1.Pod, specHash string) map[string]string {
	a := make(map[string]string, len(p.Annotations)+1)
	for k, v := range p.Annotations {
		a[k] = v
	}
	if specHash != "" {
		a[AnnotationSpecHash] = specHash
	}
	return a
}

func containerLabels(p *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       p.Name,
		LabelPodNamespace:  p.Namespace,
		LabelPodUID:        string(p.UID),
		LabelContainerName: c.Name,
		LabelManaged:       "true",
		LabelNode:          p.Spec.NodeName,
	}
}

func containerAnnotations(p *v1.Pod, s startSpec, restartCount int) map[string]string {
	c := s.c
	a := map[string]string{
		AnnotationContainerHash:        HashContainer(c),
		AnnotationRestartCount:         strconv.Itoa(restartCount),
		AnnotationTerminationMsgPath:   c.TerminationMessagePath,
		AnnotationTerminationMsgPolicy: string(c.TerminationMessagePolicy),
	}
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		a[AnnotationPodTerminationGrace] = strconv.FormatInt(*g, 10)
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(b)
		}
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationContainerPreStop] = string(b)
		}
	}
	if s.init {
		a[AnnotationInit] = "true"
	}
	if s.ephemeral != nil {
		a[AnnotationEphemeral] = "true"
	}
	return a
}

// HashContainer hashes the whole container spec: any change to it, unlike
// the kubelet's hash of a subset of fields, restarts the container. It
// covers one container only: adding an ephemeral container to the pod
// changes no other container's hash (nor the static pods' config hash,
// as static pods have no ephemeral containers).
func HashContainer(c *v1.Container) string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // a v1.Container always marshals
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:8])
}
