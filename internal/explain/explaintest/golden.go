// Package explaintest holds what the unit and end-to-end tests of explain
// and check share: golden files with their volatile parts normalised.
package explaintest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// checksum matches the checksums the catalog writes: sixteen hex characters,
// possibly versioned ("v3." and a key ID and ":"), and up to 64.
var checksum = regexp.MustCompile(`\b(v[0-9]+(\.[0-9a-f]{8})?:)?[0-9a-f]{16}([0-9a-f]{48})?\b`)

// Normalise replaces each literal old by its new (namespace names, server
// addresses), then each distinct checksum by <sum-N> in order of first
// appearance, so that equal checksums stay equal and different ones differ.
// Tables put checksums in their last column, so no alignment depends on them.
func Normalise(s string, replacements ...string) string {
	for i := 0; i+1 < len(replacements); i += 2 {
		s = strings.ReplaceAll(s, replacements[i], replacements[i+1])
	}
	seen := map[string]string{}
	return checksum.ReplaceAllStringFunc(s, func(m string) string {
		if label, ok := seen[m]; ok {
			return label
		}
		seen[m] = fmt.Sprintf("<sum-%d>", len(seen)+1)
		return seen[m]
	})
}

// Compare checks got against the golden file, or rewrites the file when
// update is set.
func Compare(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
