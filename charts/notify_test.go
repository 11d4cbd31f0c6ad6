package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/access"
	"github.com/restart-controller/restart-controller/internal/config"
)

// TestRBACReadsSinkSecrets: notification sinks in config.notifications
// are rendered into the config file, and the Role in the release namespace
// grants get on each sink's URL Secret by name, exactly what the controller
// says it needs there (access.Needs), and nothing on other Secrets.
func TestRBACReadsSinkSecrets(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`
config:
  notifications:
    sinks:
      - {name: chat, type: slack, urlSecret: {name: notify-urls, key: slack}, send: [hold]}
      - {name: audit, type: webhook, urlSecret: {name: notify-urls, key: audit}}
      - {name: ops, type: teams, urlSecret: {name: teams-url, key: url}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := render(t, "-f", values)
	text, err := yamlText(renderedConfig(t, objs))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sinks) != 3 {
		t.Fatalf("rendered config has %d sinks, want 3", len(cfg.Sinks))
	}
	cfg.Settings.LeaseNamespace, cfg.Settings.LeaderElect = namespace, true
	var want []string
	for _, n := range access.Needs(cfg) {
		if n.Namespace != namespace {
			continue
		}
		for _, v := range n.Verbs {
			key := fmt.Sprintf("%s/%s:%s", n.Resource.Group, n.Resource.Resource, v)
			if n.Name != "" && v != "create" {
				key += "@" + n.Name
			}
			want = append(want, key)
		}
	}
	sort.Strings(want)
	want = slices.Compact(want)
	var role rbacv1.Role
	if err := only(t, objs, "Role").Into(&role); err != nil {
		t.Fatal(err)
	}
	if got := namedGrants(role.Rules); !slices.Equal(got, want) {
		t.Errorf("the Role in the release namespace grants\n  %v\nthe controller needs\n  %v", got, want)
	}
	for _, name := range []string{"notify-urls", "teams-url"} {
		if !slices.Contains(want, "/secrets:get@"+name) {
			t.Errorf("access.Needs does not ask to get Secret %s: %v", name, want)
		}
	}
}

// namedGrants lists "group/resource:verb", with "@name" when the rule is
// limited to names.
func namedGrants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						key := fmt.Sprintf("%s/%s:%s", g, res, v)
						if n != "" {
							key += "@" + n
						}
						out = append(out, key)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func yamlText(cfg map[string]interface{}) ([]byte, error) { return yaml.Marshal(cfg) }
