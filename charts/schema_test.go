package charts

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/restart-controller/restart-controller/internal/config"
)

// The chart's values.schema.json types the config block from the config
// file's schema, config.File: the types strictdecode fills, keyed by their
// json tags. It is generated here by reflection, so that the two cannot
// drift: TestValuesSchema fails when the file differs from what the types
// give, and -update rewrites it.
//
// Every config value may be null: strictdecode reads null as absent, and
// Helm keeps a null that overrides no default (in a list item, say), so
// refusing it would refuse a config the controller runs with. Every object
// refuses keys it does not have, as strictdecode does. Bounds (workers 1 to
// 1000, ...) are checked by the controller's compile step, not here: they
// are code, not types, and the controller names them when it refuses.

// valueDecoder is strictdecode.ValueDecoder: a schema type that decodes
// itself and so must be described by hand below.
type valueDecoder interface{ DecodeValue(v interface{}) error }

var valueDecoderType = reflect.TypeOf((*valueDecoder)(nil)).Elem()

// goDuration is the syntax of Go's time.ParseDuration ("0", or numbers each
// with a unit, e.g. "1h30m", ".5s", "-2m"); TestDurationPatterns holds it to
// ParseDuration.
const goDuration = `[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)`

// floatNumber is the syntax of the finite numbers strconv.ParseFloat reads:
// decimal, with an exponent, or hexadecimal with a binary exponent, with
// underscores between digits as in Go literals (loosely for hexadecimal:
// it may accept a misplaced underscore that ParseFloat refuses, but refuses
// nothing it reads). Inf and NaN are left out: the config refuses them as
// out of range.
const floatNumber = `[-+]?((` + digits + `(\.(` + digits + `)?)?|\.` + digits + `)([eE][-+]?` + digits + `)?` +
	`|0[xX]_?(([0-9a-fA-F_]+(\.[0-9a-fA-F_]*)?|\.[0-9a-fA-F_]+)[pP][-+]?[0-9_]+))`

const digits = `[0-9]+(_[0-9]+)*`

// valueDecoderSchemas describes the schema types that decode themselves, as
// their DecodeValue accepts them. A new one fails the generator until it is
// described here.
var valueDecoderSchemas = map[reflect.Type]func() map[string]interface{}{
	reflect.TypeOf(config.Duration(0)): func() map[string]interface{} {
		return map[string]interface{}{"type": []interface{}{"string", "null"}, "pattern": "^" + goDuration + "$",
			"description": `A Go duration, e.g. "15s" or "1h30m".`}
	},
	reflect.TypeOf(config.SecondsOrDuration(0)): func() map[string]interface{} {
		return map[string]interface{}{"type": []interface{}{"number", "string", "null"}, "pattern": "^(" + floatNumber + "|" + goDuration + ")$",
			"description": `A number of seconds, or a Go duration such as "500ms".`}
	},
	reflect.TypeOf(config.MillisOrDuration(0)): func() map[string]interface{} {
		return map[string]interface{}{"type": []interface{}{"number", "string", "null"}, "pattern": "^(" + floatNumber + "|" + goDuration + ")$",
			"description": `A number of milliseconds, or a Go duration such as "250ms".`}
	},
	reflect.TypeOf(config.Scalar{}): func() map[string]interface{} {
		return map[string]interface{}{"type": []interface{}{"string", "boolean", "number", "null"}}
	},
}

// schemaGen builds JSON Schema (draft-07) from the config types. Struct
// types go to definitions, named by their Go type (config.FileWaves), and
// are referred to: one of them contains itself (restart.byAnnotation).
type schemaGen struct {
	defs map[string]interface{}
	errs []string
}

func (g *schemaGen) of(t reflect.Type, at string) map[string]interface{} {
	if s, ok := valueDecoderSchemas[t]; ok {
		return s()
	}
	if reflect.PointerTo(t).Implements(valueDecoderType) {
		g.errs = append(g.errs, fmt.Sprintf("%s (%s) decodes itself; describe it in valueDecoderSchemas", at, t))
		return nil
	}
	nullable := func(typ string) map[string]interface{} {
		return map[string]interface{}{"type": []interface{}{typ, "null"}}
	}
	switch t.Kind() {
	case reflect.Struct:
		name := t.String()
		if _, done := g.defs[name]; !done {
			g.defs[name] = nil // being built: a field of its own type refers to it
			s := g.object(t, at)
			s["type"] = []interface{}{"object", "null"}
			g.defs[name] = s
		}
		return map[string]interface{}{"$ref": "#/definitions/" + name}
	case reflect.Slice:
		s := nullable("array")
		s["items"] = g.of(t.Elem(), at+"[]")
		return s
	case reflect.String:
		return nullable("string")
	case reflect.Bool:
		return nullable("boolean")
	case reflect.Int:
		return nullable("integer")
	case reflect.Float64:
		return nullable("number")
	}
	// strictdecode panics on these too.
	g.errs = append(g.errs, fmt.Sprintf("%s: no schema for %s", at, t))
	return nil
}

// object is a struct's schema: its json-tagged fields, nothing else (the
// tag names strictdecode reads).
func (g *schemaGen) object(t reflect.Type, at string) map[string]interface{} {
	props := map[string]interface{}{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		props[name] = g.of(t.Field(i).Type, at+"."+name)
	}
	return map[string]interface{}{"type": "object", "additionalProperties": false, "properties": props}
}

// configSchema is the schema of the config block and the definitions it refers to.
func configSchema() (map[string]interface{}, map[string]interface{}, error) {
	g := &schemaGen{defs: map[string]interface{}{}}
	s := g.object(reflect.TypeOf(config.File{}), "config")
	if len(g.errs) > 0 {
		return nil, nil, fmt.Errorf("generating the config's schema: %s", strings.Join(g.errs, "; "))
	}
	s["description"] = "The controller's config file (examples/config.yaml documents every key), mounted at /etc/restart-controller/config.yaml."
	return s, g.defs, nil
}

// canonicalJSON is the file's formatting: two-space indent, keys sorted,
// no HTML escaping.
func canonicalJSON(v interface{}) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func schemaPath(t *testing.T) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(Chart(root), "values.schema.json")
}

func readSchema(t *testing.T) map[string]interface{} {
	t.Helper()
	raw, err := os.ReadFile(schemaPath(t))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]interface{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return doc
}

// TestValuesSchema: values.schema.json's config block and definitions are
// what the config types give, and the file is formatted as written here.
func TestValuesSchema(t *testing.T) {
	path := schemaPath(t)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := readSchema(t)
	cfg, defs, err := configSchema()
	if err != nil {
		t.Fatal(err)
	}
	props, ok := doc["properties"].(map[string]interface{})
	if !ok {
		t.Fatal("values.schema.json has no properties")
	}
	props["config"] = cfg
	doc["definitions"] = defs
	want, err := canonicalJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(raw, want) {
		return
	}
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote the config schema of", path)
		return
	}
	t.Errorf("values.schema.json differs from the config types (or is not formatted as generated); run: "+
		"go test ./charts -run TestValuesSchema -update\n%s", firstDiff(string(raw), string(want)))
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  file:      %s\n  generated: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d vs %d lines", len(al), len(bl))
}

// lookup walks the schema along a values path, following $ref, and says
// whether the schema names the key (a key of an object without properties,
// a pass-through such as resources, is anything).
func lookup(doc map[string]interface{}, path []string) (bool, string) {
	cur := doc
	for i, key := range path {
		for {
			ref, ok := cur["$ref"].(string)
			if !ok {
				break
			}
			def, _ := doc["definitions"].(map[string]interface{})[strings.TrimPrefix(ref, "#/definitions/")].(map[string]interface{})
			if def == nil {
				return false, "dangling " + ref
			}
			cur = def
		}
		props, ok := cur["properties"].(map[string]interface{})
		if !ok {
			return true, "" // a pass-through object
		}
		next, ok := props[key].(map[string]interface{})
		if !ok {
			return false, strings.Join(path[:i+1], ".") + " is not in the schema"
		}
		cur = next
	}
	return true, ""
}

// TestSchemaCoversTemplates: every value the templates read is one the
// schema allows; a key it refused could never be set.
func TestSchemaCoversTemplates(t *testing.T) {
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	doc := readSchema(t)
	files, err := filepath.Glob(filepath.Join(Chart(root), "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`\.Values((?:\.[A-Za-z0-9_]+)+)`)
	// dig "a" "b" list .Values.x reads .Values.x.a.b.
	dig := regexp.MustCompile(`dig((?: "[A-Za-z0-9_]+")+) [a-z]+ \.Values((?:\.[A-Za-z0-9_]+)+)`)
	seen := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ref.FindAllStringSubmatch(string(raw), -1) {
			seen[strings.TrimPrefix(m[1], ".")] = true
		}
		for _, m := range dig.FindAllStringSubmatch(string(raw), -1) {
			keys := strings.ReplaceAll(strings.TrimSpace(strings.ReplaceAll(m[1], `"`, "")), " ", ".")
			seen[strings.TrimPrefix(m[2], ".")+"."+keys] = true
		}
	}
	var paths []string
	for p := range seen {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	if len(paths) < 40 {
		t.Fatalf("found only %d values in the templates: %v", len(paths), paths)
	}
	for _, p := range paths {
		if ok, why := lookup(doc, strings.Split(p, ".")); !ok {
			t.Errorf("the templates read .Values.%s: %s", p, why)
		}
	}
}

// schemaError runs helm template and returns its error, "" when it renders.
func schemaError(t *testing.T, args ...string) string {
	t.Helper()
	h, root := helm(t)
	_, err := Render(context.Background(), h, Chart(root), release, namespace, args...)
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDurationPatterns holds the schema's duration patterns to the config's
// own decoders: every string a decoder accepts, the pattern accepts (the
// schema must never refuse a config the controller runs with). Strings up to
// four characters over the syntax's alphabet are tried exhaustively, then
// longer ones by hand; a few the patterns must refuse show they do refuse.
func TestDurationPatterns(t *testing.T) {
	cfg, defs, err := configSchema()
	if err != nil {
		t.Fatal(err)
	}
	pattern := func(s map[string]interface{}) *regexp.Regexp {
		return regexp.MustCompile(s["pattern"].(string))
	}
	props := cfg["properties"].(map[string]interface{})
	breaker := defs["config.FileBreaker"].(map[string]interface{})["properties"].(map[string]interface{})
	types := []struct {
		name    string
		pattern *regexp.Regexp
		decode  func(string) error
	}{
		{"Duration", pattern(breaker["window"].(map[string]interface{})), func(s string) error { var d config.Duration; return d.DecodeValue(s) }},
		{"SecondsOrDuration", pattern(props["restartGracePeriod"].(map[string]interface{})), func(s string) error { var d config.SecondsOrDuration; return d.DecodeValue(s) }},
		{"MillisOrDuration", pattern(props["restartCheckPeriod"].(map[string]interface{})), func(s string) error { var d config.MillisOrDuration; return d.DecodeValue(s) }},
	}
	alphabet := []string{"0", "1", "9", ".", "-", "+", "s", "m", "h", "n", "u", "µ", "e", "x", "p", "_", "a"}
	var inputs []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		inputs = append(inputs, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+c, n-1)
		}
	}
	grow("", 4)
	inputs = append(inputs, "1h30m", "1h30m0.5s", "2h45m10s500ms", "1.5h", "-1.5h", "+.5s", "5.s", "10us", "10µs", "10μs",
		"100ns", "1e3", "1E-3", "-2.5e+2", "0x1p3", "0x1.8p-1", "0X_1p0", "0x1_0p0", "1_000", "Inf", "NaN", "1d", "5 s", " 5s", "5s ")
	accepted := map[string]int{}
	for _, typ := range types {
		for _, s := range inputs {
			if typ.decode(s) == nil {
				accepted[typ.name]++
				if !typ.pattern.MatchString(s) {
					t.Errorf("%s: the controller reads %q, the schema refuses it", typ.name, s)
				}
			}
		}
		for _, s := range []string{"", "abc", "5 s", "1d", "s", "--1s", "Inf", "NaN", "1.2.3"} {
			if typ.pattern.MatchString(s) {
				t.Errorf("%s: the schema accepts %q", typ.name, s)
			}
		}
	}
	t.Logf("%d strings tried; accepted by the decoders: %v", len(inputs), accepted)
}

// configCase is a config block the controller and the schema must judge
// alike: decoder is what config.Parse says (empty: it accepts), schema the
// line helm prints (empty: it renders).
type configCase struct {
	name, config, decoder, schema string
}

const deployments = "{group: apps, version: v1, resource: deployments, podTemplatePath: spec.template"

var configCases = []configCase{
	// Accepted by both, in every form the types read.
	{"grace as seconds", "restartGracePeriod: 30", "", ""},
	{"grace as a fraction", "restartGracePeriod: 0.5", "", ""},
	{"grace as a duration", "restartGracePeriod: 30s", "", ""},
	{"grace as a string number", "restartGracePeriod: '1.5'", "", ""},
	{"check period", "restartCheckPeriod: 250ms", "", ""},
	{"breaker durations", "breaker: {window: 1h30m, quiet: '0'}", "", ""},
	{"float fields", "kubeAPIQPS: 50.5\nwaves: {growth: 1.5}", "", ""},
	{"scalars", "workloads:\n  - " + deployments + ", notRolledWhen: [{path: a, equals: true}, {path: b, equals: 1}, {path: c, equals: x}]}", "", ""},
	{"null in a list item", "workloads:\n  - " + deployments + ", rollout: null}", "", ""},
	{"nested strategies", "workloads:\n  - " + deployments + ", rollout: {status: conditions, readyConditions: [Ready], deadline: 15m},\n" +
		"     restart: {strategy: templateAnnotation, byAnnotation: [{value: r, strategy: templateAnnotation}]}}", "", ""},
	{"sinks", "notifications: {sinks: [{name: a, type: webhook, urlSecret: {name: s, key: k}, send: [hold], ratePerSecond: 0.5, burst: 2}]}", "", ""},
	// Bounds are the controller's: the schema types, it does not range.
	{"out of bounds", "workers: 0", "workers: must be between 1 and 1000", ""},

	// Refused by both, at the same place.
	{"string for an integer", "waves: {unpacedUpTo: abc}", `waves.unpacedUpTo: must be an integer, got string "abc"`,
		"- at '/config/waves/unpacedUpTo': got string, want null or integer"},
	{"fraction for an integer", "workers: 1.5", "workers: must be an integer", "- at '/config/workers': got number, want null or integer"},
	{"unknown key", "wavess: {unpacedUpTo: 3}", "wavess: unknown field", "- at '/config': additional properties 'wavess' not allowed"},
	{"unknown nested key", "workloads:\n  - {group: apps, version: v1, resource: deployments, podTmplatePath: spec.template}",
		"workloads[0].podTmplatePath: unknown field", "- at '/config/workloads/0': additional properties 'podTmplatePath' not allowed"},
	{"number for a duration", "breaker: {window: 30}", "breaker.window: must be a Go duration", "- at '/config/breaker/window': got number, want null or string"},
	{"not a duration", "breaker: {window: 30 minutes}", "breaker.window: must be a Go duration", "- at '/config/breaker/window': '30 minutes' does not match pattern"},
	{"not seconds", "restartGracePeriod: 5 s", "restartGracePeriod: must be a number of seconds", "- at '/config/restartGracePeriod': '5 s' does not match pattern"},
	{"list for a scalar", "workloads:\n  - " + deployments + ", notRolledWhen: [{path: a, equals: [x]}]}",
		"workloads[0].notRolledWhen[0].equals: must be a string, boolean or number", "- at '/config/workloads/0/notRolledWhen/0/equals': got array, want"},
	{"number in a nested strategy", "workloads:\n  - " + deployments + ", restart: {byAnnotation: [{value: r, strategy: 1}]}}",
		"workloads[0].restart.byAnnotation[0].strategy: must be a string", "- at '/config/workloads/0/restart/byAnnotation/0/strategy': got number, want null or string"},
	{"boolean for a string", "annotations: {optIn: true}", "annotations.optIn: must be a string", "- at '/config/annotations/optIn': got boolean, want null or string"},
	{"string for a list", "namespaces: default", "namespaces: must be a list", "- at '/config/namespaces': got string, want null or array"},
}

// TestSchemaAgreesWithDecoder renders config blocks with helm (which
// validates values.schema.json) and parses them with the controller's
// loader: what one refuses for its type or an unknown key, so does the
// other, at the same path; what the controller accepts, the schema does.
func TestSchemaAgreesWithDecoder(t *testing.T) {
	helm(t) // build it once, before the parallel subtests
	for _, c := range configCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := config.Parse([]byte(c.config))
			switch {
			case c.decoder == "" && err != nil:
				t.Errorf("the controller refuses it: %v", err)
			case c.decoder != "" && (err == nil || !strings.Contains(err.Error(), c.decoder)):
				t.Errorf("the controller says %v, want %q", err, c.decoder)
			}
			var cfg interface{}
			if err := yaml.Unmarshal([]byte(c.config), &cfg); err != nil {
				t.Fatal(err)
			}
			values := writeValues(t, map[string]interface{}{"config": cfg})
			got := schemaError(t, "-f", values)
			switch {
			case c.schema == "" && got != "":
				t.Errorf("the chart refuses it:\n%s", got)
			case c.schema != "" && !strings.Contains(got, c.schema):
				t.Errorf("helm says\n%s\nwant a line %q", got, c.schema)
			}
		})
	}
}

// TestSchemaRefusesChartValues: the chart's own values are typed and
// closed; pass-through objects take any keys.
func TestSchemaRefusesChartValues(t *testing.T) {
	helm(t)
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"waves.unpacedUpTo=3"}, "- at '': additional properties 'waves' not allowed"},
		{[]string{"replicaCount=two"}, "- at '/replicaCount': got string, want integer"},
		{[]string{"serviceMonitor.enable=true"}, "- at '/serviceMonitor': additional properties 'enable' not allowed"},
		{[]string{"image.pullPolicy=Sometimes"}, "- at '/image/pullPolicy': value must be one of"},
		{[]string{"image.digest=latest"}, "- at '/image/digest': 'latest' does not match pattern"},
		{[]string{"podAnnotations.a=1"}, "- at '/podAnnotations/a': got number, want string"},
		{[]string{"service.port=0"}, "- at '/service/port': minimum: got 0, want 1"},
		{[]string{"resources=big"}, "- at '/resources': got string, want object"},
		// Accepted: pass-through objects, global, the values' own forms.
		{[]string{"resources.limits.cpu=1", "affinity.nodeAffinity.x=y", "tolerations[0].key=k", "nodeSelector.zone=a"}, ""},
		{[]string{"global.imageRegistry=r.example", "global.anything.deep=1"}, ""},
		{[]string{"podDisruptionBudget.minAvailable=50%"}, ""},
		{[]string{"image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, ""},
	} {
		t.Run(strings.Join(c.set, ","), func(t *testing.T) {
			t.Parallel()
			var args []string
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			got := schemaError(t, args...)
			switch {
			case c.want == "" && got != "":
				t.Errorf("the chart refuses it:\n%s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("helm says\n%s\nwant a line %q", got, c.want)
			}
		})
	}
}

// TestChartAsDependency: as a dependency of another chart, the chart gets
// the parent's global values (which its schema must let through) and its
// own under its name, still checked by its schema.
func TestChartAsDependency(t *testing.T) {
	h, root := helm(t)
	parent := filepath.Join(t.TempDir(), "parent")
	if err := copyDir(Chart(root), filepath.Join(parent, "charts", "restart-controller")); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: parent\nversion: 0.1.0\n",
		"values.yaml": "global:\n  imageRegistry: registry.example\nrestart-controller:\n  replicaCount: 1\n  leaderElection: {enabled: false}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := Render(context.Background(), h, parent, "app", namespace)
	if err != nil {
		t.Fatalf("the chart as a dependency with global values: %v", err)
	}
	if n := kinds(objs)["Deployment"]; n != 1 {
		t.Errorf("%d Deployments rendered, want the dependency's one", n)
	}
	_, err = Render(context.Background(), h, parent, "app", namespace, "--set", "restart-controller.waves.unpacedUpTo=3")
	if err == nil || !strings.Contains(err.Error(), "restart-controller:\n- at '': additional properties 'waves' not allowed") {
		t.Errorf("a misplaced key in the dependency's values: %v, want its schema's refusal", err)
	}
}

func copyDir(from, to string) error {
	return filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
}

func writeValues(t *testing.T, values map[string]interface{}) string {
	t.Helper()
	out, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// operationsExamples are the installs docs/operations.md shows failing:
// the wrong type and misplaced key.
var operationsExamples = [][]string{
	{"--set", "config.waves.unpacedUpTo=abc"},
	{"--set", "waves.unpacedUpTo=3"},
}

// TestOperationsExamples writes docs/operations.md's examples from what
// helm says. helm template validates values as helm install does, without
// a cluster; install prefixes its error with "INSTALLATION FAILED: ", which
// test/e2e (TestChartInstallRefusesBadValues) checks by installing them.
func TestOperationsExamples(t *testing.T) {
	h, root := helm(t)
	var examples []Example
	for _, args := range operationsExamples {
		cmd := exec.Command(h, append([]string{"template", release, Chart(root), "--namespace", namespace}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err == nil {
			t.Fatalf("helm template %s renders", args)
		}
		msg, ok := strings.CutPrefix(strings.TrimRight(stderr.String(), "\n"), "Error: ")
		if !ok {
			t.Fatalf("helm template %s: %s", args, stderr.String())
		}
		examples = append(examples, Example{Args: args, Output: "Error: INSTALLATION FAILED: " + msg})
	}
	text, changed, err := WriteExamples(root, examples)
	if err != nil {
		t.Fatal(err)
	}
	if !changed {
		read, err := ReadExamples(root)
		if err != nil || !reflect.DeepEqual(read, examples) {
			t.Errorf("docs/operations.md's examples read back as %+v (%v), want %+v", read, err, examples)
		}
		return
	}
	if *update {
		if err := os.WriteFile(OperationsDoc(root), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote the examples of docs/operations.md")
		return
	}
	t.Error("docs/operations.md's Helm examples differ from what helm says; run: go test ./charts -run TestOperationsExamples -update")
}
