package migrate

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/testfixture"
)

// strategies lists, for each kind of a migrated config, its strategy and
// the one each byAnnotation value picks: "deployments.apps: envVar".
func strategies(t *testing.T, file []byte) []string {
	t.Helper()
	cfg, err := config.Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range cfg.Workloads {
		line := w.GVR.GroupResource().String() + ": " + string(w.Restart.Strategy.Name)
		var values []string
		for v, s := range w.Restart.ByAnnotation {
			values = append(values, v+"="+string(s.Name))
		}
		slices.Sort(values)
		if len(values) > 0 {
			line += " (" + strings.Join(values, ", ") + ")"
		}
		out = append(out, line)
	}
	return out
}

// --reload-strategy env-vars restarts every kind that a pod-template
// annotation restarts by envVar instead, picked by annotation or not;
// annotations, or no strategy at all (Reloader's default is env-vars),
// keeps the template annotation; anything else Reloader refuses.
func TestConfigReloadStrategy(t *testing.T) {
	annotation := []string{
		"deployments.apps: templateAnnotation", "statefulsets.apps: templateAnnotation", "daemonsets.apps: templateAnnotation",
		"rollouts.argoproj.io: templateAnnotation (restart=timestampAt, rollout=templateAnnotation)",
		"cronjobs.batch: runNow", "jobs.batch: recreate", "deploymentconfigs.apps.openshift.io: templateAnnotation",
	}
	for _, tc := range []struct {
		strategy string
		want     []string
		finding  string
		lost     bool
	}{
		{"env-vars", []string{
			"deployments.apps: envVar", "statefulsets.apps: envVar", "daemonsets.apps: envVar",
			"rollouts.argoproj.io: envVar (restart=timestampAt, rollout=envVar)",
			"cronjobs.batch: runNow", "jobs.batch: recreate", "deploymentconfigs.apps.openshift.io: envVar",
		}, "--reload-strategy=env-vars: a restart sets STAKATER_<NAME>_<KIND>", false},
		{"annotations", annotation, "--reload-strategy=annotations: a restart writes com.xing.deployment-restart.timestamp", false},
		{"", annotation, "--reload-strategy: not given: Reloader's default is env-vars, written here as the controller's default", false},
		{"rolling", annotation, `--reload-strategy: "rolling" is neither env-vars nor annotations`, true},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			o := DefaultOptions()
			o.IsArgoRollouts, o.IsOpenshift, o.ReloadStrategy = true, true, tc.strategy
			_, res := migrated(t, o, false)
			if got := strategies(t, res.File); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("strategies\n got %v\nwant %v", got, tc.want)
			}
			var found bool
			for _, f := range res.Findings {
				found = found || strings.HasPrefix(f.String(), tc.finding) && f.Lost == tc.lost
			}
			if !found {
				t.Errorf("no finding %q (lost %v) in %v", tc.finding, tc.lost, res.Findings)
			}
			if !bytes.Contains(res.File, []byte("#   "+tc.finding)) {
				t.Errorf("the file's header does not say %q", tc.finding)
			}
		})
	}
	// Helm: reloader.reloadStrategy; "default" is not giving one.
	for value, want := range map[string]string{"env-vars": "env-vars", "annotations": "annotations", "default": ""} {
		v := Values{}
		if err := v.Set("reloader.reloadStrategy=" + value); err != nil {
			t.Fatal(err)
		}
		o, err := FromHelmValues(v, "rel")
		if err != nil || o.ReloadStrategy != want {
			t.Errorf("reloader.reloadStrategy=%s: %q (%v), want %q", value, o.ReloadStrategy, err, want)
		}
	}
}

// DeploymentConfigs are written as examples/config.yaml shows them when
// Reloader restarted them: Helm's reloader.isOpenshift, or migrate's
// --openshift (Reloader had no flag: it found OpenShift by itself).
func TestConfigDeploymentConfigs(t *testing.T) {
	dc := schema.GroupResource{Group: "apps.openshift.io", Resource: "deploymentconfigs"}
	kindOf := func(file []byte) map[string]any {
		t.Helper()
		tree := map[string]any{}
		if err := yaml.Unmarshal(file, &tree); err != nil {
			t.Fatal(err)
		}
		for _, e := range entries(tree["workloads"]) {
			if e["group"] == dc.Group && e["resource"] == dc.Resource {
				return e
			}
		}
		return nil
	}
	if _, res := migrated(t, DefaultOptions(), false); kindOf(res.File) != nil {
		t.Error("DeploymentConfigs without reloader.isOpenshift")
	}
	var example []any
	if err := yaml.Unmarshal([]byte(testfixture.DeploymentConfigKind(t)), &example); err != nil {
		t.Fatal(err)
	}
	v := Values{}
	if err := v.Set("reloader.isOpenshift=true"); err != nil {
		t.Fatal(err)
	}
	o, err := FromHelmValues(v, "rel")
	if err != nil || !o.IsOpenshift {
		t.Fatalf("reloader.isOpenshift: %+v, %v", o, err)
	}
	_, res := migrated(t, o, false)
	if got := kindOf(res.File); !reflect.DeepEqual(got, example[0]) {
		t.Errorf("the DeploymentConfig kind\n got %v\nwant %v (examples/config.yaml)", got, example[0])
	}
	if !bytes.Contains(res.File, []byte("#   DeploymentConfigs: restarted")) {
		t.Error("the header does not say DeploymentConfigs are restarted")
	}

	var stdout, stderr bytes.Buffer
	if code := Main("migrate", []string{"--openshift", "--", "--reload-strategy=env-vars"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := kindOf(stdout.Bytes())
	if got == nil || got["restart"].(map[string]any)["strategy"] != "envVar" {
		t.Errorf("--openshift with env-vars: %v", got)
	}
}
