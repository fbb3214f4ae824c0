// Package probe runs one network check of a container, as the kubelet's
// pkg/probe: an HTTP GET (success: a status in [200, 400)), a TCP connect
// or a gRPC health check. Lifecycle hooks (httpGet) and probes (httpGet,
// tcpSocket, grpc) share it; exec checks go through CRI and live with
// their callers. It imports nothing internal.
package probe
