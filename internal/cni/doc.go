// Package cni checks the node's CNI configuration the runtime will use
// (the first conflist of the conf dir, as containerd picks it, and that
// every plugin it names is in the bin dir), and can write a default bridge
// conflist whose host-local IPAM hands out the node's pod CIDR.
//
// It knows networks and files, not pods; it imports nothing internal. The
// runtime (containerd's CRI) performs ADD/DEL itself; host-local IPAM
// never hands an address out twice because it records each lease in its
// data dir until DEL.
//
// Functions are stateless and safe for concurrent use.
package cni
