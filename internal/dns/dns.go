package dns

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The resolver's limits the kubelet applies (pkg/apis/core/validation and
// pkg/kubelet/network/dns).
const (
	MaxNameservers   = 3
	MaxSearchDomains = 32
	MaxSearchChars   = 2048
)

// Config is the node's DNS setting.
type Config struct {
	// ClusterDNS are the cluster DNS servers (--cluster-dns).
	ClusterDNS []string
	// ClusterDomain is the cluster's domain (--cluster-domain).
	ClusterDomain string
	// ResolvConf is the host's resolver file (--resolv-conf); "" means
	// none: Default-policy pods get an empty configuration.
	ResolvConf string
}

// Warning is something the pod's owner should know (a Warning event).
type Warning struct {
	Reason  string
	Message string
}

// PodDNS is p's DNS configuration and the warnings forming it raised.
// An unreadable host file is an error.
func (c Config) PodDNS(p *v1.Pod) (*runtimeapi.DNSConfig, []Warning, error) {
	var warns []Warning
	cluster := false
	switch p.Spec.DNSPolicy {
	case v1.DNSClusterFirstWithHostNet:
		cluster = true
	case v1.DNSClusterFirst, "":
		cluster = !p.Spec.HostNetwork
	}
	if cluster && len(c.ClusterDNS) == 0 {
		warns = append(warns, Warning{"MissingClusterDNS", fmt.Sprintf(
			"pod: %q. nodeagent does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.",
			p.Namespace+"/"+p.Name, policyName(p), v1.DNSDefault)})
		cluster = false
	}
	out := &runtimeapi.DNSConfig{}
	if p.Spec.DNSPolicy != v1.DNSNone {
		host, err := c.hostConfig()
		if err != nil {
			return nil, nil, err
		}
		if cluster {
			out.Servers = append([]string(nil), c.ClusterDNS...)
			out.Searches = c.clusterSearches(p.Namespace, host.Searches)
			out.Options = []string{"ndots:5"}
		} else {
			out = host
		}
	}
	if dc := p.Spec.DNSConfig; dc != nil {
		out.Servers = appendUnique(out.Servers, dc.Nameservers...)
		out.Searches = appendUnique(out.Searches, dc.Searches...)
		out.Options = mergeOptions(out.Options, dc.Options)
	}
	if len(out.Servers) > MaxNameservers {
		out.Servers = out.Servers[:MaxNameservers]
		warns = append(warns, Warning{"DNSConfigForming", "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: " + strings.Join(out.Servers, " ")})
	}
	if s, cut := fitSearch(out.Searches); cut {
		out.Searches = s
		warns = append(warns, Warning{"DNSConfigForming", "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(s, " ")})
	}
	return out, warns, nil
}

func policyName(p *v1.Pod) v1.DNSPolicy {
	if p.Spec.DNSPolicy == "" {
		return v1.DNSClusterFirst
	}
	return p.Spec.DNSPolicy
}

// clusterSearches is <ns>.svc.<domain> svc.<domain> <domain>, then the
// host's searches.
func (c Config) clusterSearches(ns string, host []string) []string {
	if c.ClusterDomain == "" {
		return host
	}
	d := c.ClusterDomain
	return appendUnique([]string{ns + ".svc." + d, "svc." + d, d}, host...)
}

// hostConfig reads the host's resolver file.
func (c Config) hostConfig() (*runtimeapi.DNSConfig, error) {
	if c.ResolvConf == "" {
		return &runtimeapi.DNSConfig{}, nil
	}
	b, err := os.ReadFile(c.ResolvConf)
	if err != nil {
		return nil, fmt.Errorf("read the host's resolv.conf: %w", err)
	}
	return ParseResolvConf(b), nil
}

// ParseResolvConf reads nameserver, search (the last line wins, as the
// resolver) and options lines; search domains lose a trailing dot.
func ParseResolvConf(b []byte) *runtimeapi.DNSConfig {
	out := &runtimeapi.DNSConfig{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				out.Servers = append(out.Servers, f[1])
			}
		case "search":
			out.Searches = nil
			for _, s := range f[1:] {
				if s != "." {
					s = strings.TrimSuffix(s, ".")
				}
				out.Searches = appendUnique(out.Searches, s)
			}
		case "options":
			out.Options = mergeOptions(out.Options, toOptions(f[1:]))
		}
	}
	return out
}

func toOptions(fields []string) []v1.PodDNSConfigOption {
	opts := make([]v1.PodDNSConfigOption, 0, len(fields))
	for _, f := range fields {
		name, val, ok := strings.Cut(f, ":")
		o := v1.PodDNSConfigOption{Name: name}
		if ok {
			o.Value = &val
		}
		opts = append(opts, o)
	}
	return opts
}

// mergeOptions adds opts to have ("name" or "name:value"); an option of a
// name already there replaces it in place.
func mergeOptions(have []string, opts []v1.PodDNSConfigOption) []string {
	out := append([]string(nil), have...)
	for _, o := range opts {
		s := o.Name
		if o.Value != nil {
			s += ":" + *o.Value
		}
		replaced := false
		for i, h := range out {
			if n, _, _ := strings.Cut(h, ":"); n == o.Name {
				out[i], replaced = s, true
				break
			}
		}
		if !replaced {
			out = append(out, s)
		}
	}
	return out
}

func appendUnique(list []string, more ...string) []string {
	for _, m := range more {
		dup := false
		for _, l := range list {
			dup = dup || l == m
		}
		if !dup {
			list = append(list, m)
		}
	}
	return list
}

// fitSearch cuts the search list to the limits; cut reports whether it
// had to.
func fitSearch(s []string) ([]string, bool) {
	cut := false
	if len(s) > MaxSearchDomains {
		s, cut = s[:MaxSearchDomains], true
	}
	for len(s) > 0 && len(strings.Join(s, " ")) > MaxSearchChars {
		s, cut = s[:len(s)-1], true
	}
	return s, cut
}
