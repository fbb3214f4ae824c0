// Package e2e holds nodeagent's end-to-end tests: the real nodeagent
// binary against a real containerd, runc, CNI plugins and registry (the rig
// of hack/rig.sh). They build only with -tags integration and need
// NODEAGENT_CONTAINERD_ADDRESS; `make test` brings the rig up and runs them.
package e2e
