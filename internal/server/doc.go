// Package server owns the node's authenticated HTTPS API: the kubelet's
// port 10250, through which the API server proxies `kubectl
// exec/attach/port-forward` and `get --raw /api/v1/nodes/<node>/proxy/...`.
//
// It owns the TLS settings and the serving certificate (given files, or
// self-signed at first start in the cert dir, as the kubelet; or, with
// --rotate-server-certificates, read at every handshake from a
// CertificateSource — internal/kubeapi's CSR-issued, rotated one — so a
// renewed certificate is served from the next handshake and, while there
// is none, handshakes fail with ErrNoServingCertificate), the
// authentication (x509 client certificates against a client CA, bearer
// tokens through TokenReview, anonymous only when asked), the
// authorization (SubjectAccessReview with the kubelet's
// request-to-attributes mapping, or AlwaysAllow), and the handlers:
// /healthz, /pods, /containerLogs (read by internal/logs), /exec, /attach,
// /portForward, /run, /metrics, /configz.
//
// It does not own the pods (it reads the published statuses through a
// func), the metrics (it serves a handler main gives it), nor the
// container runtime's streaming server: exec, attach and port-forward ask
// the runtime (CRI Exec/Attach/PortForward) for a one-time URL and proxy
// the upgraded connection to it, so SPDY and websocket streams pass
// through unchanged (httputil.ReverseProxy, which handles Upgrade; the
// simpler choice over apimachinery's UpgradeAwareHandler, whose extras —
// redirects, rewriting — the agent does not need).
//
// /stats/summary and /metrics/resource serve what internal/stats gives
// (a Summarizer and a handler). The read-only port (ReadOnly) is the
// reading endpoints — /healthz, /pods, /stats/summary, /metrics,
// /metrics/resource — over plain HTTP with no authentication, served only
// when the operator sets --read-only-port.
//
// Not here: /logs/ (the host's /var/log: not served at all), nor the
// serving certificate's CSR and renewals (internal/kubeapi's ServingCert,
// client-go's certificate manager).
//
// Concurrency: the handlers and the caches are safe for concurrent use;
// Serve runs until its context ends.
package server
