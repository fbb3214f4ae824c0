// Package cni owns what the node's pod network is; the runtime
// (containerd's CRI) still calls the plugins for each sandbox.
//
//   - Configuration: ConfList generates the node's conflist from its pod
//     CIDR(s), single or dual stack (bridge with gateway, masquerade and
//     hairpin; host-local IPAM with one range per CIDR; portmap; bandwidth).
//     Ensure writes it atomically, only when the conf dir holds no config
//     or holds the one nodeagent wrote (recognised by its Marker key, not
//     its name: an operator's or the e2e rig's 10-nodeagent.conflist is
//     left alone), and only after Validate accepted it; a refused one
//     leaves the previous file in place.
//   - Validation (Check, Validate): the first file of the conf dir, as the
//     runtime picks it; libcni's ValidateNetworkList per plugin (present,
//     cniVersion supported), the loopback plugin the runtime needs, and
//     libcni's GetStatusNetworkList (CNI 1.1 STATUS) where the list's
//     version has it. Errors carry the plugin's own message.
//   - Monitor: re-checks the config when its file changes (a stat every few
//     seconds) and in full every GC period, logs what it finds, and keeps
//     it in Err. That is nodeagent's finding, not the runtime's word: as
//     the kubelet, the agent lets only the runtime's NetworkReady hold pods
//     back (a CNI config dir nodeagent checks may not be the one the
//     runtime reads, and a runtime that loaded a config is believed);
//     the agent adds Err to a not-ready runtime's message. Running pods are
//     never touched.
//   - RuntimeDirs: where the runtime says it keeps its CNI config and
//     plugins (containerd's verbose CRI Status info), so the agent checks
//     the runtime's own dir when it was not given one; "" when the runtime
//     does not say.
//   - GC: releases attachments and host-local IPs leaked by crashes. The
//     valid set is every sandbox the runtime knows, of any CRI client
//     (several agents may share one containerd) and in any state (the
//     runtime DELs a NOTREADY one itself when it is stopped, and a READY one
//     may list as NOTREADY while the runtime recovers from a restart), plus
//     anything younger than a grace period (a sandbox being created has its
//     IP before CRI lists it). libcni's GCNetworkList deletes every cached attachment
//     outside the valid set at once, with no grace, so GC does that pass
//     itself (DelNetworkList per stale attachment) and calls GCNetworkList
//     only for the plugins' GC verb; and since bridge does not pass GC on to
//     its IPAM and Debian's plugins predate GC, it reconciles the network's
//     own host-local store itself, under host-local's lock, never releasing
//     the IP or container ID of a known sandbox.
//
// It knows networks, files and sandbox IDs, not pods. It imports nothing
// internal but atomicfile, a leaf with no imports of its own (the write
// must be atomic: the runtime reads the dir at any time).
//
// Check, Validate, ConfList and Ensure are stateless and safe for
// concurrent use. A Monitor's Recheck and GC run on one goroutine (Run);
// Err may be called from any.
package cni
