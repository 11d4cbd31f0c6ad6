package charts

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
)

var update = flag.Bool("update", false, "rewrite what these tests generate: the config block of values.yaml (from examples/config.yaml), values.schema.json (from the config types) and the examples in docs/operations.md")

const (
	release   = "restart-controller"
	namespace = "restart-controller"
)

// nonDefault is the other install the tests render: namespaced RBAC for two
// namespaces, one replica without leader election, every optional object on.
var nonDefault = []string{
	"--set", "rbac.scope=namespaced",
	"--set", "rbac.namespaces={team-a,team-b}",
	"--set", "replicaCount=1",
	"--set", "leaderElection.enabled=false",
	"--set", "networkPolicy.enabled=true",
	"--set", "serviceMonitor.enabled=true",
	"--set", "prometheusRule.enabled=true",
	"--set", "grafanaDashboard.enabled=true",
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

func helm(t *testing.T) (helm, root string) {
	t.Helper()
	helmOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		helmPath, helmErr = Helm(ctx)
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return helmPath, root
}

func render(t *testing.T, args ...string) []Object {
	t.Helper()
	h, root := helm(t)
	objs, err := Render(context.Background(), h, Chart(root), release, namespace, args...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func kinds(objs []Object) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.Kind()]++
	}
	return n
}

func only(t *testing.T, objs []Object, kind string) Object {
	t.Helper()
	var found []Object
	for _, o := range objs {
		if o.Kind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s objects rendered, want 1", len(found), kind)
	}
	return found[0]
}

func TestLint(t *testing.T) {
	h, root := helm(t)
	for name, args := range map[string][]string{"default": nil, "non-default": nonDefault} {
		out, err := exec.Command(h, append([]string{"lint", "--strict", Chart(root)}, args...)...).CombinedOutput()
		if err != nil {
			t.Errorf("helm lint --strict (%s values): %v\n%s", name, err, out)
		}
	}
}

func TestRenderDefault(t *testing.T) {
	objs := render(t)
	want := map[string]int{
		"ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
		"ConfigMap": 1, "Deployment": 1, "PodDisruptionBudget": 1, "Service": 1,
	}
	if got := kinds(objs); !reflect.DeepEqual(got, want) {
		t.Errorf("rendered %v, want %v", got, want)
	}
	t.Logf("default values render %d objects: %v", len(objs), kinds(objs))
	for _, o := range objs {
		cluster := o.Kind() == "ClusterRole" || o.Kind() == "ClusterRoleBinding"
		if !cluster && o.Namespace() != namespace {
			t.Errorf("%s %s in namespace %q, want the release namespace", o.Kind(), o.Name(), o.Namespace())
		}
	}

	var d appsv1.Deployment
	if err := only(t, objs, "Deployment").Into(&d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 2 || !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
		t.Errorf("want 2 replicas with --leader-elect, got %d %q", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "ghcr.io/restart-controller/restart-controller:latest" {
		t.Errorf("image %q, want the one manifests/kustomization.yaml installs", img)
	}

	var pdb policyv1.PodDisruptionBudget
	if err := only(t, objs, "PodDisruptionBudget").Into(&pdb); err != nil {
		t.Fatal(err)
	}
	if pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow {
		t.Error("the PDB must let unhealthy pods be evicted (unhealthyPodEvictionPolicy: AlwaysAllow)")
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	if !reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels) {
		t.Errorf("PDB selects %v, the Deployment %v", pdb.Spec.Selector.MatchLabels, d.Spec.Selector.MatchLabels)
	}
}

func TestRenderNonDefault(t *testing.T) {
	objs := render(t, nonDefault...)
	want := map[string]int{
		"ServiceAccount": 1, "Role": 3, "RoleBinding": 3, "ConfigMap": 2, "Deployment": 1, "Service": 1,
		"NetworkPolicy": 1, "ServiceMonitor": 1, "PrometheusRule": 1,
	}
	if got := kinds(objs); !reflect.DeepEqual(got, want) {
		t.Errorf("rendered %v, want %v", got, want)
	}
	t.Logf("non-default values render %d objects: %v", len(objs), kinds(objs))

	var roleNamespaces, bindingNamespaces []string
	for _, o := range objs {
		switch o.Kind() {
		case "Role":
			roleNamespaces = append(roleNamespaces, o.Namespace())
		case "RoleBinding":
			bindingNamespaces = append(bindingNamespaces, o.Namespace())
			var rb rbacv1.RoleBinding
			if err := o.Into(&rb); err != nil {
				t.Fatal(err)
			}
			if s := rb.Subjects; len(s) != 1 || s[0].Name != release || s[0].Namespace != namespace {
				t.Errorf("RoleBinding in %s binds %+v, want the chart's ServiceAccount", o.Namespace(), s)
			}
		}
	}
	sort.Strings(roleNamespaces)
	sort.Strings(bindingNamespaces)
	// One per watched namespace, and the controller's own (the checksum key;
	// no Lease without leader election).
	if w := []string{namespace, "team-a", "team-b"}; !slices.Equal(roleNamespaces, w) || !slices.Equal(bindingNamespaces, w) {
		t.Errorf("Roles in %v, RoleBindings in %v, want one each in %v", roleNamespaces, bindingNamespaces, w)
	}

	var d appsv1.Deployment
	if err := only(t, objs, "Deployment").Into(&d); err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 1 || slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
		t.Errorf("want 1 replica without --leader-elect, got %d %q", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Args)
	}
	if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("strategy %s, want Recreate: without leader election two pods must never overlap", d.Spec.Strategy.Type)
	}

	cfg := renderedConfig(t, objs)
	if got := cfg["namespaces"]; !reflect.DeepEqual(got, []interface{}{"team-a", "team-b"}) {
		t.Errorf("config namespaces %v, want the namespaces the Roles are in", got)
	}
}

func TestRenderRejects(t *testing.T) {
	h, root := helm(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "leaderElection.enabled=false"}, "replicaCount > 1 needs leaderElection.enabled"},
		{[]string{"--set", "rbac.scope=namespaced"}, "needs rbac.namespaces"},
		{[]string{"--set", "rbac.scope=everywhere"}, "rbac.scope must be cluster or namespaced"},
		{[]string{"--set", "serviceMonitor.enabled=true", "--set", "service.enabled=false"}, "needs service.enabled"},
	} {
		_, err := Render(context.Background(), h, Chart(root), release, namespace, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.args, err, c.want)
		}
	}
}

// renderedConfig returns the config file of the rendered ConfigMap, after
// checking the controller's own loader accepts it.
func renderedConfig(t *testing.T, objs []Object) map[string]interface{} {
	t.Helper()
	var text string
	for _, o := range objs {
		if o.Kind() == "ConfigMap" && strings.HasSuffix(o.Name(), "-config") {
			data, _ := o["data"].(map[string]interface{})
			text, _ = data["config.yaml"].(string)
		}
	}
	if text == "" {
		t.Fatal("no config ConfigMap with config.yaml rendered")
	}
	if _, err := config.Parse([]byte(text)); err != nil {
		t.Fatalf("the rendered config does not load: %v\n%s", err, text)
	}
	cfg := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestValuesConfig keeps the chart's default config equal to
// examples/config.yaml: the text in values.yaml (comments included) and the
// ConfigMap rendered from it.
func TestValuesConfig(t *testing.T) {
	_, root := helm(t)
	example, err := os.ReadFile(filepath.Join(root, "examples", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	valuesPath := filepath.Join(Chart(root), "values.yaml")
	values, err := os.ReadFile(valuesPath)
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := bytes.Cut(values, []byte("\nconfig:\n"))
	if !ok {
		t.Fatal("values.yaml has no top-level config: (it must be the last key)")
	}
	var indented bytes.Buffer
	for _, line := range strings.SplitAfter(string(example), "\n") {
		if strings.TrimSpace(line) != "" {
			indented.WriteString("  ")
		}
		indented.WriteString(line)
	}
	want := append(append(head, []byte("\nconfig:\n")...), indented.Bytes()...)
	if !bytes.Equal(values, want) {
		if *update {
			if err := os.WriteFile(valuesPath, want, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log("rewrote the config block of", valuesPath)
		} else {
			t.Error("values.yaml's config block differs from examples/config.yaml; run: go test ./charts -run TestValuesConfig -update")
		}
	}

	got := renderedConfig(t, render(t))
	wantCfg := map[string]interface{}{}
	if err := yaml.Unmarshal(example, &wantCfg); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantCfg) {
		g, _ := yaml.Marshal(got)
		w, _ := yaml.Marshal(wantCfg)
		t.Errorf("rendered default config differs from examples/config.yaml:\n--- rendered\n%s\n--- example\n%s", g, w)
	}
}

// grants lists "group/resource:verb" for every combination the rules allow.
func grants(rules []rbacv1.PolicyRule) []string {
	set := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					set[fmt.Sprintf("%s/%s:%s", g, res, v)] = true
				}
			}
		}
	}
	var out []string
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// manifestRoles reads the ClusterRole and the leader election Role of manifests/rbac.yaml.
func manifestRoles(t *testing.T, root string) (cluster, leader []rbacv1.PolicyRule) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "manifests", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.Kind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := o.Into(&r); err != nil {
				t.Fatal(err)
			}
			cluster = r.Rules
		case "Role":
			var r rbacv1.Role
			if err := o.Into(&r); err != nil {
				t.Fatal(err)
			}
			leader = r.Rules
		}
	}
	if cluster == nil || leader == nil {
		t.Fatal("manifests/rbac.yaml lacks the ClusterRole or the leader election Role")
	}
	return cluster, leader
}

// TestRBACMatchesManifests: the chart generates its rules from the config's
// sources and workloads; with the default config they must grant exactly
// what manifests/rbac.yaml grants, cluster-wide or in each namespace.
func TestRBACMatchesManifests(t *testing.T) {
	_, root := helm(t)
	wantCluster, wantLeader := manifestRoles(t, root)

	objs := render(t)
	var cr rbacv1.ClusterRole
	if err := only(t, objs, "ClusterRole").Into(&cr); err != nil {
		t.Fatal(err)
	}
	if g, w := grants(cr.Rules), grants(wantCluster); !slices.Equal(g, w) {
		t.Errorf("chart ClusterRole grants\n  %v\nmanifests/rbac.yaml grants\n  %v", g, w)
	}
	var leader rbacv1.Role
	if err := only(t, objs, "Role").Into(&leader); err != nil {
		t.Fatal(err)
	}
	if g, w := grants(leader.Rules), grants(wantLeader); !slices.Equal(g, w) {
		t.Errorf("chart leader election Role grants %v, manifests/rbac.yaml %v", g, w)
	}

	for _, o := range render(t, nonDefault...) {
		if o.Kind() != "Role" || o.Namespace() == namespace {
			continue // the controller's own namespace: the checksum key
		}
		var r rbacv1.Role
		if err := o.Into(&r); err != nil {
			t.Fatal(err)
		}
		if g, w := grants(r.Rules), grants(wantCluster); !slices.Equal(g, w) {
			t.Errorf("Role in %s grants %v, want the ClusterRole's %v", o.Namespace(), g, w)
		}
	}
}

// TestRBACFollowsConfig: a workload kind added to config.workloads is granted.
func TestRBACFollowsConfig(t *testing.T) {
	_, root := helm(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	cfg := map[string]interface{}{}
	raw, err := os.ReadFile(filepath.Join(root, "examples", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["workloads"] = append(cfg["workloads"].([]interface{}), map[string]interface{}{
		"group": "batch", "version": "v1", "resource": "cronjobs", "podTemplatePath": "spec.jobTemplate.spec.template",
	})
	out, _ := yaml.Marshal(map[string]interface{}{"config": map[string]interface{}{"workloads": cfg["workloads"]}})
	if err := os.WriteFile(values, out, 0o644); err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := only(t, render(t, "-f", values), "ClusterRole").Into(&cr); err != nil {
		t.Fatal(err)
	}
	g := grants(cr.Rules)
	for _, v := range []string{"list", "watch", "patch"} {
		if !slices.Contains(g, "batch/cronjobs:"+v) {
			t.Errorf("adding cronjobs to config.workloads did not grant %s on them: %v", v, g)
		}
	}
}

// TestDeploymentMatchesManifests: with default values the chart's pod is the
// one manifests/deployment.yaml runs, except for labels and the image.
func TestDeploymentMatchesManifests(t *testing.T) {
	_, root := helm(t)
	raw, err := os.ReadFile(filepath.Join(root, "manifests", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want, got appsv1.Deployment
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatal(err)
	}
	if err := only(t, render(t), "Deployment").Into(&got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != *want.Spec.Replicas || !reflect.DeepEqual(got.Spec.Strategy, want.Spec.Strategy) {
		t.Errorf("replicas/strategy %d %+v, manifests %d %+v", *got.Spec.Replicas, got.Spec.Strategy,
			*want.Spec.Replicas, want.Spec.Strategy)
	}
	gp, wp := got.Spec.Template.Spec, want.Spec.Template.Spec
	gc, wc := gp.Containers[0], wp.Containers[0]
	gc.Image, wc.Image, gc.ImagePullPolicy = "", "", ""
	if !reflect.DeepEqual(gc, wc) {
		g, _ := yaml.Marshal(gc)
		w, _ := yaml.Marshal(wc)
		t.Errorf("container differs from manifests/deployment.yaml's:\n--- chart\n%s--- manifests\n%s", g, w)
	}
	gp.Containers, wp.Containers = nil, nil
	gp.Affinity, wp.Affinity = nil, nil // the chart's selector adds app.kubernetes.io/instance
	if !reflect.DeepEqual(gp, wp) {
		g, _ := yaml.Marshal(gp)
		w, _ := yaml.Marshal(wp)
		t.Errorf("pod spec differs from manifests/deployment.yaml's:\n--- chart\n%s--- manifests\n%s", g, w)
	}
}

func readYAML(t *testing.T, path string) map[string]interface{} {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]interface{}{}
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// TestMonitoringMatchesManifests: the alerts, the dashboard and the scrape
// settings are the same in the chart and in manifests/monitoring/.
func TestMonitoringMatchesManifests(t *testing.T) {
	_, root := helm(t)
	files := filepath.Join(Chart(root), "files")
	mon := filepath.Join(root, "manifests", "monitoring")

	dashboard, err := os.ReadFile(filepath.Join(files, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if copied, err := os.ReadFile(filepath.Join(mon, "dashboard.json")); err != nil || !bytes.Equal(copied, dashboard) {
		t.Errorf("manifests/monitoring/dashboard.json differs from the chart's (%v); copy it: "+
			"cp charts/restart-controller/files/dashboard.json manifests/monitoring/", err)
	}
	rules := readYAML(t, filepath.Join(files, "prometheus-rules.yaml"))
	if spec := readYAML(t, filepath.Join(mon, "prometheusrule.yaml"))["spec"]; !reflect.DeepEqual(spec, map[string]interface{}(rules)) {
		t.Error("the spec of manifests/monitoring/prometheusrule.yaml differs from charts/restart-controller/files/prometheus-rules.yaml")
	}

	objs := render(t, nonDefault...)
	if spec := only(t, objs, "PrometheusRule")["spec"]; !reflect.DeepEqual(spec, map[string]interface{}(rules)) {
		t.Error("the chart's PrometheusRule spec differs from files/prometheus-rules.yaml")
	}
	var dashboards int
	for _, o := range objs {
		if o.Kind() == "ConfigMap" && strings.HasSuffix(o.Name(), "-dashboard") {
			dashboards++
			data, _ := o["data"].(map[string]interface{})
			if got, _ := data["restart-controller.json"].(string); strings.TrimSpace(got) != strings.TrimSpace(string(dashboard)) {
				t.Error("the chart's dashboard ConfigMap does not hold files/dashboard.json")
			}
			labels, _ := o["metadata"].(map[string]interface{})["labels"].(map[string]interface{})
			if labels["grafana_dashboard"] != "1" {
				t.Errorf("dashboard ConfigMap labels %v lack grafana_dashboard: \"1\"", labels)
			}
		}
	}
	if dashboards != 1 {
		t.Errorf("%d dashboard ConfigMaps rendered, want 1", dashboards)
	}
	endpoints := func(o map[string]interface{}) interface{} {
		spec, _ := o["spec"].(map[string]interface{})
		return spec["endpoints"]
	}
	if got, want := endpoints(only(t, objs, "ServiceMonitor")), endpoints(readYAML(t, filepath.Join(mon, "servicemonitor.yaml"))); !reflect.DeepEqual(got, want) {
		t.Errorf("ServiceMonitor endpoints: chart %v, manifests/monitoring %v", got, want)
	}
}

// TestPresetsAsValues: a preset's keys under config: in the values give the
// controller the preset's configuration, as the README says.
func TestPresetsAsValues(t *testing.T) {
	_, root := helm(t)
	for _, name := range []string{"reloader", "wave"} {
		raw, err := os.ReadFile(filepath.Join(root, "examples", "presets", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		preset := map[string]interface{}{}
		if err := yaml.Unmarshal(raw, &preset); err != nil {
			t.Fatal(err)
		}
		out, _ := yaml.Marshal(map[string]interface{}{"config": preset})
		values := filepath.Join(t.TempDir(), name+"-values.yaml")
		if err := os.WriteFile(values, out, 0o644); err != nil {
			t.Fatal(err)
		}
		rendered, _ := yaml.Marshal(renderedConfig(t, render(t, "-f", values)))
		got, err := config.Parse(rendered)
		if err != nil {
			t.Fatal(err)
		}
		want, err := config.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.OptIns, want.OptIns) || !reflect.DeepEqual(got.SourceLists, want.SourceLists) ||
			got.Annotations != want.Annotations || len(want.OptIns) == 0 {
			t.Errorf("%s: the chart's config has opt-ins %+v, lists %+v, annotations %+v; the preset %+v, %+v, %+v",
				name, got.OptIns, got.SourceLists, got.Annotations, want.OptIns, want.SourceLists, want.Annotations)
		}
	}
}
