// Package podsource turns the places pods come from into one stream of
// pod.Update deltas.
//
// It owns: decoding manifests (YAML or JSON, several documents per file),
// static-pod defaulting (UID, name suffix, namespace, config annotations, the
// API defaults the kubelet applies), validation, the manifest-directory
// watcher (fsnotify plus a periodic re-list), the manifest URL, the API
// server's pods bound to the node (API: handlers on the informer kubeapi
// keeps, a checkpoint of what it handed over, run when the API server is
// away at start), and the Mux that keeps, per
// source, the last set of pods and emits ADD / UPDATE / REMOVE deltas only
// for real changes, so a touch or a rename does nothing.
//
// It does not own what happens to a pod afterwards (syncloop).
//
// Concurrency: Dir.Run and API.Run are one goroutine each; Mux.Set may be called from any
// goroutine and serialises on a mutex; Updates() is receive-only and is
// closed when the Mux's context ends.
package podsource
