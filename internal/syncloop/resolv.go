package syncloop

import (
	"bufio"
	"os"
	"strings"

	"go.uber.org/zap"
)

// The kubelet's resolv.conf limits (pkg/kubelet/network/dns).
const (
	maxNameservers   = 3
	maxSearchDomains = 32
	maxSearchChars   = 2048
)

// checkResolvConf warns once when the host's resolv.conf exceeds what pods
// can be given; pods get the first entries only.
func checkResolvConf(path string, log *zap.Logger) {
	f, err := os.Open(path)
	if err != nil {
		log.Warn("cannot read resolv.conf; pods get the runtime's default DNS", zap.String("path", path), zap.Error(err))
		return
	}
	defer f.Close()
	var servers, search []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			servers = append(servers, fields[1])
		case "search":
			search = fields[1:]
		}
	}
	if len(servers) > maxNameservers {
		log.Warn("resolv.conf has more nameservers than pods can use; the first ones are applied",
			zap.String("path", path), zap.Int("nameservers", len(servers)), zap.Int("limit", maxNameservers))
	}
	if n := len(strings.Join(search, " ")); len(search) > maxSearchDomains || n > maxSearchChars {
		log.Warn("resolv.conf search line exceeds the limits; it is truncated for pods",
			zap.String("path", path), zap.Int("domains", len(search)), zap.Int("chars", n),
			zap.Int("domainLimit", maxSearchDomains), zap.Int("charLimit", maxSearchChars))
	}
}
