// Package devicemanager is the node side of the device plugin API
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), the kubelet's device
// manager:
//
//   - plugins register on <root-dir>/device-plugins/kubelet.sock (version
//     and resource name checked with the kubelet's errors); nodeagent
//     dials each plugin's socket in the same directory, reads its options
//     and follows its ListAndWatch. A plugin that goes leaves its devices
//     unhealthy; its resource leaves the node (reported 0) after the
//     kubelet's 5-minute grace period.
//   - the devices are extended resources: capacity counts them all,
//     allocatable the healthy ones (Capacity, for the Node's status).
//     Admission counts what admitted pods hold even before their plugin
//     has registered again after an agent restart (AdmissionAllocatable).
//   - Allocate, at admission, picks each container's devices (init
//     containers first; a regular init container's are reused after it,
//     a sidecar's are its own; GetPreferredAllocation when the plugin
//     offers it) and calls the plugin's Allocate; MutateConfig puts the
//     answer into the container's CRI config (env, mounts, device nodes,
//     annotations, CDI device names — containerd resolves CDI) after
//     PreStartContainer when the plugin asks for it.
//   - the allocations and the healthy devices are checkpointed in the
//     kubelet's file (package checkpoint), so an agent restart keeps
//     running containers' devices and the kubelet and nodeagent hand a
//     node over with them; RemoveStale frees finished pods' devices.
//
// Plugins may also register through plugins_registry (package
// pluginmanager hands them to RegisterPlugin). Not here: the topology
// manager's NUMA hints (devices are picked without alignment), DRA.
package devicemanager
