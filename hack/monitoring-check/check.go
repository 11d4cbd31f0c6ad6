// Package monitoringcheck checks that restart-controller's alerts and Grafana
// dashboard are valid for Prometheus and name only metrics, and labels, that
// the controller exports. The list of exported metrics comes from running
// the controller's own metrics code (go run ./hack/metricnames in the
// controller module), so it cannot drift.
package monitoringcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Family is one metric family the controller exports (hack/metricnames' output).
type Family struct {
	Name        string            `json:"name"`
	Type        string            `json:"type"`
	Help        string            `json:"help"`
	Labels      []string          `json:"labels"`
	ConstLabels map[string]string `json:"constLabels"`
}

// TargetLabels are added by Prometheus and prometheus-operator to every
// scraped series, so any selector may use them.
var TargetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

// Exported runs hack/metricnames in the controller module at root.
func Exported(root string) (map[string]Family, error) {
	cmd := exec.Command("go", "run", "./hack/metricnames")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go run ./hack/metricnames: %w\n%s", err, stderr.String())
	}
	var list []Family
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, err
	}
	families := map[string]Family{
		// Prometheus's own series for every target.
		"up": {Name: "up", Type: "gauge"},
	}
	for _, f := range list {
		families[f.Name] = f
	}
	return families, nil
}

// CheckExpr parses a PromQL expression and returns one problem per selector
// that names an unknown metric, a label the metric does not have, or a value
// other than the fixed one of a constant label.
func CheckExpr(expr string, families map[string]Family) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var problems []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		problems = append(problems, checkSelector(vs, families)...)
		return nil
	})
	return problems, nil
}

func checkSelector(vs *parser.VectorSelector, families map[string]Family) []string {
	name := vs.Name
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	if name == "" {
		return []string{fmt.Sprintf("%s: selects no single metric name", vs)}
	}
	f, suffix, ok := lookup(name, families)
	if !ok {
		return []string{fmt.Sprintf("%s: metric %s is not exported by the controller", vs, name)}
	}
	allowed := append(append([]string{}, f.Labels...), TargetLabels...)
	switch {
	case f.Type == "histogram" && suffix == "_bucket":
		allowed = append(allowed, "le")
	case f.Type == "summary" && suffix == "":
		allowed = append(allowed, "quantile")
	}
	var problems []string
	for _, m := range vs.LabelMatchers {
		if m.Name == labels.MetricName {
			continue
		}
		if !slices.Contains(allowed, m.Name) {
			problems = append(problems, fmt.Sprintf("%s: %s has no label %q (it has %v)", vs, name, m.Name, f.Labels))
			continue
		}
		if v, fixed := f.ConstLabels[m.Name]; fixed && !m.Matches(v) {
			problems = append(problems, fmt.Sprintf("%s: %s's label %s is always %q, which %s never matches",
				vs, name, m.Name, v, m))
		}
	}
	return problems
}

// lookup finds a family by name, or a histogram's or summary's _bucket,
// _sum or _count series.
func lookup(name string, families map[string]Family) (Family, string, bool) {
	if f, ok := families[name]; ok {
		return f, "", true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, found := strings.CutSuffix(name, suffix)
		if !found {
			continue
		}
		f, ok := families[base]
		if ok && (f.Type == "histogram" || (f.Type == "summary" && suffix != "_bucket")) {
			return f, suffix, true
		}
	}
	return Family{}, "", false
}

// grafanaDurations are Grafana's built-in interval variables.
var (
	grafanaDurations = regexp.MustCompile(`\$(__rate_interval|__interval|__range)\b|\$\{(__rate_interval|__interval|__range)\}`)
	grafanaVariable  = regexp.MustCompile(`\$\{?[A-Za-z_][A-Za-z0-9_]*\}?`)
	labelValues      = regexp.MustCompile(`^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)
)

// Grafana turns a Grafana query into PromQL the way Grafana would before
// sending it: interval variables become a duration, others a plain value.
func Grafana(expr string) string {
	expr = grafanaDurations.ReplaceAllString(expr, "5m")
	return grafanaVariable.ReplaceAllString(expr, "x")
}

// DashboardQuery is one PromQL query of a dashboard, with where it is.
type DashboardQuery struct {
	Where, Expr string
	// Label is set for a label_values(selector, label) variable query.
	Label string
}

// DashboardQueries returns every panel target's expr (rows' nested panels
// included) and every query variable's selector.
func DashboardQueries(dashboard []byte) ([]DashboardQuery, error) {
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(dashboard, &d); err != nil {
		return nil, err
	}
	var out []DashboardQuery
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, DashboardQuery{Where: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if err := json.Unmarshal(v.Query, &s); err != nil {
				return nil, fmt.Errorf("variable %s: query is neither a string nor an object", v.Name)
			}
			q.Query = s
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			return nil, fmt.Errorf("variable %s: only label_values(selector, label) queries are checked, got %q", v.Name, q.Query)
		}
		out = append(out, DashboardQuery{Where: "variable " + v.Name, Expr: m[1], Label: m[2]})
	}
	return out, nil
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// Root is the repository root: this checker is the module at
// hack/monitoring-check, whose go.mod the go command names.
func Root() (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	return filepath.Dir(filepath.Dir(filepath.Dir(strings.TrimSpace(string(gomod))))), err
}

// Names returns the sorted names of families.
func Names(families map[string]Family) []string {
	var out []string
	for n := range families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
