package podvolumes

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// etcHostsPath is where containers find their hosts file.
const etcHostsPath = "/etc/hosts"

// Hosts is what a pod's hosts file takes from outside its spec.
type Hosts struct {
	// Hostname is the pod's hostname, as its sandbox has it.
	Hostname string
	// ClusterDomain is the cluster's DNS domain: a pod with a
	// spec.subdomain finds <hostname>.<subdomain>.<namespace>.svc.<domain>.
	ClusterDomain string
	// NodeFile is the node's hosts file, which host-network pods get a
	// copy of.
	NodeFile string
}

// HostsMount writes the pod's hosts file, <pod>/etc-hosts, and returns
// its mount at /etc/hosts, as the kubelet's makeMounts does: nil when the
// container mounts a volume at /etc/hosts itself, or when a pod on the
// pod network has no IP yet (the runtime's own file then stays). A pod on
// the pod network gets its IP with its hostname (and FQDN when it has a
// subdomain); a host-network pod gets a copy of the node's hosts file.
// Both end with the pod's hostAliases.
//
// The file is rewritten before every container start, and only when its
// content changed, in place: running containers bind-mount it by inode
// and see the same file. Called before every container start, by the
// pod's worker.
func (m *Manager) HostsMount(p *v1.Pod, c *v1.Container, podIP string, h Hosts) (*runtimeapi.Mount, error) {
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == etcHostsPath {
			return nil, nil
		}
	}
	var content []byte
	if p.Spec.HostNetwork {
		node, err := os.ReadFile(h.NodeFile)
		if err != nil {
			return nil, fmt.Errorf("read the node's hosts file: %w", err)
		}
		content = nodeHostsContent(node, p.Spec.HostAliases)
	} else {
		if podIP == "" {
			return nil, nil
		}
		content = managedHostsContent([]string{podIP}, h.Hostname, podDomain(p, h.ClusterDomain), p.Spec.HostAliases)
	}
	dir := m.Dir(p.UID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create pod directory: %w", err)
	}
	file := filepath.Join(dir, "etc-hosts")
	if !hasContent(file, content) {
		if err := os.WriteFile(file, content, 0o644); err != nil {
			return nil, fmt.Errorf("write hosts file: %w", err)
		}
		// WriteFile keeps the mode of an existing file.
		if err := os.Chmod(file, 0o644); err != nil {
			return nil, fmt.Errorf("write hosts file: %w", err)
		}
	}
	return &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: file, SelinuxRelabel: true}, nil
}

// hasContent reports whether file holds exactly content, reading no more
// than that: the file is the container's to write (a container that
// filled its /etc/hosts with 512 MiB once made every read of it cost as
// much memory).
func hasContent(file string, content []byte) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() != int64(len(content)) {
		return false
	}
	buf := make([]byte, len(content))
	if _, err := io.ReadFull(f, buf); err != nil {
		return false
	}
	return bytes.Equal(buf, content)
}

// podDomain is the pod's DNS domain, <subdomain>.<namespace>.svc.<cluster
// domain>, or "" without a subdomain (the kubelet's
// GeneratePodHostNameAndDomain).
func podDomain(p *v1.Pod, clusterDomain string) string {
	if p.Spec.Subdomain == "" {
		return ""
	}
	return p.Spec.Subdomain + "." + p.Namespace + ".svc." + clusterDomain
}

// managedHostsContent is the hosts file of a pod on the pod network (the
// kubelet's managedHostsFileContent): localhost, the IPv6 names, each pod
// IP with the hostname (preceded by the FQDN when domain is set), then
// the host aliases.
func managedHostsContent(ips []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	for _, ip := range ips {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// nodeHostsContent is the hosts file of a host-network pod: the node's,
// then the host aliases (the kubelet's nodeHostsFileContent).
func nodeHostsContent(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file (host network).\n")
	b.Write(node)
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostAliasEntries is one line per alias IP with all its names.
func hostAliasEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}
