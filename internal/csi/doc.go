// Package csi is the node side of the Container Storage Interface, as
// the kubelet's CSI volume plugin and nodeinfomanager do it:
//
//   - drivers register through the plugin registration directory
//     (package pluginmanager hands them over); nodeagent calls
//     NodeGetInfo and NodeGetCapabilities, lists the driver in the
//     node's CSINode (node ID, topology keys, volume limit; the CSINode
//     made when missing, owned by the Node) and records its node ID and
//     topology on the Node (csi.volume.kubernetes.io/nodeid, labels).
//   - a CSI persistent volume is staged once per volume handle when the
//     driver has STAGE_UNSTAGE_VOLUME, at the kubelet's global mount
//     (plugins/kubernetes.io/csi/<driver>/<sha256 of the handle>/globalmount),
//     and published into each pod that uses it
//     (pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount), the kubelet's
//     vol_data.json beside; the CSIDriver object decides whether to wait
//     for the VolumeAttachment (attachRequired, true without one),
//     whether the pod's identity goes into the volume context
//     (podInfoOnMount) and which tokens (tokenRequests); secrets are read
//     as the volume names them. Inline ephemeral volumes are published
//     (never staged) for drivers whose CSIDriver allows them.
//   - Unpublish takes a pod's volumes back, unstaging each with its last
//     pod; a restarted agent finds what was published from the
//     vol_data.json files.
//
// A volume's stats are its driver's NodeGetVolumeStats when it has
// GET_VOLUME_STATS; the Node's volumesInUse lists attachable volumes
// while they are mounted; the pod's fsGroup is applied as the CSIDriver's
// fsGroupPolicy says. Every driver call is bounded by CallTimeout (the
// kubelet's 2 minutes). Not here: block volumes, expansion,
// republishing, VOLUME_MOUNT_GROUP.
package csi
