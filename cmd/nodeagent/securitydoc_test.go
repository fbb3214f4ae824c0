package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// SECURITY.md backs its claims with test names: each must be a test (or
// fuzz target) of the repository, so the page cannot cite a test that
// was renamed or removed.
func TestSecurityDocNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((Test|Fuzz)\w+)\(`)
	err = filepath.WalkDir(filepath.Join("..", ".."), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`((Test|Fuzz)[A-Z]\\w*)`").FindAllStringSubmatch(string(doc), -1)
	if len(cited) < 20 {
		t.Fatalf("SECURITY.md cites %d tests; want its claims backed", len(cited))
	}
	for _, m := range cited {
		if !defined[m[1]] {
			t.Errorf("SECURITY.md cites %s, which no test file defines", m[1])
		}
	}
}
