// Package podvolumes owns the pod directories and the volumes in them:
// <RootDir>/pods/<uid>, what each container mounts from it, and its
// removal once the pod is gone.
//
// Layout of a pod directory (every element a plain name, volume.ChildDir):
//
//	<RootDir>/pods/<uid>/
//	  volumes/kubernetes.io~empty-dir/<name>   emptyDir (package volume)
//	  volumes/kubernetes.io~configmap/<name>   rendered volumes, written with
//	  volumes/kubernetes.io~secret/<name>      volume.WriteAtomic
//	  volumes/kubernetes.io~downward-api/<name>
//	  volumes/kubernetes.io~projected/<name>
//	  volume-subpaths/<volume>/<container>/<i> subPath bind mounts
//	  etc-hosts                                the pod's /etc/hosts
//	  containers/<name>/<restart>              termination messages (package cri)
//
// It owns: the CRI mounts of a container's volumes (Mounts: emptyDir,
// hostPath, configMap, secret, downwardAPI and projected, with subPath
// and subPathExpr), the content of the rendered volumes (ConfigMap and
// Secret keys, downward API fields and resources through package
// downward, service account tokens cached and renewed after 80% of their
// life, as the kubelet's token manager), their refresh while containers
// run (Refresh: edits, label changes and fresh tokens reach running
// containers), the pod's managed hosts file (HostsMount), and the removal
// of directories of pods no longer known (Cleanup). API objects come
// through Objects, which API mode supplies and standalone mode leaves
// nil: without it only emptyDir, hostPath and downward API content work.
// A missing required object is an error for the caller to report as
// CreateContainerConfigError; the next sync asks again. When the API
// server does not answer, a container (re)started meanwhile gets the
// volume's last content.
//
// The pod's fsGroup owns its emptyDir, rendered and local volumes
// (ownership.go). Not done: per-file owners on rendered volumes (the
// kubelet makes a token 0600 for an fsUser), tmpfs for secrets (they are
// written to the pod directory, 0750 up to the volume),
// clusterTrustBundle and podCertificate projections, volume plugins
// (nfs, iscsi and the like are refused), CSI persistent volumes.
// persistentVolumeClaim and generic ephemeral volumes are resolved to
// their bound PersistentVolume (claims.go): hostPath and local ones.
//
// Why its own package: package volume keeps the low-level, pod-agnostic
// pieces (emptyDir and hostPath checks, safe subPath bind mounts, the
// atomic writer, mount-aware removal); package cri keeps the runtime and
// asks this one for mounts. This package is the one place that knows a
// pod's directory layout and reads API objects for volumes; it imports
// neither cri nor the sync loop, and cri's Objects embeds this package's
// Objects, so the arrow stays one-way (cri → podvolumes → volume,
// downward, pod).
//
// It does not own the pod log directories, the termination message files
// or the removal of a killed pod's directory (package cri, through Dir).
//
// Concurrency: a Manager is safe for concurrent use by one worker per
// pod; calls for the same pod must not overlap (the pod worker
// serialises them). Cleanup runs from housekeeping, on pods no worker
// has.
package podvolumes
