// Package volume prepares what a container mounts from its pod's volumes,
// without ever letting a manifest reach the host through a path.
//
// It owns:
//   - the emptyDir directory layout under the pod directory and the
//     hostPath type checks (on the resolved path);
//   - subPath (and expanded subPathExpr) resolution: the path is checked
//     (relative, no ".." element), then opened component by component
//     beneath the volume with openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS)
//     — a symlink that leads out of the volume, absolute or relative, fails
//     the open — and the opened file descriptor is bind-mounted through
//     /proc/self/fd/N onto a per-container path under the pod directory
//     (<pod>/volume-subpaths/<volume>/<container>/<index>), which is what
//     the runtime is given. What the runtime mounts is therefore the object
//     that was checked, not a path that a container could swap for a
//     symlink between the check and the mount (the kubelet's answer to
//     CVE-2017-1002101 and its sequels). On kernels without openat2 the
//     walk uses O_NOFOLLOW on every component and refuses any symlink;
//   - unmounting those bind mounts and removing a pod directory only once
//     nothing is mounted beneath it, so removing a pod never deletes host
//     files through a bind mount;
//   - WriteAtomic, the kubelet's atomic writer for configMap, secret,
//     downwardAPI and projected volumes: each version in a hidden
//     timestamped directory, published by renaming a ..data symlink,
//     user-visible names as symlinks into ..data, a no-op when nothing
//     changed. What goes into the files is package podvolumes' business;
//     so is the pod directory's layout.
//   - ChildDir, the one-element join that keeps a directory named by a
//     manifest (a pod UID, a namespace, a container) beneath its root.
//
// It does not talk to the runtime. Functions are safe for concurrent use
// on different targets; callers serialise work on one pod.
package volume
