package cpumanager

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodeagent/nodeagent/internal/pod"
)

// Run reconciles every ReconcilePeriod and whenever the state changes,
// until ctx ends, over pods (the PLEG, built after the Manager: the
// runtime it watches takes the Manager's run-chain phase). It returns at once under the none policy. Run it on
// its own goroutine, beside the sync loop: it makes CRI calls.
func (m *Manager) Run(ctx context.Context, pods PodStatuses) {
	if !m.static {
		return
	}
	t := m.cfg.Clock.NewTicker(m.cfg.ReconcilePeriod)
	defer t.Stop()
	for {
		if err := m.Reconcile(ctx, pods); err != nil && ctx.Err() == nil {
			m.log.Warn("cpu manager reconcile", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-m.changed:
		}
	}
}

// Reconcile is one step: release the CPUs of containers that ended for
// good, then set every running container of the agent on its CPUs — its
// exclusive ones, else the shared pool — with UpdateContainerResources,
// for those whose cpuset differs from the one last set (all of them once
// after a start). Not safe to call concurrently with itself.
func (m *Manager) Reconcile(ctx context.Context, pods PodStatuses) error {
	if !m.static {
		return nil
	}
	snap, _ := pods.Snapshot()
	errs := []error{m.releaseEnded(ctx, pods, snap)}
	m.mu.Lock()
	def := m.st.defaultSet
	exclusive := map[string]map[string]cpuset.CPUSet{}
	for uid, cs := range m.st.assignments {
		exclusive[uid] = map[string]cpuset.CPUSet{}
		for name, set := range cs {
			exclusive[uid][name] = set
		}
	}
	m.mu.Unlock()
	seen := map[string]bool{}
	for uid, st := range snap {
		for _, c := range st.Containers {
			if c.State != pod.ContainerRunning {
				continue
			}
			seen[c.ID] = true
			want := def
			if set, ok := exclusive[string(uid)][c.Name]; ok && set.Size() > 0 {
				want = set
			}
			if want.IsEmpty() || m.pushed[c.ID] == want.String() {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
			_, err := m.cfg.Updater.UpdateContainerResources(cctx, &runtimeapi.UpdateContainerResourcesRequest{
				ContainerId: c.ID, Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: want.String()}})
			cancel()
			if err != nil {
				errs = append(errs, fmt.Errorf("set cpuset %s on container %s (%s/%s %s): %w", want, c.ID, st.Namespace, st.Name, c.Name, err))
				continue
			}
			m.log.Debug("container cpuset set", zap.String("pod", st.Namespace+"/"+st.Name), zap.String("container", c.Name),
				zap.String("containerID", c.ID), zap.Stringer("cpus", want))
			m.pushed[c.ID] = want.String()
		}
	}
	for id := range m.pushed {
		if !seen[id] {
			delete(m.pushed, id)
		}
	}
	return errors.Join(errs...)
}

type ref struct{ uid, name string }

// releaseEnded releases the exclusive CPUs of containers that exited and
// will not run again: under restartPolicy Never, under OnFailure with
// exit code 0, and init containers (not sidecars) that succeeded. A
// sidecar or a restartPolicy Always container keeps its CPUs until its
// pod goes (RemoveStale).
func (m *Manager) releaseEnded(ctx context.Context, pods PodStatuses, snap map[pod.UID]*pod.RuntimeStatus) error {
	m.mu.Lock()
	held := map[string][]string{} // containers holding CPUs, by pod
	for uid, cs := range m.st.assignments {
		for name, set := range cs {
			if set.Size() > 0 {
				held[uid] = append(held[uid], name)
			}
		}
	}
	m.mu.Unlock()
	var cands []ref
	infos := map[string]podInfo{}
	for uid, names := range held {
		p, ok := m.cfg.Pods.GetPodByUID(pod.UID(uid))
		if !ok {
			continue // not admitted (again, after a restart): spec unknown
		}
		info := infoOf(p)
		for _, name := range names {
			if info.sidecar[name] || (!info.init[name] && info.restart == v1.RestartPolicyAlways) {
				continue
			}
			if c := snap[pod.UID(uid)].Latest(name, info.init[name]); c != nil && c.State == pod.ContainerExited {
				cands = append(cands, ref{uid, name})
				infos[uid] = info
			}
		}
	}
	var errs []error
	full := map[string]*pod.RuntimeStatus{}
	for _, r := range cands {
		info := infos[r.uid]
		st, ok := full[r.uid]
		if !ok {
			var err error
			if st, err = pods.GetNewerThan(ctx, pod.UID(r.uid), time.Time{}); err != nil {
				errs = append(errs, fmt.Errorf("pod %s status: %w", r.uid, err))
				continue
			}
			full[r.uid] = st
		}
		c := st.Latest(r.name, info.init[r.name])
		if c == nil || c.State != pod.ContainerExited {
			continue
		}
		if c.ExitCode != 0 && info.restart != v1.RestartPolicyNever {
			continue // it (or, for an init container, the pod) runs again
		}
		m.mu.Lock()
		back := m.release(r.uid, r.name, true)
		err := m.commit()
		m.mu.Unlock()
		m.log.Info("exclusive CPUs released: container ended", zap.String("pod", st.Namespace+"/"+st.Name), zap.String("uid", r.uid),
			zap.String("container", r.name), zap.String("containerID", c.ID), zap.Int32("exitCode", c.ExitCode), zap.Stringer("cpus", back))
		if err != nil {
			errs = append(errs, fmt.Errorf("checkpoint CPU manager state: %w", err))
		}
	}
	return errors.Join(errs...)
}
