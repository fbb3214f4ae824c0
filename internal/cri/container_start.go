package cri

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodeagent/nodeagent/internal/images"
	"github.com/nodeagent/nodeagent/internal/pod"
	"github.com/nodeagent/nodeagent/internal/podvolumes"
)

// Container waiting reasons the kubelet reports (kuberuntime/container.go).
const (
	ReasonContainerCreating          = "ContainerCreating"
	ReasonPodInitializing            = "PodInitializing"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
)

// startError is a container start failure with its waiting reason.
type startError struct {
	reason string
	err    error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// startSpec is one container of the pod's spec to start (kuberuntime's
// startSpec): an app or init container, or an ephemeral one, whose
// EphemeralContainerCommon c then is (the same fields as a Container;
// validation forbids it probes, ports, resources and lifecycle).
type startSpec struct {
	c    *v1.Container
	init bool
	// ephemeral is set for an ephemeral container.
	ephemeral *v1.EphemeralContainer
}

func appSpec(c *v1.Container) startSpec  { return startSpec{c: c} }
func initSpec(c *v1.Container) startSpec { return startSpec{c: c, init: true} }
func ephemeralSpec(ec *v1.EphemeralContainer) startSpec {
	return startSpec{c: (*v1.Container)(&ec.EphemeralContainerCommon), ephemeral: ec}
}

// containerConfig builds the CRI config of one container
// (kuberuntime_container.go generateContainerConfig).
//
// podIPs are the sandbox's IPs, primary first. targetID, for an
// ephemeral container with a targetContainerName, is the running target
// whose process namespace it joins.
//
// imageVols are the image volumes c mounts, pulled (imageVolumes).
func (r *Runtime) containerConfig(ctx context.Context, p *v1.Pod, s startSpec, restartCount int, imageRef string, imageVols map[string]*runtimeapi.ImageSpec, podIPs []string, targetID string) (*runtimeapi.ContainerConfig, error) {
	c := s.c
	podIP := primaryIP(podIPs)
	env, err := r.envFor(ctx, p, c, podIPs)
	if err != nil {
		return nil, err
	}
	mounts, err := r.cfg.Volumes.Mounts(ctx, p, c, podIP, imageVols, func(s string) string { return expand(s, envMap(env)) })
	if err != nil {
		return nil, err
	}
	kv := make([]*runtimeapi.KeyValue, 0, len(env))
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		kv = append(kv, &runtimeapi.KeyValue{Key: k, Value: []byte(v)})
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		Command:     expandAll(c.Command, env),
		Args:        expandAll(c.Args, env),
		WorkingDir:  c.WorkingDir,
		Envs:        kv,
		Mounts:      mounts,
		Labels:      containerLabels(p, c),
		Annotations: containerAnnotations(p, s, restartCount),
		LogPath:     filepath.Join(c.Name, strconv.Itoa(restartCount)+".log"),
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
		Linux: &runtimeapi.LinuxContainerConfig{
			Resources:       linuxResources(c),
			SecurityContext: securityContext(p, c),
		},
	}
	if len(imageVols) > 0 {
		refs := make([]string, 0, len(imageVols))
		for _, spec := range imageVols {
			refs = append(refs, spec.Image)
		}
		slices.Sort(refs)
		cfg.Annotations[images.AnnotationImageVolumes] = strings.Join(slices.Compact(refs), ",") // kept from image GC
	}
	if err := r.applySecurityProfiles(p, c, cfg.Linux.SecurityContext); err != nil {
		return nil, err
	}
	if err := verifyRunAsNonRoot(p, c, func() (*runtimeapi.Image, error) { return r.imageStatus(ctx, imageRef) }); err != nil {
		return nil, err
	}
	if err := recursiveReadOnly(c, cfg.Mounts, func() (bool, error) {
		// The pod's runtime handler's feature, as the kubelet looks it up.
		handler, err := r.runtimeHandler(p)
		if err != nil {
			return false, err
		}
		f, err := r.Features(ctx)
		return f.handlerRRO(handler), err
	}); err != nil {
		return nil, err
	}
	if ns := cfg.Linux.SecurityContext.NamespaceOptions; targetID != "" && ns.Pid == runtimeapi.NamespaceMode_CONTAINER {
		// As the kubelet: the target's process namespace, unless the
		// pod shares one (or the host's) already.
		ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, targetID
	}
	hosts, err := r.cfg.Volumes.HostsMount(p, c, podIP, podvolumes.Hosts{Hostname: podHostname(p), ClusterDomain: r.cfg.ClusterDomain, NodeFile: r.cfg.NodeHostsFile})
	if err != nil {
		return nil, err
	}
	if hosts != nil {
		cfg.Mounts = append(cfg.Mounts, hosts)
	}
	if c.TerminationMessagePath != "" {
		// The kubelet bind-mounts a per-container file for the termination
		// message; so do we, under the pod directory.
		f := r.terminationMessageFile(p.UID, c.Name, restartCount)
		if err := createTerminationMessageFile(f); err != nil {
			return nil, err
		}
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: f})
	}
	return cfg, nil
}

// linuxResources maps requests and limits the way the kubelet does
// (pkg/kubelet/kuberuntime/kuberuntime_container_linux.go).
func linuxResources(c *v1.Container) *runtimeapi.LinuxContainerResources {
	const period = 100000
	res := &runtimeapi.LinuxContainerResources{}
	cpuReq := c.Resources.Requests.Cpu().MilliValue()
	cpuLim := c.Resources.Limits.Cpu().MilliValue()
	if cpuReq == 0 && cpuLim > 0 {
		cpuReq = cpuLim
	}
	shares := cpuReq * 1024 / 1000
	if shares < 2 {
		shares = 2
	}
	res.CpuShares = shares
	if cpuLim > 0 {
		res.CpuPeriod = period
		res.CpuQuota = cpuLim * period / 1000
		if res.CpuQuota < 1000 {
			res.CpuQuota = 1000
		}
	}
	if mem := c.Resources.Limits.Memory().Value(); mem > 0 {
		res.MemoryLimitInBytes = mem
	}
	return res
}

func securityContext(p *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerSecurityContext {
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(p)}
	if psc := p.Spec.SecurityContext; psc != nil {
		sc.RunAsUser, sc.RunAsGroup, sc.SupplementalGroups = podIdentity(psc)
		sc.SupplementalGroupsPolicy = groupsPolicy(psc)
	}
	csc := c.SecurityContext
	if csc == nil {
		return sc
	}
	if csc.Privileged != nil {
		sc.Privileged = *csc.Privileged
	}
	if csc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *csc.RunAsUser}
	}
	if csc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *csc.RunAsGroup}
	}
	if csc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.AllowPrivilegeEscalation != nil {
		sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	if caps := csc.Capabilities; caps != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range caps.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range caps.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	return sc
}

// startContainer pulls the image, creates and starts one container. The
// restart count is one more than the newest earlier instance's, so it
// survives an agent restart through the container annotation.
//
// A container created but left unstarted by a failure is removed again
// (in a fresh, bounded context, so a canceled sync still rolls back), as
// containerd's CRI plugin undoes each step it took. One whose start the
// runtime recorded as an exit (containerd: exit 128, StartError) is kept,
// as the kubelet keeps it: it is the instance the restart policy, the
// CrashLoopBackOff and the restart count are judged on.
func (r *Runtime) startContainer(ctx context.Context, p *v1.Pod, s startSpec, sandboxID string, sandbox *runtimeapi.PodSandboxConfig, st *pod.RuntimeStatus, podIPs []string, log *zap.Logger) (retErr error) {
	c, init := s.c, s.init
	podIP := primaryIP(podIPs)
	imageRef, err := r.ensureImage(ctx, p, c, sandbox)
	if err != nil {
		return err
	}
	imageVols, err := r.imageVolumes(ctx, p, c, sandbox)
	if err != nil {
		return err
	}
	restartCount := 0
	if prev := st.Latest(c.Name, init); prev != nil && s.ephemeral == nil {
		restartCount = prev.RestartCount + 1
	}
	targetID, err := ephemeralTarget(s, sandboxID, st)
	if err != nil {
		return err
	}
	cfg, err := r.containerConfig(ctx, p, s, restartCount, imageRef, imageVols, podIPs, targetID)
	if err == nil {
		err = r.mutateConfig(ctx, Target{Pod: p, Container: c, PodIP: podIP}, cfg)
	}
	if err != nil {
		return &startError{ReasonCreateContainerConfigError, err}
	}
	if err := os.MkdirAll(filepath.Join(sandbox.LogDirectory, c.Name), 0o755); err != nil {
		return &startError{ReasonCreateContainerError, fmt.Errorf("create container log directory: %w", err)}
	}
	cctx, cancel := r.callCtx(ctx)
	defer cancel()
	created, err := r.c.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox,
	})
	if err != nil {
		return &startError{ReasonCreateContainerError, fmt.Errorf("create container: %w", translate(err))}
	}
	log = log.With(zap.String("containerID", created.ContainerId))
	defer func() {
		if retErr == nil {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CallTimeout)
		defer cancel()
		st, err := r.c.ContainerStatus(rctx, &runtimeapi.ContainerStatusRequest{ContainerId: created.ContainerId})
		if err == nil && st.Status != nil && st.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return // an exited instance: kept for the restart policy
		}
		if err := r.RemoveContainer(rctx, created.ContainerId); err != nil {
			log.Warn("remove container that failed to start; removed with its pod otherwise", zap.Error(err))
		}
	}()
	r.event(p, v1.EventTypeNormal, "Created", "Created container: %s", c.Name)
	if _, err := r.c.StartContainer(cctx, &runtimeapi.StartContainerRequest{ContainerId: created.ContainerId}); err != nil {
		return &startError{ReasonRunContainerError, fmt.Errorf("start container: %w", translate(err))}
	}
	log.Info("container started", zap.Int("restartCount", restartCount))
	r.event(p, v1.EventTypeNormal, "Started", "Started container %s", c.Name)
	// As the kubelet: the next container (and, for an init container,
	// the pod) waits for the post-start phases (the postStart hook); a
	// failure kills the container, whose restart policy then applies.
	if phase, msg, err := r.postStart(ctx, Target{Pod: p, Container: c, ID: created.ContainerId, PodIP: podIP}); err != nil {
		if ctx.Err() != nil {
			// The pod is being removed: not the phase's failure, and the
			// container stays for the kill that follows (with the pod's
			// grace period and its preStop).
			log.Info("post-start phase interrupted by the pod's removal", zap.String("phase", phase))
			return nil
		}
		if msg == "" {
			msg = err.Error()
		}
		log.Warn("post-start phase failed; killing the container", zap.String("phase", phase), zap.Error(err))
		r.event(p, v1.EventTypeWarning, EventFailedPostStartHook, "PostStartHook failed: %s", msg)
		// As the kubelet: killed with the pod's grace period, its
		// preStop first.
		grace := gracePeriod(p, nil)
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Duration(max(grace, minGracePeriod))*time.Second+r.cfg.CallTimeout)
		defer cancel()
		started := &pod.Container{ID: created.ContainerId, Name: c.Name, Init: init, Ephemeral: s.ephemeral != nil, State: pod.ContainerRunning}
		if err := r.killContainer(kctx, p, started, grace, podIP, EventFailedPostStartHook, log); err != nil {
			log.Warn("kill container after its failed post-start phase", zap.Error(err))
		}
		return &startError{ReasonPostStartHookError, fmt.Errorf("PostStartHook failed: %s", msg)}
	}
	return nil
}

// ephemeralTarget is the container ID whose process namespace an
// ephemeral container joins: the running instance, in the pod's sandbox,
// of its targetContainerName (an app or init container); "" for any
// other container. A target that does not run (yet, or any more) fails
// the start, which the next sync tries again: the runtime could not join
// a namespace that is gone (the kubelet's getTargetID, whose newest
// instance the runtime then refuses when it is not running).
func ephemeralTarget(s startSpec, sandboxID string, st *pod.RuntimeStatus) (string, error) {
	if s.ephemeral == nil || s.ephemeral.TargetContainerName == "" {
		return "", nil
	}
	name := s.ephemeral.TargetContainerName
	var found bool
	for _, c := range st.Containers { // newest first
		if c.Name != name || c.Ephemeral {
			continue
		}
		found = true
		if c.SandboxID == sandboxID && c.State == pod.ContainerRunning {
			return c.ID, nil
		}
	}
	if !found {
		return "", &startError{ReasonCreateContainerConfigError, fmt.Errorf("unable to find target container %s", name)}
	}
	return "", &startError{ReasonCreateContainerError, fmt.Errorf("target container %s is not running", name)}
}
