// Package dns builds a pod's DNS configuration — the sandbox's
// /etc/resolv.conf, which the runtime writes — from its dnsPolicy and
// dnsConfig exactly as the kubelet's pkg/kubelet/network/dns does:
//
//	ClusterFirst             → the cluster DNS servers, search
//	                           <ns>.svc.<domain> svc.<domain> <domain> + the host's, ndots:5
//	                           (a host-network pod: Default)
//	ClusterFirstWithHostNet  → cluster DNS, host network or not
//	Default                  → the host's resolv.conf (--resolv-conf)
//	None                     → nothing but spec.dnsConfig
//
// spec.dnsConfig is merged in (servers and searches appended without
// duplicates, options by name), then the result is cut to the
// resolver's limits (3 servers, 32 search domains, 2048 characters) with
// a warning. With no cluster DNS configured a cluster policy falls back to
// Default with a MissingClusterDNS warning, as the kubelet does.
//
// It imports nothing internal; the host's file is read at each call (a
// few hundred bytes, like the kubelet).
package dns
