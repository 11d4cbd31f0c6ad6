package charts

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/restart-controller/restart-controller/internal/access"
	"github.com/restart-controller/restart-controller/internal/config"
)

// TestRBACReadsNamespacesForASelector: config.namespaceSelector makes the
// controller list and watch Namespaces (access.Needs), so the chart grants
// exactly that in a ClusterRole, in either RBAC scope, and grants nothing
// on Namespaces without it.
func TestRBACReadsNamespacesForASelector(t *testing.T) {
	rule := "/namespaces:list"
	cfg := &config.Config{NamespaceSelector: nil}
	for _, n := range access.Needs(cfg) {
		if n.Resource.Resource == "namespaces" {
			t.Fatalf("without a selector access.Needs asks for namespaces: %v", n)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{"cluster, no selector", nil, false},
		{"cluster, selector", []string{"--set", "config.namespaceSelector=env=prod"}, true},
		{"namespaced, selector", append(append([]string{}, nonDefault...), "--set", "config.namespaceSelector=env=prod"), true},
		{"namespaced, no selector", nonDefault, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, o := range render(t, tc.args...) {
				if o.Kind() != "ClusterRole" {
					continue
				}
				var role rbacv1.ClusterRole
				if err := o.Into(&role); err != nil {
					t.Fatal(err)
				}
				got = append(got, namedGrants(role.Rules)...)
			}
			has := slices.Contains(got, rule) && slices.Contains(got, "/namespaces:watch")
			if has != tc.want {
				t.Errorf("ClusterRoles grant %v; want namespaces list and watch: %v", got, tc.want)
			}
			if slices.Contains(got, "/namespaces:get") {
				t.Errorf("ClusterRoles grant get on namespaces, which the controller never uses: %v", got)
			}
		})
	}
}
