// Package host is nodeagent's suite for a booted host: systemd as PID 1,
// cgroup v2, the distribution's containerd configured as kubeadm
// configures it, nodeagent installed by `make install` and run by its
// unit. It builds only with -tags testhost and runs inside the guest that
// hack/test-host/suite.sh (`make test-host`) boots under qemu; the
// guest's script (hack/test-host/guest-run.sh) runs it once per cgroup
// driver, then prepares the power-off whose preStop hooks the host
// checks. See hack/test-host/README.md.
package host
