// Package podsource turns the places pods come from into one stream of
// pod.Update deltas.
//
// It owns: decoding manifests (YAML or JSON, several documents per file),
// static-pod defaulting (UID, name suffix, namespace, config annotations, the
// API defaults the kubelet applies), validation, the manifest-directory
// watcher (fsnotify plus a periodic re-list), and the Mux that keeps, per
// source, the last set of pods and emits ADD / UPDATE / REMOVE deltas only
// for real changes, so a touch or a rename does nothing.
//
// It does not own what happens to a pod afterwards (syncloop).
//
// Concurrency: Dir.Run is one goroutine; Mux.Set may be called from any
// goroutine and serialises on a mutex; Updates() is receive-only and is
// closed when the Mux's context ends.
package podsource
