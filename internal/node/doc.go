// Package node owns the node's identity in API mode — the Node object
// (registration, labels, taints), its status (capacity and allocatable,
// addresses, nodeInfo, images, conditions) and its Lease — and, in every
// mode, the node's capacity and allocatable resources.
package node
