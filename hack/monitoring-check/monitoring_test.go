package monitoringcheck

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

var (
	root     string
	families map[string]Family
)

func TestMain(m *testing.M) {
	var err error
	if root, err = Root(); err == nil {
		families, err = Exported(root)
	}
	if err != nil {
		os.Stderr.WriteString("monitoring-check set-up: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func chartFile(name string) string {
	return filepath.Join(root, "charts", "restart-controller", "files", name)
}

// ruleFiles are every form the alerts ship in: the chart's rule file and the
// spec of manifests/monitoring/prometheusrule.yaml.
func ruleFiles(t *testing.T) map[string][]byte {
	t.Helper()
	chart, err := os.ReadFile(chartFile("prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "manifests", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var obj struct {
		Kind string    `yaml:"kind"`
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(raw, &obj); err != nil || obj.Kind != "PrometheusRule" {
		t.Fatalf("manifests/monitoring/prometheusrule.yaml: kind %q, %v", obj.Kind, err)
	}
	spec, err := yaml.Marshal(&obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"charts/restart-controller/files/prometheus-rules.yaml": chart,
		"manifests/monitoring/prometheusrule.yaml spec":         spec,
	}
}

func parseRules(t *testing.T, name string, content []byte) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.Parse(content, false, model.LegacyValidation, parser.NewParser(parser.Options{}), slog.Default())
	for _, err := range errs {
		t.Errorf("%s: %v", name, err)
	}
	if groups == nil {
		t.FailNow()
	}
	return groups
}

// TestRules parses the alerts with Prometheus's rule file parser (which also
// parses every expression and annotation template) and checks each names
// only exported metrics and labels, is labelled with a severity and says
// what to do.
func TestRules(t *testing.T) {
	for name, content := range ruleFiles(t) {
		groups := parseRules(t, name, content)
		var alerts []string
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					t.Errorf("%s: group %s has a recording rule %q; only alerts are expected", name, g.Name, r.Record)
					continue
				}
				alerts = append(alerts, r.Alert)
				problems, err := CheckExpr(r.Expr, families)
				if err != nil {
					t.Errorf("%s: %s: %v", name, r.Alert, err)
				}
				for _, p := range problems {
					t.Errorf("%s: %s: %s", name, r.Alert, p)
				}
				if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" && sev != "info" {
					t.Errorf("%s: %s: severity %q, want critical, warning or info", name, r.Alert, sev)
				}
				if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("%s: %s lacks a summary or description annotation", name, r.Alert)
				}
				if r.For == 0 {
					t.Errorf("%s: %s has no for:, so one bad scrape pages", name, r.Alert)
				}
			}
		}
		// The alerts whose metrics exist.
		for _, want := range []string{"RestartControllerDown", "RestartControllerNotReady",
			"RestartControllerNoLeader", "RestartControllerPersistentErrors", "RestartControllerRestartsHeld"} {
			if !slices.Contains(alerts, want) {
				t.Errorf("%s: no alert %s (have %v)", name, want, alerts)
			}
		}
		t.Logf("%s: %d alerts: %v", name, len(alerts), alerts)
	}
}

// TestPersistentErrorsAlert pins what the persistent-failure alert watches.
func TestPersistentErrorsAlert(t *testing.T) {
	groups := parseRules(t, "chart", ruleFiles(t)["charts/restart-controller/files/prometheus-rules.yaml"])
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "RestartControllerPersistentErrors" {
				continue
			}
			e, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if ok && vs.Name == "restart_controller_reconcile_errors_total" {
					for _, m := range vs.LabelMatchers {
						found = found || (m.Name == "reason" && m.Matches("persistent") && !m.Matches("transient"))
					}
				}
				return nil
			})
			if !found {
				t.Errorf("RestartControllerPersistentErrors does not select restart_controller_reconcile_errors_total{reason=\"persistent\"}: %s", r.Expr)
			}
			return
		}
	}
	t.Fatal("no RestartControllerPersistentErrors alert")
}

// TestDashboard checks every query of the dashboard (both copies) parses as
// PromQL once Grafana's variables are substituted, and names only exported
// metrics and labels.
func TestDashboard(t *testing.T) {
	for _, path := range []string{chartFile("dashboard.json"), filepath.Join(root, "manifests", "monitoring", "dashboard.json")} {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		queries, err := DashboardQueries(raw)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(queries) < 10 {
			t.Fatalf("%s: only %d queries found; is the dashboard's JSON shape what DashboardQueries reads?", path, len(queries))
		}
		used := map[string]bool{}
		for _, q := range queries {
			expr := Grafana(q.Expr)
			problems, err := CheckExpr(expr, families)
			if err != nil {
				t.Errorf("%s: %s: %q: %v", path, q.Where, expr, err)
				continue
			}
			for _, p := range problems {
				t.Errorf("%s: %s: %s", path, q.Where, p)
			}
			if q.Label != "" {
				checkLabel(t, path, q)
			}
			for _, name := range Names(families) {
				if strings.Contains(q.Expr, name) {
					used[name] = true
				}
			}
		}
		t.Logf("%s: %d queries over %d metrics", filepath.Base(path), len(queries), len(used))
	}
}

func checkLabel(t *testing.T, path string, q DashboardQuery) {
	t.Helper()
	name := q.Expr
	if i := strings.IndexByte(name, '{'); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimSpace(name)
	f, _, ok := lookup(name, families)
	if !ok {
		return // reported by CheckExpr
	}
	if !slices.Contains(f.Labels, q.Label) && !slices.Contains(TargetLabels, q.Label) {
		t.Errorf("%s: %s: label_values over %s's label %q, which it does not have", path, q.Where, name, q.Label)
	}
}

// TestCheckerCatches proves the checks are not vacuous: a misspelt metric, a
// label the metric lacks, and a wrong constant label value are each reported.
func TestCheckerCatches(t *testing.T) {
	for expr, want := range map[string]string{
		`rate(restart_controller_reconcile_error_total[5m])`:                   "not exported",
		`restart_controller_ready{reason="persistent"}`:                        `no label "reason"`,
		`workqueue_depth{name="sources"}`:                                      "always \"workloads\"",
		`histogram_quantile(0.9, rate(restart_controller_ready_bucket[5m]))`:   "not exported",
		`rate(restart_controller_patch_duration_seconds_bucket{le="1"}[5m])`:   "",
		`sum by (reason) (restart_controller_reconcile_errors_total{job="x"})`: "",
	} {
		problems, err := CheckExpr(expr, families)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		got := strings.Join(problems, "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: problems %q, want one containing %q", expr, got, want)
		}
	}
}
