package server

import (
	"go.uber.org/zap"
	"net/http"

	v1 "k8s.io/api/core/v1"
)

// pods answers the node's pods as a v1.PodList, as the kubelet's /pods.
func (s *Server) pods(w http.ResponseWriter, _ *http.Request) {
	pods, err := s.cfg.Pods()
	if err != nil {
		s.log.Warn("list pods", zap.Error(err))
		http.Error(w, "list pods: "+err.Error(), http.StatusInternalServerError)
		return
	}
	list := v1.PodList{Items: make([]v1.Pod, len(pods))}
	list.Kind, list.APIVersion = "PodList", "v1"
	for i, p := range pods {
		list.Items[i] = *p
	}
	writeJSON(w, &list)
}
