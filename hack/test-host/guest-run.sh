#!/usr/bin/env bash
# The host suite's script inside the booted guest (systemd PID 1, cgroup
# v2), run as root by testhost-run.service from the share at /host that
# hack/test-host/suite.sh prepared:
#
#   /host/src      Makefile, README.md, deploy/, bin/nodeagent (make install)
#   /host/images   the test images as OCI layouts (hack/images/build.sh)
#   /host/hosttest the suite (go test -c -tags testhost ./test/host)
#   /host/out      results: test-<driver>.log, nodeagent-<driver>.log,
#                  result (the suite's exit code), marks/ (preStop hooks)
#
# 1. The images go into the guest's registry (127.0.0.1:5055); nodeagent
#    is installed by `make install` and enabled.
# 2. Once per cgroup driver (systemd, then cgroupfs): containerd set to
#    the same driver (SystemdCgroup), nodeagent's config written, both
#    restarted, the suite run, every pod removed.
# 3. The power-off: containerd and nodeagent back on systemd, the
#    shutdown pods started (TestShutdownPodsRunning), the result written,
#    then `systemctl poweroff`: the host checks the preStop hooks' marks.
set -uo pipefail

OUT=/host/out
REG=127.0.0.1:5055
# The hierarchy the host asked the guest to boot with (suite.sh).
CGROUP=$(cat /host/cgroup 2>/dev/null || echo v2)
mkdir -p "$OUT"
log() { echo "guest-run: $(date +%T) $*"; }
rc=0

wait_for() { # wait_for SECONDS WHAT CMD...
	local n=$1 what=$2
	shift 2
	for ((i = 0; i < n; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 1
	done
	log "timed out waiting for $what"
	return 1
}

log "cgroup $CGROUP ($(stat -fc %T /sys/fs/cgroup))"
log "pushing the test images to $REG"
wait_for 120 "the registry" curl -fsS "http://$REG/v2/" || exit 1
printf '{"default":[{"type":"insecureAcceptAnything"}]}\n' >/tmp/policy.json
sk=(skopeo --policy /tmp/policy.json --registries-conf /dev/null copy -q --preserve-digests --dest-tls-verify=false)
"${sk[@]}" oci:/host/images/pause:3.10 "docker://$REG/nodeagent/pause:3.10" || exit 1
"${sk[@]}" oci:/host/images/busybox:1.36 "docker://$REG/nodeagent/busybox:1.36" || exit 1

log "make install"
make -C /host/src -o build install || exit 1
systemctl enable nodeagent || exit 1

# use_driver DRIVER [EXTRA_CONFIG]: containerd and nodeagent on DRIVER.
use_driver() {
	local driver=$1 systemd=false
	[ "$driver" = systemd ] && systemd=true
	systemctl stop nodeagent
	sed -i "s/SystemdCgroup = .*/SystemdCgroup = $systemd/" /etc/containerd/config.toml
	systemctl restart containerd || return 1
	wait_for 60 containerd ctr version || return 1
	# The hard memory threshold: 800 MiB below what is available now
	# (MemFree + Inactive(file), as the agent's memory.available), so
	# TestMemoryPressureEvictsBestEffortFirst can cross it.
	local avail
	avail=$(awk '/^MemFree:/{f=$2} /^Inactive\(file\):/{i=$2} END{print int((f+i)/1024)}' /proc/meminfo)
	cat >/etc/nodeagent/config.yaml <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /etc/kubernetes/manifests
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: $driver
cpuManagerPolicy: static
podPidsLimit: 512
readOnlyPort: 10255
kubeReserved: {cpu: 500m}
systemReserved: {memory: 100Mi}
evictionHard: {memory.available: $((avail - 800))Mi}
evictionPressureTransitionPeriod: 10s
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
EOF
	# A new CPU manager policy starts from a new state, as the kubelet's.
	rm -f /var/lib/kubelet/cpu_manager_state
	systemctl start nodeagent || return 1
	log "nodeagent on the $driver driver (memory.available threshold $((avail - 800))Mi)"
}

for driver in systemd cgroupfs; do
	log "phase $driver"
	if ! use_driver "$driver"; then
		log "phase $driver: set-up failed"
		rc=1
		continue
	fi
	HOSTTEST_CGROUP=$CGROUP HOSTTEST_DRIVER=$driver /host/hosttest -test.v -test.timeout 30m \
		-test.run '^(TestService|TestPodCgroups|TestStats|TestOOMKilled|TestMemoryPressureEvictsBestEffortFirst|TestAgentRestartKeepsContainers)$' \
		>"$OUT/test-$driver.log" 2>&1 || rc=1
	HOSTTEST_CGROUP=$CGROUP HOSTTEST_DRIVER=$driver /host/hosttest -test.v -test.run '^TestRemoveAllPods$' >>"$OUT/test-$driver.log" 2>&1 || rc=1
	journalctl -u nodeagent --no-pager >"$OUT/nodeagent-$driver.log" 2>&1
	log "phase $driver: $(grep -cE '^--- PASS' "$OUT/test-$driver.log") passed, $(grep -cE '^--- FAIL' "$OUT/test-$driver.log") failed"
done

log "phase poweroff"
if use_driver systemd; then
	HOSTTEST_CGROUP=$CGROUP HOSTTEST_DRIVER=systemd /host/hosttest -test.v -test.run '^TestShutdownPodsRunning$' >"$OUT/test-poweroff.log" 2>&1 || rc=1
else
	rc=1
fi
journalctl -u nodeagent --no-pager >"$OUT/nodeagent-before-poweroff.log" 2>&1
echo "$rc" >"$OUT/result"
sync
log "powering off (suite exit code $rc)"
systemctl poweroff --no-block
exit "$rc"
