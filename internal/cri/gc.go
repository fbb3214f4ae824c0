package cri

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/volume"
)

// collectGarbage removes what a live pod no longer needs, as the
// kubelet's container GC: exited containers created at least
// ContainerGCMinAge ago are collected, per container name, beyond the
// newest ContainerGCMaxPerPodContainer of them (they stay for logs,
// --previous and lastState), with their log files — never the newest
// instance of a container, which carries the restart count; and sandboxes
// that are neither ready nor the newest and hold no container. Errors are
// logged and left to the next sync.
func (r *Runtime) collectGarbage(ctx context.Context, st *pod.RuntimeStatus, log *zap.Logger) {
	removed := map[string]bool{}
	for _, c := range r.collectable(st) {
		if err := r.RemoveContainer(ctx, c.ID); err != nil {
			log.Warn("garbage-collect container", zap.String("container", c.Name), zap.String("containerID", c.ID), zap.Error(err))
			continue
		}
		removed[c.ID] = true
		if st.Name != "" {
			r.removeContainerLogs(st, c, log)
		}
		log.Debug("collected dead container", zap.String("container", c.Name), zap.String("containerID", c.ID))
	}
	for i, sb := range st.Sandboxes {
		if i == 0 || sb.State == runtimeapi.PodSandboxState_SANDBOX_READY || holds(st, sb.ID, removed) {
			continue // a sandbox with containers keeps their restart counts and last states
		}
		if err := r.removeSandbox(ctx, sb.ID); err != nil {
			log.Warn("garbage-collect sandbox", zap.String("sandboxID", sb.ID), zap.Error(err))
			continue
		}
		log.Debug("collected dead sandbox", zap.String("sandboxID", sb.ID))
	}
}

// collectable are st's dead containers the GC policy lets go.
func (r *Runtime) collectable(st *pod.RuntimeStatus) []*pod.Container {
	type key struct {
		name            string
		init, ephemeral bool
	}
	instances := map[key]int{} // seen so far, newest first
	dead := map[key]int{}      // evictable seen so far
	newestGC := r.cfg.Clock.Now().Add(-r.cfg.ContainerGCMinAge)
	var out []*pod.Container
	for _, c := range st.Containers { // newest first
		k := key{c.Name, c.Init, c.Ephemeral}
		instances[k]++
		if c.State != pod.ContainerExited || c.CreatedAt.After(newestGC) {
			continue
		}
		dead[k]++
		if instances[k] == 1 || r.cfg.ContainerGCMaxPerPodContainer < 0 || dead[k] <= r.cfg.ContainerGCMaxPerPodContainer {
			continue
		}
		out = append(out, c)
	}
	return out
}

// removeContainerLogs removes a collected container's live log and its
// rotations (<n>.log.<time>[.gz]), as the kubelet removes <logpath>*.
func (r *Runtime) removeContainerLogs(st *pod.RuntimeStatus, c *pod.Container, log *zap.Logger) {
	logFile := filepath.Join(r.podLogDir(st.Namespace, st.Name, st.UID), c.Name, strconv.Itoa(c.RestartCount)+".log")
	files, _ := filepath.Glob(logFile + "*")
	for _, f := range files {
		if f != logFile && !strings.HasPrefix(f, logFile+".") {
			continue
		}
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			log.Warn("remove log of collected container", zap.String("file", f), zap.Error(err))
		}
	}
}

// holds reports whether a sandbox still has a container not removed.
func holds(st *pod.RuntimeStatus, sandboxID string, removed map[string]bool) bool {
	for _, c := range st.Containers {
		if c.SandboxID == sandboxID && !removed[c.ID] {
			return true
		}
	}
	return false
}

// CleanupDirs removes pod directories (Config.Volumes) and pod log
// directories whose pod UID is not in active (pods known to the agent or
// present in the runtime): what a crash or a removal behind the agent's
// back left.
func (r *Runtime) CleanupDirs(active map[pod.UID]bool) {
	r.cfg.Volumes.Cleanup(active)
	// The log root may be shared (the kubelet's /var/log/pods, another
	// agent's): only directories of this node's static pods
	// (<ns>_<name>-<node>_<uid>) are ours.
	if entries, err := os.ReadDir(r.cfg.PodLogsDir); err == nil {
		for _, e := range entries {
			i := strings.LastIndexByte(e.Name(), '_')
			if i < 0 || !e.IsDir() || strings.Count(e.Name(), "_") < 2 || !strings.HasSuffix(e.Name()[:i], "-"+r.cfg.NodeName) {
				continue // not a pod log directory of this node
			}
			if !active[pod.UID(e.Name()[i+1:])] {
				r.removeDir(filepath.Join(r.cfg.PodLogsDir, e.Name()))
			}
		}
	}
}

func (r *Runtime) removeDir(dir string) {
	if err := volume.RemoveAll(dir); err != nil {
		r.log.Warn("remove directory of a gone pod", zap.String("dir", dir), zap.Error(err))
		return
	}
	r.log.Info("removed directory of a gone pod", zap.String("dir", dir))
}
