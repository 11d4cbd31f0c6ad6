package manifests

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
)

// grantsOf lists "group/resource:verb" (with "@name" when limited to names)
// for every combination the rules allow.
func grantsOf(rules []rbacv1.PolicyRule) []string {
	set := map[string]bool{}
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
						set[key] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// needsOf lists the grants the controller needs (config.Needs): those of all
// namespaces, and those of its own namespace.
func needsOf(needs []config.Need) (cluster, own []string) {
	for _, n := range needs {
		for _, v := range n.Verbs {
			key := fmt.Sprintf("%s/%s:%s", n.Resource.Group, n.Resource.Resource, v)
			if n.Name != "" && v != "create" {
				key += "@" + n.Name
			}
			if n.Namespace == "" {
				cluster = append(cluster, key)
			} else {
				own = append(own, key)
			}
		}
	}
	sort.Strings(cluster)
	sort.Strings(own)
	return slices.Compact(cluster), slices.Compact(own)
}

// manifests/rbac.yaml grants exactly what the controller says it needs with
// examples/config.yaml and leader election on (as deployment.yaml runs it):
// the verbs are written once, in internal/config, and nothing more is
// granted here.
func TestRBACIsWhatTheControllerNeeds(t *testing.T) {
	raw, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Settings.LeaderElect = true
	cfg.Settings.LeaseNamespace = "restart-controller"
	wantCluster, wantOwn := needsOf(cfg.Needs())

	rbac, err := os.ReadFile("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cluster, own []rbacv1.PolicyRule
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rbac), 4096)
	for {
		var obj struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := dec.Decode(&obj); err != nil {
			break
		}
		switch obj.Kind {
		case "ClusterRole":
			cluster = append(cluster, obj.Rules...)
		case "Role":
			own = append(own, obj.Rules...)
		}
	}
	if got := grantsOf(cluster); !slices.Equal(got, wantCluster) {
		t.Errorf("rbac.yaml's ClusterRole grants\n  %v\nthe controller needs\n  %v", got, wantCluster)
	}
	if got := grantsOf(own); !slices.Equal(got, wantOwn) {
		t.Errorf("rbac.yaml's Role grants\n  %v\nthe controller needs in its own namespace\n  %v", got, wantOwn)
	}
}

// The README's summary of the ClusterRole names the verbs the controller
// needs.
func TestREADMENamesTheVerbs(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	quote := func(verbs []string) string {
		q := make([]string, len(verbs))
		for i, v := range verbs {
			q[i] = "`" + v + "`"
		}
		return strings.Join(q, ", ")
	}
	want := fmt.Sprintf("(sources: %s; workload kinds: %s; events: %s)",
		quote(config.SourceVerbs()), quote(config.WorkloadVerbs()), quote(config.EventVerbs()))
	if !strings.Contains(strings.Join(strings.Fields(string(raw)), " "), want) {
		t.Errorf("README.md does not summarise the ClusterRole as %q", want)
	}
	runNow := fmt.Sprintf("(%s on CronJobs; %s on Jobs)", quote(config.ReadWholeVerbs()), quote(config.RunNowVerbs()))
	if !strings.Contains(strings.Join(strings.Fields(string(raw)), " "), runNow) {
		t.Errorf("README.md does not name the verbs of the CronJobs' runNow strategy as %q", runNow)
	}
}
