package volume

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// CheckSubPath refuses what the API server refuses in a subPath: an
// absolute path and any ".." element (validateLocalDescendingPath). The
// empty string is valid and means the volume's root.
func CheckSubPath(sub string) error {
	if sub == "" {
		return nil
	}
	if filepath.IsAbs(sub) || strings.HasPrefix(sub, "/") {
		return fmt.Errorf("subPath %q must be a relative path", sub)
	}
	for _, el := range strings.Split(sub, "/") {
		if el == ".." {
			return fmt.Errorf("subPath %q must not contain '..'", sub)
		}
	}
	return nil
}

// ErrEscape is returned when a subPath leads out of its volume (through a
// symlink) or, where the kernel lacks openat2, crosses a symlink at all.
var ErrEscape = errors.New("subPath leads outside the volume")

// components splits a checked subPath into its non-empty, non-"." parts.
func components(sub string) []string {
	var out []string
	for _, el := range strings.Split(sub, "/") {
		if el != "" && el != "." {
			out = append(out, el)
		}
	}
	return out
}
