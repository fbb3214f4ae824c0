package volume

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
)

// ChildDir joins one path element to root. Sources validate names and
// UIDs; this is the second line (a sandbox label written by someone
// else, a future source): an element that is not a plain name (a
// separator, ".", "..") would make a pod's directory some other directory
// that removal then deletes, so it is replaced by a name derived from its
// hash, which stays beneath root and matches nothing real.
func ChildDir(root, elem string) string {
	if elem == "" || elem == "." || elem == ".." || strings.ContainsAny(elem, "/\x00") {
		sum := sha256.Sum256([]byte(elem))
		elem = "invalid-" + hex.EncodeToString(sum[:8])
	}
	return filepath.Join(root, elem)
}
