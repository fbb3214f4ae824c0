package podvolumes

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/volume"
)

// own gives a volume to the pod's fsGroup (volume.SetOwnership), as the
// kubelet's volume SetUp does for the volume kinds whose ownership it
// manages: emptyDir, configMap, secret, downwardAPI, projected and local
// persistent volumes — not hostPath ones, nor image volumes. Once per
// volume and pod while the agent runs, and again when a rendered volume
// got new files; the pod's fsGroupChangePolicy OnRootMismatch skips a
// volume whose root is right already.
func (m *Manager) own(p *v1.Pod, v *v1.Volume, dir string, readOnly bool) error {
	sc := p.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil || dir == "" || !m.ownable(p, v) {
		return nil
	}
	m.cmu.Lock()
	done := m.owned[p.UID][v.Name]
	m.cmu.Unlock()
	if done {
		return nil
	}
	onRootMismatch := sc.FSGroupChangePolicy != nil && *sc.FSGroupChangePolicy == v1.FSGroupChangeOnRootMismatch
	if err := volume.SetOwnership(dir, *sc.FSGroup, readOnly, onRootMismatch); err != nil {
		return fmt.Errorf("set the fsGroup %d on the volume: %w", *sc.FSGroup, err)
	}
	m.cmu.Lock()
	defer m.cmu.Unlock()
	if m.owned == nil {
		m.owned = map[types.UID]map[string]bool{}
	}
	if m.owned[p.UID] == nil {
		m.owned[p.UID] = map[string]bool{}
	}
	m.owned[p.UID][v.Name] = true
	return nil
}

// ownable: a volume kind whose ownership the kubelet manages.
func (m *Manager) ownable(p *v1.Pod, v *v1.Volume) bool {
	switch {
	case v.EmptyDir != nil, isRendered(v):
		return true
	case ClaimName(p, v) != "":
		m.cmu.Lock()
		defer m.cmu.Unlock()
		return m.claims[p.UID][v.Name].local
	}
	return false
}

// disown makes a volume's next mount give it to the fsGroup again.
func (m *Manager) disown(uid types.UID, name string) {
	m.cmu.Lock()
	defer m.cmu.Unlock()
	delete(m.owned[uid], name)
}
