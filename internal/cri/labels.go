package cri

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/checksum"
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
	// AnnotationAgentHash is nodeagent's hash of the container spec
	// (HashContainer); io.kubernetes.container.hash holds the kubelet's
	// (KubeletHash), so that a kubelet started on the node keeps the
	// container. Containers of earlier agents have only the latter, with
	// nodeagent's hash in it.
	AnnotationAgentHash = "io.nodeagent.container.hash"
	// AnnotationAdopted marks a static pod that runs under the UID the
	// kubelet gave it (cri.Adopter), with the UID nodeagent gives its
	// manifest: its sandboxes are adopted again after an agent restart
	// while the manifest is unchanged. It is the pod's own annotation (its
	// mirror pod shows it too).
	AnnotationAdopted = "nodeagent.io/adopted-from"
	// AnnotationInit marks init containers.
	AnnotationInit = "io.nodeagent.container.init"
	// AnnotationEphemeral marks ephemeral containers (kubectl debug),
	// which are never restarted; the kubelet tells them apart by the
	// pod's spec, which a restarted agent or housekeeping may not have.
	AnnotationEphemeral = "io.nodeagent.container.ephemeral"
	// AnnotationContainerResources records the cpu and memory requests
	// and limits a container was created with (JSON of a
	// v1.ResourceRequirements): what it runs with until an in-place
	// resize, which the allocation manager records instead.
	AnnotationContainerResources = "io.nodeagent.container.resources"
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
		AnnotationContainerHash:        KubeletHash(c),
		AnnotationAgentHash:            HashContainer(c),
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
	} else if b, err := json.Marshal(cpuMemory(c.Resources)); err == nil {
		// Ephemeral containers have none, and are never resized.
		a[AnnotationContainerResources] = string(b)
	}
	return a
}

// parseResources reads AnnotationContainerResources; nil when absent or
// unreadable (a container of an older agent).
func parseResources(v string) *v1.ResourceRequirements {
	if v == "" {
		return nil
	}
	r := &v1.ResourceRequirements{}
	if err := json.Unmarshal([]byte(v), r); err != nil {
		return nil
	}
	return r
}

// cpuMemory is the cpu and memory part of r, the resources an in-place
// resize changes; nil lists when it has none.
func cpuMemory(r v1.ResourceRequirements) v1.ResourceRequirements {
	pick := func(l v1.ResourceList) v1.ResourceList {
		var out v1.ResourceList
		for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			if q, ok := l[n]; ok {
				if out == nil {
					out = v1.ResourceList{}
				}
				out[n] = q.DeepCopy()
			}
		}
		return out
	}
	return v1.ResourceRequirements{Requests: pick(r.Requests), Limits: pick(r.Limits)}
}

// hashVersion prefixes the hashes HashContainer makes. A recorded hash
// without it was made by an agent that hashed the whole spec
// (legacyHash).
const hashVersion = "v2:"

// HashContainer hashes the container spec but its resources and resize
// policy: a change of any other field restarts the container (the
// kubelet hashes fewer fields; a static pod's others may change too),
// while a resize (the pod's resize subresource) is
// applied in place or by the container's resize policy (see
// computeActions). It covers one container only: adding an ephemeral
// container to the pod changes no other container's hash (nor the static
// pods' config hash, as static pods have no ephemeral containers).
func HashContainer(c *v1.Container) string {
	cp := *c
	cp.Resources, cp.ResizePolicy = v1.ResourceRequirements{}, nil
	return hashVersion + md5Hex(&cp)
}

// legacyHash is the hash agents before in-place resize recorded: of the
// whole spec, resources included. A container they made is kept when it
// matches the spec (see withActuated), so an agent upgrade restarts
// nothing.
func legacyHash(c *v1.Container) string { return md5Hex(c) }

// isLegacyHash reports a hash recorded by an agent before in-place
// resize (16 hex digits).
func isLegacyHash(h string) bool { return len(h) == 16 && !strings.HasPrefix(h, hashVersion) }

// KubeletHash is the kubelet's container hash (kubecontainer.HashContainer,
// as it records it: hexadecimal): FNV-32a over the dump of the JSON of
// the container's name and image, the only fields it hashes.
func KubeletHash(c *v1.Container) string {
	b, err := json.Marshal(map[string]string{"name": c.Name, "image": c.Image})
	if err != nil {
		panic(err) // strings always marshal
	}
	return strconv.FormatUint(uint64(checksum.New(b)), 16)
}

// isKubeletHash reports a hash the kubelet recorded (at most 8 hex
// digits).
func isKubeletHash(h string) bool {
	if h == "" || len(h) > 8 {
		return false
	}
	_, err := strconv.ParseUint(h, 16, 32)
	return err == nil
}

// containerHash is the hash a container was made for: nodeagent's own
// annotation, else the kubelet's (a kubelet's container, or one of an
// earlier agent, which kept its own hash there).
func containerHash(annotations map[string]string) string {
	if h := annotations[AnnotationAgentHash]; h != "" {
		return h
	}
	return annotations[AnnotationContainerHash]
}

func md5Hex(c *v1.Container) string {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // a v1.Container always marshals
	}
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:8])
}
