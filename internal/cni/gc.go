package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

// IfName is the interface the runtime attaches pods with (containerd's
// CRI: eth0).
const IfName = "eth0"

// DefaultGrace is how old a cached attachment or an IP reservation must be
// before GC may release it: a sandbox being created has its attachment
// and its IP before the runtime lists it.
const DefaultGrace = time.Minute

// defaultHostLocalDataDir is host-local's data dir when the config names
// none.
const defaultHostLocalDataDir = "/var/lib/cni/networks"

// attachment is one cached attachment of libcni's result cache.
type attachment struct {
	*libcni.NetworkAttachment
	modTime time.Time
}

func (a attachment) key() types.GCAttachment {
	return types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName}
}

// reservation is one host-local IP reservation file.
type reservation struct {
	path        string
	ip          string
	containerID string
	ifName      string // "" in files of plugins that predate it
	modTime     time.Time
}

// young reports whether t is within grace of now.
func young(t, now time.Time, grace time.Duration) bool { return now.Sub(t) < grace }

// validAttachments is the set GC keeps: each known sandbox's IfName
// attachment, plus every cached attachment and reservation younger than
// grace (sandboxes being created right now). Sorted, without duplicates.
func validAttachments(known []string, cached []attachment, res []reservation, now time.Time, grace time.Duration) []types.GCAttachment {
	set := map[types.GCAttachment]bool{}
	for _, id := range known {
		set[types.GCAttachment{ContainerID: id, IfName: IfName}] = true
	}
	for _, a := range cached {
		if young(a.modTime, now, grace) {
			set[a.key()] = true
		}
	}
	for _, r := range res {
		if young(r.modTime, now, grace) {
			ifName := r.ifName
			if ifName == "" {
				ifName = IfName
			}
			set[types.GCAttachment{ContainerID: r.containerID, IfName: ifName}] = true
		}
	}
	out := make([]types.GCAttachment, 0, len(set))
	for a := range set {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ContainerID != out[j].ContainerID {
			return out[i].ContainerID < out[j].ContainerID
		}
		return out[i].IfName < out[j].IfName
	})
	return out
}

// staleAttachments are the cached attachments of network that GC deletes:
// no known sandbox has their container and they are older than grace.
func staleAttachments(network string, cached []attachment, known map[string]bool, now time.Time, grace time.Duration) []attachment {
	var out []attachment
	for _, a := range cached {
		if a.Network == network && !known[a.ContainerID] && !young(a.modTime, now, grace) {
			out = append(out, a)
		}
	}
	return out
}

// staleReservations are the host-local reservations GC releases: no known
// sandbox has their container ID, no known sandbox has their IP, and they
// are older than grace.
func staleReservations(res []reservation, known, liveIPs map[string]bool, now time.Time, grace time.Duration) []reservation {
	var out []reservation
	for _, r := range res {
		if r.containerID == "" || known[r.containerID] || liveIPs[r.ip] || young(r.modTime, now, grace) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// cachedAttachments reads libcni's result cache in cacheDir with each
// file's modification time.
func cachedAttachments(cacheDir string) ([]attachment, error) {
	c := libcni.NewCNIConfigWithCacheDir(nil, cacheDir, nil)
	atts, err := c.GetCachedAttachments("")
	if err != nil {
		return nil, fmt.Errorf("read CNI result cache %s: %w", cacheDir, err)
	}
	out := make([]attachment, 0, len(atts))
	for _, a := range atts {
		// libcni's cache file name: <network>-<containerID>-<ifName>
		fi, err := os.Stat(filepath.Join(cacheDir, "results", a.Network+"-"+a.ContainerID+"-"+a.IfName))
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, attachment{NetworkAttachment: a, modTime: fi.ModTime()})
	}
	return out, nil
}

// hostLocalDirs are the host-local stores of list: <dataDir>/<network>
// for each plugin whose IPAM is host-local.
func hostLocalDirs(list *libcni.NetworkConfigList) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range list.Plugins {
		var conf struct {
			IPAM struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		}
		if json.Unmarshal(p.Bytes, &conf) != nil || conf.IPAM.Type != "host-local" {
			continue
		}
		dir := conf.IPAM.DataDir
		if dir == "" {
			dir = defaultHostLocalDataDir
		}
		dir = filepath.Join(dir, list.Name)
		if !seen[dir] {
			seen[dir] = true
			out = append(out, dir)
		}
	}
	return out
}

// readReservations lists the IP reservations of one host-local store:
// files named by an IP, holding "<containerID>\r\n<ifName>" (or only the
// container ID, in older plugins). The lock and last_reserved_ip files
// are not reservations.
func readReservations(dir string) ([]reservation, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out []reservation
	for _, e := range entries {
		if !e.Type().IsRegular() || net.ParseIP(e.Name()) == nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		lines := strings.Fields(string(b))
		r := reservation{path: path, ip: e.Name(), modTime: fi.ModTime()}
		if len(lines) > 0 {
			r.containerID = lines[0]
		}
		if len(lines) > 1 {
			r.ifName = lines[1]
		}
		out = append(out, r)
	}
	return out, nil
}

// lockStore takes host-local's lock of a store (flock on <dir>/lock, as
// the plugin does), so no ADD allocates while GC reads and releases.
func lockStore(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck
		f.Close()
	}, nil
}

// errNoLiveIPs is returned by a live-IP lookup that failed: nothing is
// released then.
var errNoLiveIPs = errors.New("pod IPs of the known sandboxes unknown")
