package migrate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
)

func noEnv(string) (string, bool) { return "", false }

func TestFromFlags(t *testing.T) {
	o, err := FromFlags([]string{
		"--auto-reload-all", "--namespaces-to-ignore=a,b", "--namespaces-to-ignore", "c",
		"--is-Argo-Rollouts=true", "--reload-on-delete=true", "--reload-on-create=yes",
		"--reload-strategy", "annotations", "--enable-ha=false", "--auto-annotation=x/auto",
		"--resource-label-selector=\"reload=true\"", "--webhook-url=https://hooks.example/T0/B0/secret",
	}, func(k string) (string, bool) {
		return map[string]string{"KUBERNETES_NAMESPACE": "ns", "METRICS_COUNT_BY_NAMESPACE": "enabled"}[k], k != "ALERT_ON_RELOAD"
	})
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultOptions()
	want.AutoReloadAll, want.IsArgoRollouts, want.ReloadOnDelete = true, true, true
	want.NamespacesToIgnore = []string{"a", "b", "c"}
	want.ResourceSelectors = []string{"reload=true"}
	want.ReloadStrategy = "annotations"
	want.Annotations.Auto = "x/auto"
	want.Namespaces = []string{"ns"}
	want.MetricsByNamespace, want.WebhookURLSet = true, true
	if !reflect.DeepEqual(o, want) {
		t.Errorf("got  %+v\nwant %+v", o, want)
	}
	// --namespaces wins over KUBERNETES_NAMESPACE, as in Reloader.
	o, _ = FromFlags([]string{"--namespaces=x,y"}, func(k string) (string, bool) { return "ns", k == "KUBERNETES_NAMESPACE" })
	if !slices.Equal(o.Namespaces, []string{"x", "y"}) {
		t.Errorf("namespaces %v, want [x y]", o.Namespaces)
	}
	for _, bad := range [][]string{{"--no-such-flag"}, {"auto-reload-all"}, {"--reload-strategy"}, {"--auto-reload-all=maybe"}} {
		if _, err := FromFlags(bad, noEnv); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestValuesSet(t *testing.T) {
	v := Values{}
	for _, s := range []string{"reloader.autoReloadAll=true,reloader.deployment.replicas=2", `reloader.ignoreNamespaces=a\,b`,
		"reloader.namespaces={x,y}", "reloader.logLevel=debug", "reloader.watchGlobally=false"} {
		if err := v.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	want := Values{"reloader": map[string]any{
		"autoReloadAll": true, "deployment": map[string]any{"replicas": int64(2)}, "ignoreNamespaces": "a,b",
		"namespaces": []any{"x", "y"}, "logLevel": "debug", "watchGlobally": false,
	}}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got  %#v\nwant %#v", v, want)
	}
	if err := v.Set("novalue"); err == nil {
		t.Error("a --set without = was accepted")
	}
}

func TestFromHelmValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string // a values file
		check  func(t *testing.T, o Options)
	}{
		{"defaults: Reloader's flag defaults", "{}", func(t *testing.T, o Options) {
			if !reflect.DeepEqual(o, DefaultOptions()) {
				t.Errorf("%+v", o)
			}
		}},
		{"watchGlobally false: the release's namespace only", "reloader: {watchGlobally: false, ignoreNamespaces: x, namespaceSelector: a=b}", func(t *testing.T, o Options) {
			if !slices.Equal(o.Namespaces, []string{"rel"}) || o.NamespacesToIgnore != nil || o.NamespaceSelectors != nil {
				t.Errorf("%+v", o)
			}
		}},
		{"namespaces: with the release's, sorted", "reloader: {namespaces: [zz, aa, rel]}", func(t *testing.T, o Options) {
			if !slices.Equal(o.Namespaces, []string{"aa", "rel", "zz"}) {
				t.Errorf("%v", o.Namespaces)
			}
		}},
		{"global: ignore and select namespaces", "reloader: {ignoreNamespaces: 'x,y', namespaceSelector: 'a=b'}", func(t *testing.T, o Options) {
			if !slices.Equal(o.NamespacesToIgnore, []string{"x", "y"}) || !slices.Equal(o.NamespaceSelectors, []string{"a=b"}) {
				t.Errorf("%+v", o)
			}
		}},
		{"kinds, strategy, HA by replicas", "reloader: {ignoreSecrets: true, ignoreJobs: true, ignoreCronJobs: true, reloadStrategy: annotations, deployment: {replicas: 3}}", func(t *testing.T, o Options) {
			if !slices.Equal(o.ResourcesToIgnore, []string{"secrets"}) || !slices.Equal(o.WorkloadTypesToIgnore, []string{"jobs", "cronjobs"}) ||
				o.ReloadStrategy != "annotations" || !o.EnableHA {
				t.Errorf("%+v", o)
			}
		}},
		{"alerts and metrics from the environment values", "reloader: {enableMetricsByNamespace: true, deployment: {env: {open: {ALERT_ON_RELOAD: 'true', ALERT_SINK: slack}}}}", func(t *testing.T, o Options) {
			if !o.AlertOnReload || o.AlertSink != "slack" || !o.MetricsByNamespace {
				t.Errorf("%+v", o)
			}
		}},
		{"custom annotations", "reloader: {custom_annotations: {auto: my/auto, ignore: my/ignore}}", func(t *testing.T, o Options) {
			if o.Annotations.Auto != "my/auto" || o.Annotations.Ignore != "my/ignore" || o.Annotations.Secret != DefaultOptions().Annotations.Secret {
				t.Errorf("%+v", o.Annotations)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Values{}
			if err := v.ReadValues([]byte(tc.values)); err != nil {
				t.Fatal(err)
			}
			o, err := FromHelmValues(v, "rel")
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

// migrated runs Config and returns the file as a tree, having checked that
// it parses as a config file.
func migrated(t *testing.T, o Options, pace bool) (map[string]any, Result) {
	t.Helper()
	res, err := Config(o, pace)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(res.File); err != nil {
		t.Fatalf("the migrated config does not parse: %v", err)
	}
	tree := map[string]any{}
	if err := yaml.Unmarshal(res.File, &tree); err != nil {
		t.Fatal(err)
	}
	return tree, res
}

func names(list any, field string) []string {
	var out []string
	for _, e := range entries(list) {
		out = append(out, e[field].(string))
	}
	return out
}

func TestConfig(t *testing.T) {
	o := DefaultOptions()
	o.AutoReloadAll = true
	o.Namespaces = []string{"a", "b"}
	o.ResourcesToIgnore = []string{"secrets"}
	o.Annotations.ConfigMap = "my/configmaps"
	o.EnableHA = true
	o.WebhookURLSet = true
	tree, res := migrated(t, o, false)
	if tree["optInAll"] != true || !reflect.DeepEqual(tree["namespaces"], []any{"a", "b"}) {
		t.Errorf("optInAll %v, namespaces %v", tree["optInAll"], tree["namespaces"])
	}
	if got := names(tree["sources"], "name"); !slices.Equal(got, []string{"configmap"}) {
		t.Errorf("sources %v, want configmap only", got)
	}
	for _, e := range entries(tree["references"]) {
		if e["source"] != "configmap" {
			t.Errorf("a reference to %v is left", e["source"])
		}
	}
	if got := names(tree["sourceListAnnotations"], "annotation"); !slices.Equal(got, []string{"my/configmaps"}) {
		t.Errorf("list annotations %v", got)
	}
	if got := names(tree["optInAnnotations"], "annotation"); slices.Contains(got, "secret.reloader.stakater.com/auto") || !slices.Contains(got, "reloader.stakater.com/auto") {
		t.Errorf("opt-in annotations %v", got)
	}
	// Jobs not ignored: re-created, as Reloader does, said explicitly.
	for _, e := range entries(tree["workloads"]) {
		if e["resource"] == "jobs" && e["restart"].(map[string]any)["strategy"] != "recreate" {
			t.Errorf("jobs without the recreate strategy: %v", e)
		}
	}
	if !slices.Contains(names(tree["workloads"], "resource"), "jobs") {
		t.Error("Jobs not re-created, though Reloader re-creates them")
	}
	if slices.Contains(names(tree["workloads"], "resource"), "rollouts") {
		t.Error("Argo Rollouts watched without --is-Argo-Rollouts")
	}
	if tree["leaderElection"].(map[string]any)["enabled"] != true {
		t.Error("HA not carried over")
	}
	if !res.Lost() || !strings.Contains(string(res.File), "# Not carried over") || !strings.Contains(string(res.File), "--webhook-url") {
		t.Errorf("the webhook's loss is not reported:\n%s", res.File)
	}

	o = DefaultOptions()
	o.AlertOnReload, o.AlertSink = true, "gchat"
	tree, _ = migrated(t, o, false)
	sinks := entries(tree["notifications"].(map[string]any)["sinks"])
	if len(sinks) != 1 || sinks[0]["type"] != "googleChat" || sinks[0]["urlSecret"].(map[string]any)["name"] != alertSecret {
		t.Errorf("ALERT_SINK=gchat: sinks %v", sinks)
	}

	o = DefaultOptions()
	o.IsArgoRollouts = true
	o.WorkloadTypesToIgnore = []string{"jobs", "cronjobs"}
	o.ReloadOnCreate, o.SyncAfterRestart, o.ReloadStrategy = true, true, "annotations"
	tree, res = migrated(t, o, true)
	if tree["restartGracePeriod"] != 0.0 || tree["breaker"].(map[string]any)["budget"] != 0.0 {
		t.Errorf("--reloader-pace: grace %v, breaker %v", tree["restartGracePeriod"], tree["breaker"])
	}
	// The defaults, which watch Rollouts, without the CronJobs ignored.
	var kinds []string
	for _, w := range tree["workloads"].([]any) {
		kinds = append(kinds, fmt.Sprint(w.(map[string]any)["resource"]))
	}
	if want := []string{"deployments", "statefulsets", "daemonsets", "rollouts"}; !slices.Equal(kinds, want) {
		t.Errorf("workloads %v, want %v", kinds, want)
	}
	for _, f := range res.Findings {
		if f.Lost {
			t.Errorf("lost, though nothing should be: %s", f)
		}
	}
}

func TestMain(t *testing.T) {
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(values, []byte("reloader: {autoReloadAll: true, webhookUrl: 'https://hooks.example/T0/B0/s3cr3t'}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "config.yaml")
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--values", values, "--set", "reloader.ignoreJobs=true", "-o", out}, 0},
		{[]string{"--values", values, "--strict"}, 1},
		{[]string{"--", "--auto-reload-all", "--ignored-workload-types=jobs,cronjobs", "--reload-on-create=true", "--sync-after-restart"}, 0},
		{[]string{"--strict", "--", "--ignored-workload-types=jobs,cronjobs", "--reload-on-create=true", "--sync-after-restart"}, 0},
		{[]string{"--values", values, "--", "--auto-reload-all"}, 2},
		{[]string{"--set", "reloader.watchGlobally=false"}, 2},
		{[]string{"--", "--bogus"}, 2},
		{[]string{"stray"}, 2},
		{[]string{"--values", filepath.Join(dir, "missing.yaml")}, 2},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main("krc", tc.args, &stdout, &stderr); code != tc.code {
			t.Errorf("%q: exit %d, want %d\n%s", tc.args, code, tc.code, stderr.String())
		}
		if strings.Contains(stdout.String()+stderr.String(), "s3cr3t") {
			t.Errorf("%q: the webhook URL was printed", tc.args)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(data, []byte("optInAll: true")) {
		t.Errorf("-o: %v\n%s", err, data)
	}
}

// Reloader's creation and deletion flags, its per-namespace metric and a
// renamed ignore annotation map onto sourceLifecycle, metrics and
// ignoreAnnotations, with nothing reported lost for them.
func TestConfigLifecycleMetricsIgnore(t *testing.T) {
	o := DefaultOptions() // --reload-on-create and --reload-on-delete off
	o.MetricsByNamespace = true
	o.Annotations.Ignore = "my/ignore"
	tree, res := migrated(t, o, false)
	if want := map[string]any{"restartOnCreate": false, "restartOnDelete": false}; !reflect.DeepEqual(tree["sourceLifecycle"], want) {
		t.Errorf("sourceLifecycle %v, want %v", tree["sourceLifecycle"], want)
	}
	if want := map[string]any{"reloaderCompatible": true, "reloaderByNamespace": true}; !reflect.DeepEqual(tree["metrics"], want) {
		t.Errorf("metrics %v, want %v", tree["metrics"], want)
	}
	if got := names(tree["ignoreAnnotations"], "annotation"); !slices.Equal(got, []string{"my/ignore"}) {
		t.Errorf("ignore annotations %v", got)
	}
	for _, f := range res.Findings {
		if s := f.String(); strings.Contains(s, "reload-on") || strings.Contains(s, "METRICS_COUNT") || strings.Contains(s, "reload_executed") {
			t.Errorf("reported: %s", s)
		}
	}
	o.ReloadOnCreate, o.ReloadOnDelete = true, true
	if tree, _ := migrated(t, o, false); tree["sourceLifecycle"] != nil {
		t.Errorf("sourceLifecycle %v written though both flags are on, as the defaults", tree["sourceLifecycle"])
	}
}

// Reloader's namespace and resource selection maps onto ignoredNamespaces,
// namespaceSelector and sourceSelector, its legacy "key:value" and "*"
// forms rewritten, its list ANDed; nothing is reported lost. With
// namespaces set, the two namespace settings are left out, as Reloader
// ignores them then.
func TestConfigScope(t *testing.T) {
	o := DefaultOptions()
	o.NamespacesToIgnore = []string{"kube-system", " tools", "kube-system"}
	o.NamespaceSelectors = []string{"env:prod", "team=*", "tier:*"}
	o.ResourceSelectors = []string{"reload=true"}
	tree, res := migrated(t, o, false)
	if want := []any{"kube-system", "tools"}; !reflect.DeepEqual(tree["ignoredNamespaces"], want) {
		t.Errorf("ignoredNamespaces %v, want %v", tree["ignoredNamespaces"], want)
	}
	if got, want := tree["namespaceSelector"], "env=prod,team,tier"; got != want {
		t.Errorf("namespaceSelector %v, want %v", got, want)
	}
	if got, want := tree["sourceSelector"], "reload=true"; got != want {
		t.Errorf("sourceSelector %v, want %v", got, want)
	}
	for _, f := range res.Findings {
		if strings.Contains(f.Setting, "selector") || strings.Contains(f.Setting, "namespaces") {
			t.Errorf("reported: %s", f)
		}
	}

	o.Namespaces = []string{"a"}
	o.ReloadOnDelete = true
	tree, res = migrated(t, o, false)
	if tree["ignoredNamespaces"] != nil || tree["namespaceSelector"] != nil || tree["sourceSelector"] != "reload=true" {
		t.Errorf("namespaced: ignoredNamespaces %v, namespaceSelector %v, sourceSelector %v",
			tree["ignoredNamespaces"], tree["namespaceSelector"], tree["sourceSelector"])
	}
	if !slices.ContainsFunc(res.Findings, func(f Finding) bool { return f.Setting == "--resource-label-selector" && !f.Lost }) {
		t.Errorf("the lifecycle difference under a sourceSelector is not reported: %v", res.Findings)
	}

	o = DefaultOptions()
	o.NamespaceSelectors = []string{"a in (b"}
	o.NamespacesToIgnore = []string{"Not_A_Name"}
	tree, res = migrated(t, o, false)
	if tree["namespaceSelector"] != nil || tree["ignoredNamespaces"] != nil || !res.Lost() {
		t.Errorf("a selector Reloader refuses: namespaceSelector %v, ignoredNamespaces %v, findings %v",
			tree["namespaceSelector"], tree["ignoredNamespaces"], res.Findings)
	}
}
