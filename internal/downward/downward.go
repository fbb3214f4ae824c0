package downward

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Node is what the downward API reads of the node.
type Node struct {
	// IP is status.hostIP (and hostIPs).
	IP string
	// RootDir's filesystem size is the node's allocatable ephemeral
	// storage.
	RootDir string
}

// FieldValue is the value of a fieldRef's path for pod p, whose IP is
// podIP.
func (n Node) FieldValue(p *v1.Pod, path, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return p.Name, nil
	case "metadata.namespace":
		return p.Namespace, nil
	case "metadata.uid":
		return string(p.UID), nil
	case "spec.nodeName":
		return p.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return p.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return n.IP, nil
	case "metadata.labels":
		return formatMap(p.Labels), nil
	case "metadata.annotations":
		return formatMap(p.Annotations), nil
	}
	if strings.HasPrefix(path, "metadata.labels['") && strings.HasSuffix(path, "']") {
		return p.Labels[path[len("metadata.labels['"):len(path)-2]], nil
	}
	if strings.HasPrefix(path, "metadata.annotations['") && strings.HasSuffix(path, "']") {
		return p.Annotations[path[len("metadata.annotations['"):len(path)-2]], nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// formatMap renders labels or annotations as the kubelet's downward API
// does (fieldpath.FormatMap): sorted `key="value"` lines, values quoted
// Go-style, no trailing newline.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

// ResourceValue is a container's request or limit in units of the
// selector's divisor, rounded up (the kubelet's
// ExtractContainerResourceValue). A cpu, memory or
// ephemeral-storage limit the container does not set reads as the pod's
// limit, else as the node's allocatable amount, as the kubelet reports it;
// nodeagent takes the node's figures from the host (see nodeAllocatable).
func (n Node) ResourceValue(p *v1.Pod, c *v1.Container, fs *v1.ResourceFieldSelector) (string, error) {
	divisor := fs.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, _ := strings.Cut(fs.Resource, ".")
	rn := v1.ResourceName(name)
	switch rn {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
	default:
		if !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
			return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
		}
	}
	var q resource.Quantity
	switch kind {
	case "requests":
		q = c.Resources.Requests[rn]
	case "limits":
		q = c.Resources.Limits[rn]
		if q.IsZero() && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
			var err error
			if q, err = n.defaultLimit(p, rn); err != nil {
				return "", fmt.Errorf("%s of container %s (no limit set): %w", fs.Resource, c.Name, err)
			}
		}
	default:
		return "", fmt.Errorf("unsupported container resource : %v", fs.Resource)
	}
	if rn == v1.ResourceCPU {
		if divisor.MilliValue() <= 0 {
			return "", fmt.Errorf("invalid divisor %s for %s", divisor.String(), fs.Resource)
		}
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	if divisor.Value() <= 0 {
		return "", fmt.Errorf("invalid divisor %s for %s", divisor.String(), fs.Resource)
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// defaultLimit is what a container without a limit of rn reads: the pod's
// limit (pod-level resources) or the node's allocatable amount.
func (n Node) defaultLimit(p *v1.Pod, rn v1.ResourceName) (resource.Quantity, error) {
	if p.Spec.Resources != nil {
		if q, ok := p.Spec.Resources.Limits[rn]; ok && !q.IsZero() {
			return q, nil
		}
	}
	return n.nodeAllocatable(rn)
}

// nodeAllocatable is the node's amount of rn as nodeagent knows it: the
// host's CPUs and memory (the figures admission uses) and the size of the
// filesystem of RootDir for ephemeral storage. No reservation is
// subtracted: nodeagent reserves nothing yet.
func (n Node) nodeAllocatable(rn v1.ResourceName) (resource.Quantity, error) {
	switch rn {
	case v1.ResourceCPU:
		return *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI), nil
	case v1.ResourceMemory:
		var info syscall.Sysinfo_t
		if err := syscall.Sysinfo(&info); err != nil {
			return resource.Quantity{}, fmt.Errorf("read the node's memory: %w", err)
		}
		return *resource.NewQuantity(int64(info.Totalram)*int64(info.Unit), resource.BinarySI), nil
	case v1.ResourceEphemeralStorage:
		var st syscall.Statfs_t
		if err := syscall.Statfs(n.RootDir, &st); err != nil {
			return resource.Quantity{}, fmt.Errorf("read the size of %s: %w", n.RootDir, err)
		}
		return *resource.NewQuantity(int64(st.Blocks)*int64(st.Bsize), resource.BinarySI), nil
	}
	return resource.Quantity{}, fmt.Errorf("the node's allocatable %s is unknown to nodeagent", rn)
}

// Container finds a container or init container of p by name (a
// resourceFieldRef's containerName); nil when there is none.
func Container(p *v1.Pod, name string) *v1.Container {
	for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}
