package critest

import (
	"fmt"
	"sync"

	"github.com/nodeagent/nodeagent/internal/cri"
)

var _ cri.RuntimeClasses = (*RuntimeClasses)(nil)

// RuntimeClasses is an in-memory cri.RuntimeClasses: RuntimeClass names
// and their handlers, and the names asked for. The zero value is not
// usable; call NewRuntimeClasses. Safe for concurrent use.
type RuntimeClasses struct {
	mu       sync.Mutex
	handlers map[string]string
	asked    []string
}

// NewRuntimeClasses returns RuntimeClasses holding handlers (name →
// handler).
func NewRuntimeClasses(handlers map[string]string) *RuntimeClasses {
	r := &RuntimeClasses{handlers: map[string]string{}}
	for name, h := range handlers {
		r.handlers[name] = h
	}
	return r
}

// Set adds or changes a RuntimeClass, as if created in the API.
func (r *RuntimeClasses) Set(name, handler string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[name] = handler
}

// Delete removes a RuntimeClass, as if deleted in the API.
func (r *RuntimeClasses) Delete(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.handlers, name)
}

// Handler returns the RuntimeClass's handler, or the error the API mode
// implementation gives for a missing one.
func (r *RuntimeClasses) Handler(name string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, name)
	h, ok := r.handlers[name]
	if !ok {
		return "", fmt.Errorf("RuntimeClass %q not found", name)
	}
	return h, nil
}

// Asked returns the names asked for so far, oldest first.
func (r *RuntimeClasses) Asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asked...)
}
