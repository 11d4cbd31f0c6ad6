package charts

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestRBACFollowsCSISources: the CSI driver's source kind (lifecycle
// updatesOnly) added to config.sources is granted list and watch, as any
// source kind, and nothing more.
func TestRBACFollowsCSISources(t *testing.T) {
	_, root := helm(t)
	cfg := map[string]interface{}{}
	raw, err := os.ReadFile(filepath.Join(root, "examples", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	sources := append(cfg["sources"].([]interface{}), map[string]interface{}{
		"name": "secretproviderclasspodstatus", "group": "secrets-store.csi.x-k8s.io", "version": "v1",
		"resource": "secretproviderclasspodstatuses", "lifecycle": "updatesOnly", "nameFrom": "status.secretProviderClassName",
		"items": map[string]interface{}{"path": "status.objects[*]", "key": "id", "value": "version"},
	})
	references := append(cfg["references"].([]interface{}), map[string]interface{}{
		"source": "secretproviderclasspodstatus", "from": []interface{}{"volumes[*].csi"}, "name": "volumeAttributes.secretProviderClass",
	})
	values := filepath.Join(t.TempDir(), "values.yaml")
	out, _ := yaml.Marshal(map[string]interface{}{"config": map[string]interface{}{"sources": sources, "references": references}})
	if err := os.WriteFile(values, out, 0o644); err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := only(t, render(t, "-f", values), "ClusterRole").Into(&cr); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range grants(cr.Rules) {
		if verb, ok := strings.CutPrefix(g, "secrets-store.csi.x-k8s.io/secretproviderclasspodstatuses:"); ok {
			got = append(got, verb)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"list", "watch"}) {
		t.Errorf("grants on secretproviderclasspodstatuses: %v, want list, watch", got)
	}
}
