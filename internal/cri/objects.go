package cri

import (
	"context"
	"errors"

	"github.com/nodeagent/nodeagent/internal/podvolumes"
)

// Objects is what pods read from the API server; nil in standalone mode.
//
// Contract: called from pod workers, concurrently for different pods;
// every method honours ctx and may answer from a cache (the kubelet's
// watch-based managers). Nothing is retried here: a failed call fails
// the container start (CreateContainerConfigError) or the refresh, and
// the next sync of the pod asks again.
type Objects interface {
	// ConfigMap, Secret and ServiceAccountToken: what volumes read
	// (package podvolumes, which documents them); ConfigMaps and Secrets
	// are also read for the environment and pull secrets.
	podvolumes.Objects
	// ServiceEnv returns the service environment variables for a pod of
	// namespace ns (KUBERNETES_SERVICE_HOST/PORT… always; every service of
	// ns when enableServiceLinks).
	ServiceEnv(ctx context.Context, ns string, enableServiceLinks bool) (map[string]string, error)
}

// ErrServicesNotSynced is returned (wrapped) by Objects.ServiceEnv, with
// whatever variables it has, while the services were not read from the
// API server yet: API pods wait for them (CreateContainerConfigError,
// retried), static pods start without the missing ones — a static
// control plane must come up before the API server answers.
var ErrServicesNotSynced = errors.New("services have not yet been read at least once, cannot construct envvars")
