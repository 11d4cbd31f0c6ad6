package refs

import (
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestParsePath(t *testing.T) {
	tests := []struct {
		in       string
		want     string
		wildcard bool
		err      string
	}{
		{in: "spec.template", want: "spec.template"},
		{in: "$.spec.template", want: "spec.template"},
		{in: ".spec.template", want: "spec.template"},
		{in: "volumes[*].configMap", want: "volumes[*].configMap", wildcard: true},
		{in: "containers[*].env[*].valueFrom.configMapKeyRef", want: "containers[*].env[*].valueFrom.configMapKeyRef", wildcard: true},
		{in: "items[*].key", want: "items[*].key", wildcard: true},
		{in: "a_b-9[*]", want: "a_b-9[*]", wildcard: true},

		{in: "", err: "empty path"},
		{in: "$.", err: "empty path"},
		{in: ".", err: "empty path"},
		{in: "spec..x", err: "empty segment at offset 5"},
		{in: "$.spec.", err: "empty segment at offset 7"},
		{in: "foo[0]", err: "unexpected character '[' at offset 3: only [*] is supported"},
		{in: "foo[*", err: "unexpected character '[' at offset 3: only [*] is supported"},
		{in: "foo[*][*]", err: "unexpected character '[' at offset 6"},
		{in: "[*]", err: "unexpected character '[' at offset 0"},
		{in: "spec template", err: "unexpected character ' ' at offset 4"},
		{in: "$spec", err: "unexpected character '$' at offset 0"},
		{in: "a.ü", err: "unexpected character 'ü' at offset 2"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParsePath(tt.in)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("ParsePath(%q) error = %v, want %q", tt.in, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePath(%q): %v", tt.in, err)
			}
			if got := p.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := p.HasWildcard(); got != tt.wildcard {
				t.Errorf("HasWildcard() = %v, want %v", got, tt.wildcard)
			}
		})
	}
}

func TestPathEach(t *testing.T) {
	doc := fromYAML(t, `
a:
  b: 1
  list:
  - k: x
  - k: w
  - 7
  - null
  - k: [z]
  str: s
  nil: null
`)
	tests := []struct {
		path string
		want []interface{}
	}{
		{"a.b", []interface{}{float64(1)}},
		{"a.list[*].k", []interface{}{"x", "w", []interface{}{"z"}}},
		{"a.list[*]", []interface{}{map[string]interface{}{"k": "x"}, map[string]interface{}{"k": "w"}, float64(7), map[string]interface{}{"k": []interface{}{"z"}}}},
		{"a.missing", nil},
		{"a.b.c", nil},
		{"a.b[*]", nil},
		{"a.str[*].k", nil},
		{"a.nil", nil},
		{"a.nil[*]", nil},
		{"a.list[*].k[*]", []interface{}{"z"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			var got []interface{}
			MustParsePath(tt.path).Each(doc, func(v interface{}) { got = append(got, v) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Each(%s) = %#v, want %#v", tt.path, got, tt.want)
			}
		})
	}
}

func TestPathEachNonMapRoots(t *testing.T) {
	for _, root := range []interface{}{nil, "x", 1.0, []interface{}{map[string]interface{}{"a": 1}}} {
		MustParsePath("a").Each(root, func(v interface{}) {
			t.Errorf("Each on %#v reached %#v", root, v)
		})
	}
}

func TestPathObject(t *testing.T) {
	doc := fromYAML(t, `
spec:
  template:
    spec: {containers: []}
  replicas: 3
`)
	tests := []struct {
		path string
		ok   bool
	}{
		{"spec.template", true},
		{"spec.template.spec", true},
		{"spec.replicas", false},
		{"spec.missing", false},
		{"spec[*]", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			m, ok := MustParsePath(tt.path).Object(doc)
			if ok != tt.ok || (m != nil) != tt.ok {
				t.Errorf("Object(%s) = %v, %v; want ok=%v", tt.path, m, ok, tt.ok)
			}
		})
	}
	if m, ok := (Path{}).Object(doc); !ok || !reflect.DeepEqual(m, doc) {
		t.Errorf("zero Path should reach the object itself")
	}
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{"spec.template", "$.a[*].b", ".x", "a..b", "a[", "[*]", "a[*][*]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePath(s)
		if err != nil {
			return
		}
		again, err := ParsePath(p.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", p.String(), s, err)
		}
		if !reflect.DeepEqual(again, p) {
			t.Fatalf("canonical form %q of %q parses differently", p.String(), s)
		}
	})
}

func fromYAML(t testing.TB, s string) map[string]interface{} {
	t.Helper()
	var m map[string]interface{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return m
}
