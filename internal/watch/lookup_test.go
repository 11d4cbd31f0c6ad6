package watch

import (
	"maps"
	"slices"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"
)

// builtinGroups lists client-go's scheme's groups (the controller may not
// link that scheme; its tests may) and the two of the embedded servers.
func TestBuiltinGroups(t *testing.T) {
	want := map[string]bool{"apiextensions.k8s.io": true, "apiregistration.k8s.io": true}
	for _, gv := range scheme.Scheme.PrioritizedVersionsAllGroups() {
		want[gv.Group] = true
	}
	if !maps.Equal(builtinGroups, want) {
		got, exp := slices.Sorted(maps.Keys(builtinGroups)), slices.Sorted(maps.Keys(want))
		t.Errorf("builtinGroups differ from client-go's scheme's groups:\n got %q\nwant %q", got, exp)
	}
}
