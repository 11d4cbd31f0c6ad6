package explain

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/explain/explaintest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fixture is testdata/shop.yaml: source objects and workload objects, as the
// API server would return them, reduced by the catalog's own transforms.
type fixture struct {
	cfg       *Config
	sources   map[string]*unstructured.Unstructured // "configmap/NAME"
	workloads []Workload
}

func defaultConfig(t *testing.T, extra string) *Config {
	t.Helper()
	var data []byte
	if extra != "" {
		data = []byte(extra)
	}
	c, err := ParseConfig(data, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Sums, err = checksum.NewHasher(bytes.Repeat([]byte{9}, checksum.MinKeySize)); err != nil {
		t.Fatal(err)
	}
	return c
}

func loadFixture(t *testing.T, cfg *Config) *fixture {
	t.Helper()
	raw, err := os.ReadFile("testdata/shop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Pass one, with placeholders, gives the sources and the template
	// digests; pass two writes the real checksums and digests.
	first := parseFixture(t, cfg, raw, template.FuncMap{
		"sum":  func(string, ...string) string { return "x" },
		"hash": func(string) string { return "x" },
	})
	hashes := map[string]string{}
	for _, w := range first.workloads {
		hashes[w.Object.GetName()] = reduceWorkload(t, cfg, w).TemplateHash
	}
	return parseFixture(t, cfg, raw, template.FuncMap{
		"sum": func(source string, keys ...string) string {
			u, ok := first.sources[source]
			if !ok {
				t.Fatalf("fixture: no source %s", source)
			}
			kind, _ := cfg.sourceKind(strings.ToLower(u.GetKind()))
			state, err := catalog.SourceReducer{DataFields: kind.DataFields}.Reduce(u)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) == 0 {
				keys = nil
			}
			return state.Checksum(cfg.Sums, keys)
		},
		"hash": func(name string) string { return hashes[name] },
	})
}

func parseFixture(t *testing.T, cfg *Config, raw []byte, funcs template.FuncMap) *fixture {
	t.Helper()
	tmpl, err := template.New("shop").Funcs(funcs).Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, nil); err != nil {
		t.Fatal(err)
	}
	f := &fixture{cfg: cfg, sources: map[string]*unstructured.Unstructured{}}
	for _, doc := range strings.Split(b.String(), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("fixture: %v\n%s", err, doc)
		}
		kind := strings.ToLower(u.GetKind())
		if kind == "configmap" || kind == "secret" {
			f.sources[kind+"/"+u.GetName()] = u
			continue
		}
		wk, ok := f.workloadKind(u)
		if !ok {
			t.Fatalf("fixture: %s is not a configured workload kind", u.GetKind())
		}
		f.workloads = append(f.workloads, Workload{Kind: wk, Object: u})
	}
	return f
}

func (f *fixture) workloadKind(u *unstructured.Unstructured) (config.WorkloadKind, bool) {
	resource := strings.ToLower(u.GetKind()) + "s"
	for _, k := range f.cfg.Workloads {
		if k.GVR.Group == u.GroupVersionKind().Group && k.GVR.Resource == resource {
			return k, true
		}
	}
	return config.WorkloadKind{}, false
}

func reduceWorkload(t *testing.T, cfg *Config, w Workload) *catalog.WorkloadState {
	t.Helper()
	reduced, err := catalog.ReduceWorkload(w.Kind, cfg.Config)(w.Object)
	if err != nil {
		t.Fatal(err)
	}
	return reduced.(*catalog.WorkloadState)
}

// fetch serves the fixture's sources, reduced as the controller reduces them.
func (f *fixture) fetch(t *testing.T) SourceFetcher {
	return func(kind config.SourceKind, _, name string) (*catalog.SourceState, error) {
		u, ok := f.sources[kind.Name+"/"+name]
		if !ok {
			return nil, nil
		}
		return catalog.SourceReducer{DataFields: kind.DataFields, Keep: f.cfg.SourceAnnotations()}.Reduce(u)
	}
}

func (f *fixture) workload(t *testing.T, name string) Workload {
	t.Helper()
	for _, w := range f.workloads {
		if w.Object.GetName() == name {
			return w
		}
	}
	t.Fatalf("fixture: no workload %s", name)
	return Workload{}
}

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func (f *fixture) explainWorkload(t *testing.T, name string) *WorkloadReport {
	t.Helper()
	w := f.workload(t, name)
	r := f.cfg.ExplainWorkload(w.Kind, w.Object, f.fetch(t), nil, now)
	return r
}

// explainAnnotated explains the named workload with annotations added.
func (f *fixture) explainAnnotated(t *testing.T, name string, annotations map[string]string) *WorkloadReport {
	t.Helper()
	w := f.workload(t, name)
	obj := w.Object.DeepCopy()
	all := obj.GetAnnotations()
	for k, v := range annotations {
		all[k] = v
	}
	obj.SetAnnotations(all)
	r := f.cfg.ExplainWorkload(w.Kind, obj, f.fetch(t), nil, now)
	return r
}

func (f *fixture) explainSource(t *testing.T, source, key string) *SourceReport {
	t.Helper()
	kindName, name, _ := strings.Cut(source, "/")
	kind, ok := f.cfg.sourceKind(kindName)
	if !ok {
		t.Fatalf("no source kind %s", kindName)
	}
	state, err := f.fetch(t)(kind, "shop", name)
	if err != nil {
		t.Fatal(err)
	}
	r := f.cfg.ExplainSource(kind, "shop", name, state, f.workloads, key)
	return r
}

func render(t *testing.T, report interface{}, format string) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, report, format); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	f := loadFixture(t, defaultConfig(t, ""))
	notWatched := loadFixture(t, defaultConfig(t, "namespaces: [other]\nworkloadSelector: tier=front\n"))
	tests := []struct {
		name   string
		report func(t *testing.T) interface{}
		format string
	}{
		{"workload-every-form", func(t *testing.T) interface{} { return f.explainWorkload(t, "web") }, FormatTable},
		{"workload-every-form.json", func(t *testing.T) interface{} { return f.explainWorkload(t, "web") }, FormatJSON},
		{"workload-changed", func(t *testing.T) interface{} { return f.explainWorkload(t, "worker") }, FormatTable},
		{"workload-changed-ignored", func(t *testing.T) interface{} {
			return f.explainAnnotated(t, "worker", map[string]string{f.cfg.Annotations.IgnoreSources: "configmap/app-config"})
		}, FormatTable},
		{"workload-pending", func(t *testing.T) interface{} { return f.explainWorkload(t, "db") }, FormatTable},
		{"workload-first-sight", func(t *testing.T) interface{} { return f.explainWorkload(t, "agent") }, FormatTable},
		{"workload-template-changed", func(t *testing.T) interface{} { return f.explainWorkload(t, "edited") }, FormatTable},
		{"workload-not-opted-in", func(t *testing.T) interface{} { return f.explainWorkload(t, "legacy") }, FormatTable},
		{"workload-optional-appeared", func(t *testing.T) interface{} { return f.explainWorkload(t, "optional-reader") }, FormatTable},
		{"workload-required-appeared", func(t *testing.T) interface{} { return f.explainWorkload(t, "required-reader") }, FormatTable},
		{"workload-source-deleted", func(t *testing.T) interface{} { return f.explainWorkload(t, "orphan") }, FormatTable},
		{"workload-garbled-annotation", func(t *testing.T) interface{} { return f.explainWorkload(t, "garbled") }, FormatTable},
		{"workload-no-template", func(t *testing.T) interface{} { return f.explainWorkload(t, "broken") }, FormatTable},
		{"workload-not-watched", func(t *testing.T) interface{} { return notWatched.explainWorkload(t, "web") }, FormatTable},
		{"workload-held-breaker", func(t *testing.T) interface{} {
			return f.explainAnnotated(t, "worker", map[string]string{f.cfg.Annotations.Hold: breakerHold})
		}, FormatTable},
		{"workload-held-wave", func(t *testing.T) interface{} {
			held := map[string]string{f.cfg.Annotations.Hold: f.waveHold(t, "app-config")}
			return f.explainInFleet(t, "worker", "worker", map[string]string{f.cfg.Annotations.Hold: f.waveHold(t, "app-config"),
				f.cfg.Annotations.Rollout: failedRecord}, held, "worker-1", "worker-2", "worker-3", "worker-4")
		}, FormatTable},
		{"workload-held-wave.json", func(t *testing.T) interface{} {
			held := map[string]string{f.cfg.Annotations.Hold: f.waveHold(t, "app-config")}
			return f.explainInFleet(t, "worker", "worker", held, held, "worker-1", "worker-2", "worker-3", "worker-4")
		}, FormatJSON},
		{"workload-queued-wave", func(t *testing.T) interface{} {
			return f.explainInFleet(t, "worker", "worker-9", nil, nil, "worker", "worker-1", "worker-2", "worker-3")
		}, FormatTable},
		{"workload-run-job", func(t *testing.T) interface{} {
			return f.explainAnnotated(t, "worker", map[string]string{f.cfg.Annotations.Rollout: runJobRecord})
		}, FormatTable},
		{"workload-unpaced-hold-lifted", func(t *testing.T) interface{} {
			return f.explainAnnotated(t, "worker", map[string]string{f.cfg.Annotations.Hold: f.waveHold(t, "app-config")})
		}, FormatTable},
		{"workload-hold-over", func(t *testing.T) interface{} {
			return f.explainAnnotated(t, "worker", map[string]string{f.cfg.Annotations.Hold: `{"kind":"wave","source":"configmap/shop/app-config","change":"0123456789abcdef","cause":"deployments.apps/shop/web: DeadlineExceeded","since":"2026-05-01T11:00:00Z"}`})
		}, FormatTable},
		{"source-configmap", func(t *testing.T) interface{} { return f.explainSource(t, "configmap/app-config", "") }, FormatTable},
		{"source-configmap.yaml", func(t *testing.T) interface{} { return f.explainSource(t, "configmap/app-config", "") }, FormatYAML},
		{"source-configmap-key-color", func(t *testing.T) interface{} { return f.explainSource(t, "configmap/app-config", "color") }, FormatTable},
		{"source-configmap-key-unused", func(t *testing.T) interface{} { return f.explainSource(t, "configmap/app-config", "unused") }, FormatTable},
		{"source-secret", func(t *testing.T) interface{} { return f.explainSource(t, "secret/app-secret", "") }, FormatTable},
		{"source-absent-optional", func(t *testing.T) interface{} { return f.explainSource(t, "configmap/feature-flags", "") }, FormatTable},
		{"source-not-watched", func(t *testing.T) interface{} { return notWatched.explainSource(t, "configmap/app-config", "") }, FormatTable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := explaintest.Normalise(render(t, tt.report(t), tt.format))
			name := tt.name
			if !strings.Contains(name, ".") {
				name += ".txt"
			}
			explaintest.Compare(t, filepath.Join("testdata", "golden", name), got, *update)
		})
	}
}

// No output of any format ever holds a Secret value, raw or encoded.
func TestNeverPrintsSecretValues(t *testing.T) {
	f := loadFixture(t, defaultConfig(t, ""))
	var values []string
	for id, u := range f.sources {
		if !strings.HasPrefix(id, "secret/") {
			continue
		}
		data, _ := u.Object["data"].(map[string]interface{})
		for _, v := range data {
			encoded := v.(string)
			decoded, err := base64.StdEncoding.DecodeString(encoded)
			if err != nil {
				t.Fatal(err)
			}
			values = append(values, encoded, string(decoded))
		}
	}
	if len(values) == 0 {
		t.Fatal("fixture has no secret values; this test checks nothing")
	}
	var reports []interface{}
	for _, w := range f.workloads {
		reports = append(reports, f.explainWorkload(t, w.Object.GetName()))
	}
	for id := range f.sources {
		reports = append(reports, f.explainSource(t, id, ""))
	}
	for _, r := range reports {
		for _, format := range []string{FormatTable, FormatJSON, FormatYAML} {
			out := render(t, r, format)
			for _, v := range values {
				if strings.Contains(out, v) {
					t.Errorf("output (%q) holds the secret value %q:\n%s", format, v, out)
				}
			}
		}
	}
}

// The places explain names for each source add up to exactly what the
// controller's catalog reads: the same sources, keys and optionality.
func TestUsesAgreeWithCatalog(t *testing.T) {
	f := loadFixture(t, defaultConfig(t, ""))
	for _, w := range f.workloads {
		state := reduceWorkload(t, f.cfg, w)
		uses := f.cfg.usesByID(w.Kind, w.Object, state)
		if len(uses) != len(state.References) {
			t.Errorf("%s: %d sources by place, %d in the catalog", w.Object.GetName(), len(uses), len(state.References))
		}
		for _, ref := range state.References {
			us := uses[ref.ID]
			if len(us) == 0 {
				t.Errorf("%s: no place found for %s", w.Object.GetName(), ref.ID)
				continue
			}
			optional, all := true, false
			var keys []string
			for _, u := range us {
				optional = optional && u.Optional
				all = all || u.AllKeys
				keys = append(keys, u.Keys...)
			}
			slices.Sort(keys)
			keys = slices.Compact(keys)
			if all {
				keys = nil
			}
			if optional != ref.Optional || !reflect.DeepEqual(keys, ref.Keys) {
				t.Errorf("%s: %s: places give keys %v optional %v; catalog keys %v optional %v",
					w.Object.GetName(), ref.ID, keys, optional, ref.Keys, ref.Optional)
			}
		}
	}
}

// A config whose reference forms differ from the defaults names its own
// forms, in the file's order, and paths, "$." prefixes and trailing [*]
// included.
func TestUsesOfCustomForms(t *testing.T) {
	cfg := defaultConfig(t, `
sources:
- {name: bundle, version: v1, resource: bundles, group: example.com, dataFields: [spec]}
references:
- {source: bundle, from: ["$.bundles[*]", "sidecars[*].bundleRefs[*].ref"], name: id, keys: "only[*]"}
- {source: bundle, from: ["extra.bundle"], name: id, optional: opt}
`)
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  template:
    spec:
      bundles: [{id: a}, {name: named, id: b, only: [x, z]}]
      sidecars: [{name: s, bundleRefs: [{ref: {id: c}}]}]
      extra: {bundle: {id: a, opt: true}}
`), &obj.Object); err != nil {
		t.Fatal(err)
	}
	kind, ok := (&fixture{cfg: cfg}).workloadKind(obj)
	if !ok {
		t.Fatal("deployments are not a configured workload kind")
	}
	uses := cfg.usesByID(kind, obj, reduceWorkload(t, cfg, Workload{Kind: kind, Object: obj}))
	var got []string
	for _, name := range []string{"a", "b", "c"} {
		for _, u := range uses[catalog.SourceID{Kind: "bundle", Namespace: "shop", Name: name}] {
			got = append(got, fmt.Sprintf("%s %s %s %s all=%t optional=%t", u.Reference, u.Path, name, strings.Join(u.Keys, ","), u.AllKeys, u.Optional))
		}
	}
	want := []string{
		"references[0] bundles[0] a  all=true optional=false",
		"references[1] extra.bundle a  all=true optional=true",
		"references[0] bundles[named] b x,z all=false optional=false",
		"references[0] sidecars[s].bundleRefs[0].ref c  all=true optional=false",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

func TestLoadConfig(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("workers: 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(bad, noEnv); err == nil || !strings.Contains(err.Error(), "loading config from "+bad+": workers: must be between 1 and 1000, got 0") {
		t.Errorf("bad file: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "none.yaml"), noEnv); err == nil {
		t.Error("a missing file named by --config must be an error")
	}
	env := func(k string) (string, bool) {
		return filepath.Join(dir, "none.yaml"), k == "RESTART_CONTROLLER_CONFIG"
	}
	if _, err := LoadConfig("", env); err == nil {
		t.Error("a missing file named by $RESTART_CONTROLLER_CONFIG must be an error")
	}
	c, err := LoadConfig("../../examples/config.yaml", noEnv)
	if err != nil || c.File != "../../examples/config.yaml" || len(c.Extractors) != 7 {
		t.Fatalf("examples/config.yaml: %v", err)
	}
	if _, err := os.Stat(config.DefaultPath); err == nil {
		t.Skip(config.DefaultPath + " exists here")
	}
	if c, err := LoadConfig("", noEnv); err != nil || c.File != "" {
		t.Errorf("without a file the built-in defaults are used: %v", err)
	}
}

const (
	breakerHold = `{"kind":"breaker","cause":"restarted 5 times within 30m0s (budget 5)","since":"2026-05-01T11:58:00Z"}`
	// runJobRecord is a runNow restart whose Job still runs.
	runJobRecord = `{"at":"2026-05-01T11:00:00Z","sources":{"configmap/shop/app-config":"c1"},"restarts":["2026-05-01T11:00:00Z"],"job":"worker-1a2b3c4d5e"}`
	failedRecord = `{"at":"2026-05-01T11:00:00Z","sources":{"configmap/shop/app-config":"c1"},"result":"failed","reason":"DeadlineExceeded","restarts":["2026-05-01T11:00:00Z"]}`
)

// waveHold is a wave hold of the current change of the named source.
func (f *fixture) waveHold(t *testing.T, source string) string {
	t.Helper()
	kind, _ := f.cfg.sourceKind("configmap")
	state, err := f.fetch(t)(kind, "shop", source)
	if err != nil || state == nil {
		t.Fatalf("source %s: %v", source, err)
	}
	return `{"kind":"wave","source":"configmap/shop/` + source + `","change":"` + state.Change(f.cfg.Sums) +
		`","cause":"deployments.apps/shop/web: DeadlineExceeded: not complete 10m0s after the restart","since":"2026-05-01T11:10:00Z"}`
}

// explainInFleet explains the named workload, renamed as, with annotations
// added, among copies of it named by others carrying othersAnnotations:
// the fleet of its namespace as explain would list it.
func (f *fixture) explainInFleet(t *testing.T, name, as string, annotations, othersAnnotations map[string]string, others ...string) *WorkloadReport {
	t.Helper()
	w := f.workload(t, name)
	copyOf := func(n string, extra map[string]string) *unstructured.Unstructured {
		obj := w.Object.DeepCopy()
		obj.SetName(n)
		all := obj.GetAnnotations()
		for k, v := range extra {
			all[k] = v
		}
		obj.SetAnnotations(all)
		return obj
	}
	var fleet []Workload
	for _, n := range others {
		fleet = append(fleet, Workload{Kind: w.Kind, Object: copyOf(n, othersAnnotations)})
	}
	r := f.cfg.ExplainWorkload(w.Kind, copyOf(as, annotations), f.fetch(t), func() []Workload { return fleet }, now)
	return r
}

// A regex source list reads, for explain as for the controller, the sources
// of its kind in the workload's namespace whose whole names an entry
// matches; explain names the annotation and the entry as the place, lists
// the entries it skips, and decides nothing when it cannot list sources.
func TestExplainRegexSourceLists(t *testing.T) {
	cfg := defaultConfig(t, `
sourceListAnnotations:
- {annotation: example.com/reload, source: configmap, match: regex}`)
	f := loadFixture(t, cfg)
	cfg.SourceNames = func(kind config.SourceKind, namespace string) ([]string, error) {
		var names []string
		for id := range f.sources {
			if k, name, _ := strings.Cut(id, "/"); k == kind.Name && namespace == "shop" {
				names = append(names, name)
			}
		}
		return names, nil
	}
	r := f.explainAnnotated(t, "worker", map[string]string{"example.com/reload": "[a-z]+-config, x["})
	var got []string
	for _, s := range r.Sources {
		for _, u := range s.Uses {
			if strings.HasPrefix(u.Reference, "annotation ") {
				got = append(got, s.Source+" "+u.Reference)
			}
		}
	}
	slices.Sort(got)
	want := []string{}
	for _, name := range []string{"app-config", "eph-config", "init-config", "late-config"} {
		want = append(want, "configmap/shop/"+name+" annotation example.com/reload, regex [a-z]+-config")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sources by list\n%q\nwant\n%q", got, want)
	}
	if len(r.ListProblems) != 1 || !strings.Contains(r.ListProblems[0], `"x["`) {
		t.Errorf("list problems %q", r.ListProblems)
	}
	if !strings.Contains(render(t, r, FormatTable), "List entry skipped") {
		t.Error("the table does not show the skipped entry")
	}
	// The source's view names the same reader, by the same place.
	state, err := f.fetch(t)(config.SourceKind{Name: "configmap", DataFields: []string{"data", "binaryData"}}, "shop", "eph-config")
	if err != nil {
		t.Fatal(err)
	}
	obj := f.workload(t, "worker").Object.DeepCopy()
	obj.SetAnnotations(map[string]string{"com.xing.deployment-restart": "enabled", "example.com/reload": "eph-.*"})
	kind, _ := cfg.sourceKind("configmap")
	sr := cfg.ExplainSource(kind, "shop", "eph-config", state, []Workload{{Kind: f.workload(t, "worker").Kind, Object: obj}}, "")
	if len(sr.Readers) != 1 || len(sr.Readers[0].Uses) != 1 || sr.Readers[0].Uses[0].Reference != "annotation example.com/reload, regex eph-.*" {
		t.Errorf("readers %+v", sr.Readers)
	}
	// Recorded with the entry in force and without eph-config: it appeared
	// since, and a restart is due, as the controller decides.
	recorded := `{"configmap/shop/app-config":"0123456789abcdef","secret/shop/app-secret":"x","configmap/shop/~eph-.*":"pattern"}`
	r = f.explainAnnotated(t, "worker", map[string]string{"example.com/reload": "eph-.*", "com.xing.deployment-restart.applied-config-checksums": recorded})
	for _, s := range r.Sources {
		if s.Name == "eph-config" && s.Status != StatusAppeared {
			t.Errorf("eph-config: %s (%s), want %s", s.Status, s.Note, StatusAppeared)
		}
	}
	if r.Decision.Action != ActionRestart || !slices.Contains(r.Decision.Changed, "configmap/shop/eph-config") {
		t.Errorf("decision %+v, want a restart for eph-config", r.Decision)
	}
	cfg.SourceNames = nil
	if r := f.explainAnnotated(t, "worker", map[string]string{"example.com/reload": "a.*"}); r.Decision.Action != ActionUnknown {
		t.Errorf("decided %s without a way to list sources", r.Decision.Action)
	}
}

// A list read on the pod template is named there as the place that lists
// the source, exact or regex.
func TestExplainNamesPodTemplateLists(t *testing.T) {
	cfg := defaultConfig(t, `
sourceListAnnotations:
- {annotation: example.com/reload, source: configmap, readFrom: podTemplate}
- {annotation: example.com/match, source: configmap, readFrom: podTemplate, match: regex}`)
	f := loadFixture(t, cfg)
	cfg.SourceNames = func(config.SourceKind, string) ([]string, error) { return []string{"eph-config"}, nil }
	w := f.workload(t, "worker")
	obj := w.Object.DeepCopy()
	if err := unstructured.SetNestedStringMap(obj.Object, map[string]string{"example.com/reload": "init-config", "example.com/match": "eph-.*"},
		"spec", "template", "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
	r := cfg.ExplainWorkload(w.Kind, obj, f.fetch(t), nil, now)
	places := map[string]string{}
	for _, s := range r.Sources {
		for _, u := range s.Uses {
			if strings.HasPrefix(u.Reference, "annotation ") {
				places[s.Name] = u.Path
			}
		}
	}
	want := map[string]string{
		"init-config": "spec.template.metadata.annotations[example.com/reload]",
		"eph-config":  "spec.template.metadata.annotations[example.com/match]",
	}
	if !reflect.DeepEqual(places, want) {
		t.Errorf("places %v, want %v", places, want)
	}
}

// Under a sourceSelector, explain shows a source the selector leaves out as
// unselected, and decides as the controller does: nothing is recorded for
// it. Under a namespaceSelector and ignoredNamespaces, it says why a
// workload's namespace is not acted on.
func TestExplainSelectors(t *testing.T) {
	cfg := defaultConfig(t, "sourceSelector: reload=true\nnamespaceSelector: env=prod\nignoredNamespaces: [lab]\n")
	f := loadFixture(t, cfg)
	cfg.NamespaceLabels = func(string) (map[string]string, error) { return map[string]string{"env": "prod"}, nil }
	fetch := func(kind config.SourceKind, namespace, name string) (*catalog.SourceState, error) {
		if name == "app-config" {
			return nil, fmt.Errorf("%s: %w %q", name, ErrUnselected, "reload=true")
		}
		return f.fetch(t)(kind, namespace, name)
	}
	w := f.workload(t, "worker")
	r := cfg.ExplainWorkload(w.Kind, w.Object, fetch, nil, now)
	found := false
	for _, s := range r.Sources {
		if s.Name == "app-config" {
			found = true
			if s.Status != StatusUnselected || !strings.Contains(s.Note, "sourceSelector") {
				t.Errorf("app-config: %s (%s), want %s", s.Status, s.Note, StatusUnselected)
			}
		}
	}
	if !found {
		t.Fatal("the fixture's worker does not read app-config")
	}
	if r.Decision.Action == ActionUnknown {
		t.Errorf("an unselected source made the decision unknown: %+v", r.Decision)
	}
	if _, ok := r.Decision.Record["configmap/shop/app-config"]; ok {
		t.Errorf("the decision records the unselected source: %v", r.Decision.Record)
	}

	cfg.NamespaceLabels = func(string) (map[string]string, error) { return map[string]string{"env": "dev"}, nil }
	r = cfg.ExplainWorkload(w.Kind, w.Object, f.fetch(t), nil, now)
	if r.Watched || !strings.Contains(r.NotWatched, "namespaceSelector") || r.Decision.Action != ActionNothing {
		t.Errorf("namespace not selected: watched %v (%s), decision %+v", r.Watched, r.NotWatched, r.Decision)
	}
	if why := cfg.NamespaceNotWatched("lab"); !strings.Contains(why, "ignoredNamespaces") {
		t.Errorf("ignored namespace: %q", why)
	}
}

// An unreadable hold is reported with why it cannot be read (the
// controller removes it); an unreadable rollout record is not reported.
func TestExplainUnreadableRecords(t *testing.T) {
	f := loadFixture(t, defaultConfig(t, ""))
	r := f.explainAnnotated(t, "worker", map[string]string{f.cfg.Annotations.Hold: `{"kind":"nap"}`, f.cfg.Annotations.Rollout: `{"result":"complete"}`})
	if h := r.Hold; h == nil || h.Error != `hold annotation has an unknown kind "nap"` || h.EndsWhen != "the controller removes an unreadable hold at its next decision" {
		t.Errorf("hold: %+v", h)
	}
	if r.Rollout != nil {
		t.Errorf("rollout: %+v", r.Rollout)
	}
	r = f.explainAnnotated(t, "worker", map[string]string{f.cfg.Annotations.Hold: `{`})
	if h := r.Hold; h == nil || !strings.HasPrefix(h.Error, "hold annotation is not a hold: ") {
		t.Errorf("hold: %+v", h)
	}
}

// A reader whose applied checksums cannot be read shows none for the
// source, as one that has none recorded.
func TestExplainSourceGarbledReader(t *testing.T) {
	f := loadFixture(t, defaultConfig(t, ""))
	r := f.explainSource(t, "configmap/env-all", "")
	applied := map[string]*string{}
	for _, rd := range r.Readers {
		applied[rd.Workload] = rd.Applied
	}
	if a, ok := applied["deployment.apps/garbled"]; !ok || a != nil {
		t.Errorf("garbled reader: applied %v (listed %t), want none", a, ok)
	}
	if a := applied["deployment.apps/web"]; a == nil || *a == "" {
		t.Errorf("web reader: applied %v, want its checksum", a)
	}
}
