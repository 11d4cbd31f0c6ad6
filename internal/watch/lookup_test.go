package watch

import (
	"testing"
)

// The API server's own groups are built in, those of CRDs are not.
func TestBuiltinGroup(t *testing.T) {
	for group, want := range map[string]bool{
		"": true, "apps": true, "batch": true, "internal.apiserver.k8s.io": true, "storagemigration.k8s.io": true,
		"apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
		"argoproj.io": false, "secrets-store.csi.x-k8s.io": false, "example.com": false,
	} {
		if got := BuiltinGroup(group); got != want {
			t.Errorf("BuiltinGroup(%q) = %v, want %v", group, got, want)
		}
	}
}
