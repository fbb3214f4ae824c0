# nodeagent — see README.md. Every target installs what it needs.
SHELL := /bin/bash
GO ?= go
export PATH := /root/.cache/nodeagent-rig/bin:/usr/local/go/bin:$(PATH)

.PHONY: build install uninstall test unit fuzz e2e chaos bench conformance run rig-up rig-down deps controlplane lint clean test-host

build:
	GO=$(GO) bash hack/build.sh bin/nodeagent

# Install as a service: the binary, the systemd unit (Type=notify, with a
# watchdog), a default KubeletConfiguration at /etc/nodeagent/config.yaml
# (an existing one is kept) and the directories; DESTDIR for packaging.
# Then: systemctl enable --now nodeagent. uninstall removes the binary, the
# unit and the docs; the config, /var/lib/kubelet and the pods stay
# (stopping nodeagent leaves pods running).
PREFIX ?= /usr/local
DESTDIR ?=
install: build
	install -D -m 0755 bin/nodeagent $(DESTDIR)$(PREFIX)/bin/nodeagent
	install -D -m 0644 deploy/nodeagent.service $(DESTDIR)/etc/systemd/system/nodeagent.service
	install -D -m 0644 README.md $(DESTDIR)$(PREFIX)/share/doc/nodeagent/README.md
	[ -e $(DESTDIR)/etc/nodeagent/config.yaml ] || install -D -m 0644 deploy/config.yaml $(DESTDIR)/etc/nodeagent/config.yaml
	install -d -m 0755 $(DESTDIR)/etc/kubernetes/manifests $(DESTDIR)/var/log/pods
	install -d -m 0700 $(DESTDIR)/var/lib/kubelet
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

uninstall:
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl disable --now nodeagent || true; fi
	rm -f $(DESTDIR)$(PREFIX)/bin/nodeagent $(DESTDIR)/etc/systemd/system/nodeagent.service
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/nodeagent
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

# The host suite in a booted Debian guest (systemd PID 1, cgroup v2):
# hack/test-host/README.md. Run it before any change to cm, cpumanager,
# eviction, stats, shutdown or the unit.
test-host:
	bash hack/test-host/suite.sh

deps:
	bash hack/install-deps.sh

# The control plane of the API-mode tests and bench (etcd, kube-apiserver,
# kube-controller-manager, kubectl), built once and cached.
controlplane:
	bash hack/install-controlplane.sh

# The whole proof: unit tests (with -race), then end-to-end tests on a rig
# this target brings up and tears down (containerd 2.x, then Debian's 1.6).
test: deps controlplane unit e2e

unit:
	$(GO) vet ./...
	$(GO) vet -tags integration ./test/...
	$(GO) vet -tags testhost ./test/host
	$(GO) test -race -count=1 ./...
	$(MAKE) fuzz FUZZTIME=5s

# Fuzz the parsers of untrusted input: manifests (decode, default,
# validate), the --config file, the API pod checkpoint, the CRI log line
# parser and the rotated-log reader, the cpu_manager_state readers, and the
# node server's paths and queries (hack/fuzz.sh). New crashers land in
# testdata/fuzz/<FuzzName>/ of the package; check them in with the fix.
FUZZTIME ?= 10m
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash hack/fuzz.sh

e2e: deps controlplane
	bash hack/e2e.sh

# The chaos suite at full scale (~10 min): 50 pods, the agent SIGKILLed 20
# times, containerd restarted 5 times, the API server 5 times and etcd
# once, the CRI socket hung 60 s, the pod log file system full, the node
# server flooded; prints its figures (also in /tmp/nodeagent-chaos-full.txt).
# `make test` runs its short scale (TestChaos in the e2e run).
chaos: deps controlplane
	NODEAGENT_E2E_VARIANTS=v2 NODEAGENT_CHAOS=full NODEAGENT_E2E_RUN=TestChaos bash hack/e2e.sh

bench: deps controlplane build
	bash hack/bench.sh

# The upstream kubelet's [sig-node] [Conformance] suite (k8s.io/kubernetes
# v1.37.2 e2e.test, 102 specs without [Serial]/[Disruptive], ~15 min) against
# nodeagent as the one node of a real control plane on the rig's containerd
# 2.x; prints passed/failed beside the kubelet's figure on the same rig. Not
# part of `test` (CI does not run it).
conformance: deps controlplane
	bash hack/conformance.sh

# Run nodeagent with manifests/ against the rig's private containerd.
run: deps build
	bash hack/run.sh

rig-up: deps
	bash hack/rig.sh up

rig-down:
	bash hack/rig.sh down

clean:
	rm -rf bin
