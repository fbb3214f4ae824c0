package downward

import (
	"fmt"
	"math"
	"net/netip"
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
	// IP is the node's IP: status.hostIP and status.hostIPs (nodeagent
	// knows one node IP, and its Node status reports that one), and the
	// pod IP of a hostNetwork pod.
	IP string
	// RootDir's filesystem size is the node's ephemeral storage when
	// Allocatable is not given.
	RootDir string
	// Allocatable is the node's allocatable resources, as its Node status
	// reports them (capacity less the reservations and the hard eviction
	// thresholds): what a container without a cpu, memory or
	// ephemeral-storage limit reads as its limit. When nil, the host's
	// figures stand in (hostResource); a resource missing from a non-nil
	// list reads as 0, as in the kubelet.
	Allocatable v1.ResourceList
}

// FieldValue is the value of a fieldRef's path for pod p, whose IP is
// podIP (PodFieldValue with that one IP).
func (n Node) FieldValue(p *v1.Pod, path, podIP string) (string, error) {
	var ips []string
	if podIP != "" {
		ips = []string{podIP}
	}
	return n.PodFieldValue(p, path, ips)
}

// PodFieldValue is the value of a fieldRef's path for pod p, whose IPs
// are podIPs (the sandbox's, primary first), as the kubelet's
// podFieldSelectorRuntimeValue gives it: the pod IPs are ordered the
// node's IP family first, at most one of each family; status.podIP is the
// first of them and status.podIPs all, comma-separated. A hostNetwork pod
// (whose sandbox reports no IP) has the node's IP, as its status says.
func (n Node) PodFieldValue(p *v1.Pod, path string, podIPs []string) (string, error) {
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
	case "status.podIP":
		if ips := n.podIPs(p, podIPs); len(ips) > 0 {
			return ips[0], nil
		}
		return "", nil
	case "status.podIPs":
		return strings.Join(n.podIPs(p, podIPs), ","), nil
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

// podIPs orders a pod's IPs as the kubelet's sortPodIPs: the first of the
// node IP's family (IPv4 when the node's IP is unknown), then the first
// of the other family. A hostNetwork pod without IPs has the node's.
func (n Node) podIPs(p *v1.Pod, ips []string) []string {
	if len(ips) == 0 && p.Spec.HostNetwork && n.IP != "" {
		return []string{n.IP}
	}
	nodeV4 := true
	if a, err := netip.ParseAddr(n.IP); err == nil {
		nodeV4 = a.Unmap().Is4()
	}
	out := make([]string, 0, 2)
	for _, primary := range []bool{true, false} {
		for _, ip := range ips {
			a, err := netip.ParseAddr(ip)
			if err == nil && (a.Unmap().Is4() == nodeV4) == primary {
				out = append(out, ip)
				break
			}
		}
	}
	return out
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
// ExtractContainerResourceValue). A cpu, memory or ephemeral-storage limit
// the container does not set reads as the pod's limit, else as the node's
// allocatable amount (the kubelet's defaultPodLimitsForDownwardAPI and
// MergeContainerResourceLimits).
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
	if n.Allocatable != nil {
		return n.Allocatable[rn], nil
	}
	return n.hostResource(rn)
}

// hostResource stands in for the node's allocatable amount of rn when
// Allocatable is not given: the host's CPUs and memory and the size of
// the filesystem of RootDir, nothing reserved.
func (n Node) hostResource(rn v1.ResourceName) (resource.Quantity, error) {
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
