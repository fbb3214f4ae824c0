// Package kubeapi is nodeagent's side of API mode: the client (with TLS
// bootstrap and certificate rotation), the pods bound to this node as a
// pod source, pod status and events written to the API server, mirror pods
// for static pods, and the objects pods read (ConfigMaps, Secrets,
// service-account tokens, services).
package kubeapi

import (
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/cache"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/client-go/util/certificate"
	_ "k8s.io/component-helpers/apimachinery/lease"
)
