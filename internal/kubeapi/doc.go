// Package kubeapi is nodeagent's side of API mode: the client (with TLS
// bootstrap and certificate rotation), the node server's CSR-issued
// serving certificate (ServingCert: signer kubernetes.io/kubelet-serving,
// renewed by client-go's certificate manager; the server reads it at every
// handshake), the informer over the pods bound to this node (NodePods:
// the pod source built on it is podsource.API), pod statuses, mirror pods
// and events written
// to the API server, and the objects pods read (ConfigMaps, Secrets,
// service-account tokens, services). Start builds these parts as one Mode
// (nil: standalone), which the agent is wired with and Run runs.
package kubeapi
