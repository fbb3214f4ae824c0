// Package kubeapi is nodeagent's side of API mode: the client (with TLS
// bootstrap and certificate rotation), the pods bound to this node as a
// pod source (checkpointed), pod statuses, mirror pods and events written
// to the API server, and the objects pods read (ConfigMaps, Secrets,
// service-account tokens, services).
package kubeapi
