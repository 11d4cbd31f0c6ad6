package refs

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// defaultSpecs mirrors the "references" of examples/config.yaml, so that
// every reference form Kubernetes has is covered here too.
var defaultSpecs = []Spec{
	{Source: "configmap", From: []string{"volumes[*].configMap", "volumes[*].projected.sources[*].configMap"}, Name: "name", Keys: "items[*].key", Optional: "optional"},
	{Source: "secret", From: []string{"volumes[*].secret"}, Name: "secretName", Keys: "items[*].key", Optional: "optional"},
	{Source: "secret", From: []string{"volumes[*].projected.sources[*].secret"}, Name: "name", Keys: "items[*].key", Optional: "optional"},
	{Source: "configmap", From: []string{"containers[*].envFrom[*].configMapRef", "initContainers[*].envFrom[*].configMapRef", "ephemeralContainers[*].envFrom[*].configMapRef"}, Name: "name", Optional: "optional"},
	{Source: "secret", From: []string{"containers[*].envFrom[*].secretRef", "initContainers[*].envFrom[*].secretRef", "ephemeralContainers[*].envFrom[*].secretRef"}, Name: "name", Optional: "optional"},
	{Source: "configmap", From: []string{"containers[*].env[*].valueFrom.configMapKeyRef", "initContainers[*].env[*].valueFrom.configMapKeyRef", "ephemeralContainers[*].env[*].valueFrom.configMapKeyRef"}, Name: "name", Keys: "key", Optional: "optional"},
	{Source: "secret", From: []string{"containers[*].env[*].valueFrom.secretKeyRef", "initContainers[*].env[*].valueFrom.secretKeyRef", "ephemeralContainers[*].env[*].valueFrom.secretKeyRef"}, Name: "name", Keys: "key", Optional: "optional"},
}

func compileAll(t testing.TB, specs []Spec) []*Extractor {
	t.Helper()
	var out []*Extractor
	for i, s := range specs {
		e, err := Compile(s)
		if err != nil {
			t.Fatalf("spec %d: %v", i, err)
		}
		out = append(out, e)
	}
	return out
}

func extractAll(es []*Extractor, podSpec map[string]interface{}) []Ref {
	var out []Ref
	for _, e := range es {
		out = e.Extract(podSpec, out)
	}
	return out
}

func TestExtractDefaultForms(t *testing.T) {
	extractors := compileAll(t, defaultSpecs)
	tests := []struct {
		name    string
		podSpec string
		want    []Ref
	}{
		{
			name:    "no references",
			podSpec: `{containers: [{name: app, image: nginx}]}`,
		},
		{
			name: "volume configMap whole, with items, optional",
			podSpec: `
volumes:
- name: a
  configMap: {name: whole}
- name: b
  configMap:
    name: some
    optional: true
    items: [{key: z, path: z}, {key: a, path: a}, {key: z, path: z2}]
- name: c
  configMap: {name: empty-items, items: []}
- name: d
  emptyDir: {}`,
			want: []Ref{
				{Kind: "configmap", Name: "whole"},
				{Kind: "configmap", Name: "some", Keys: []string{"a", "z"}, Optional: true},
				{Kind: "configmap", Name: "empty-items"},
			},
		},
		{
			name: "volume secret uses secretName",
			podSpec: `
volumes:
- name: a
  secret: {secretName: whole}
- name: b
  secret: {secretName: some, optional: false, items: [{key: tls.crt, path: c}]}
- name: c
  secret: {name: wrong-field}`,
			want: []Ref{
				{Kind: "secret", Name: "whole"},
				{Kind: "secret", Name: "some", Keys: []string{"tls.crt"}},
			},
		},
		{
			name: "projected sources",
			podSpec: `
volumes:
- name: p
  projected:
    sources:
    - configMap: {name: cm, items: [{key: k, path: k}]}
    - secret: {name: sec, optional: true}
    - serviceAccountToken: {path: token}
    - downwardAPI: {items: []}`,
			want: []Ref{
				{Kind: "configmap", Name: "cm", Keys: []string{"k"}},
				{Kind: "secret", Name: "sec", Optional: true},
			},
		},
		{
			name: "envFrom in every container list",
			podSpec: `
containers:
- name: app
  envFrom:
  - configMapRef: {name: app-cm}
  - secretRef: {name: app-sec, optional: true}
    prefix: S_
initContainers:
- name: init
  envFrom: [{configMapRef: {name: init-cm, optional: true}}, {secretRef: {name: init-sec}}]
ephemeralContainers:
- name: debug
  envFrom: [{configMapRef: {name: eph-cm}}, {secretRef: {name: eph-sec}}]`,
			want: []Ref{
				{Kind: "configmap", Name: "app-cm"},
				{Kind: "configmap", Name: "init-cm", Optional: true},
				{Kind: "configmap", Name: "eph-cm"},
				{Kind: "secret", Name: "app-sec", Optional: true},
				{Kind: "secret", Name: "init-sec"},
				{Kind: "secret", Name: "eph-sec"},
			},
		},
		{
			name: "env valueFrom key refs in every container list",
			podSpec: `
containers:
- name: app
  env:
  - {name: PLAIN, value: x}
  - name: A
    valueFrom: {configMapKeyRef: {name: app-cm, key: a}}
  - name: B
    valueFrom: {secretKeyRef: {name: app-sec, key: b, optional: true}}
  - name: F
    valueFrom: {fieldRef: {fieldPath: metadata.name}}
initContainers:
- name: init
  env: [{name: C, valueFrom: {configMapKeyRef: {name: init-cm, key: c, optional: true}}}]
ephemeralContainers:
- name: debug
  env: [{name: D, valueFrom: {secretKeyRef: {name: eph-sec, key: d}}}]`,
			want: []Ref{
				{Kind: "configmap", Name: "app-cm", Keys: []string{"a"}},
				{Kind: "configmap", Name: "init-cm", Keys: []string{"c"}, Optional: true},
				{Kind: "secret", Name: "app-sec", Keys: []string{"b"}, Optional: true},
				{Kind: "secret", Name: "eph-sec", Keys: []string{"d"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := extractAll(extractors, fromYAML(t, tt.podSpec))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestExtractHostile(t *testing.T) {
	extractors := compileAll(t, defaultSpecs)
	tests := []struct {
		name    string
		podSpec string
		want    []Ref
	}{
		{name: "volumes is a string", podSpec: `{volumes: nope}`},
		{name: "volumes is a map", podSpec: `{volumes: {configMap: {name: x}}}`},
		{name: "volume entries of every type", podSpec: `{volumes: [null, 1, true, x, [], {configMap: null}, {configMap: 5}, {configMap: [a]}]}`},
		{name: "name of the wrong type", podSpec: `{volumes: [{configMap: {name: 5}}, {configMap: {name: [x]}}, {configMap: {name: {a: b}}}, {configMap: {name: null}}]}`},
		{name: "empty name", podSpec: `{volumes: [{configMap: {name: ""}}]}`},
		{name: "optional not a bool", podSpec: `{volumes: [{configMap: {name: a, optional: "true"}}, {configMap: {name: b, optional: 1}}]}`},
		{name: "items not a list", podSpec: `{volumes: [{configMap: {name: a, items: {key: x}}}]}`},
		{name: "item key not a string", podSpec: `{volumes: [{configMap: {name: a, items: [{key: 1}]}}]}`},
		{name: "item key empty", podSpec: `{volumes: [{configMap: {name: a, items: [{key: ""}]}}]}`},
		{name: "item not a map", podSpec: `{volumes: [{configMap: {name: a, items: [x]}}]}`},
		{name: "env key not a string", podSpec: `{containers: [{env: [{valueFrom: {configMapKeyRef: {name: a, key: 1}}}]}]}`},
		{name: "containers of the wrong type", podSpec: `{containers: x, initContainers: {a: b}, ephemeralContainers: [1, [2], {envFrom: 3}, {env: [null, {valueFrom: x}]}]}`},
		{
			name:    "bad siblings do not hide good ones",
			podSpec: `{volumes: [{configMap: {name: 5}}, {configMap: {name: good}}, {configMap: {name: a, items: [{key: 1}]}}]}`,
			want:    []Ref{{Kind: "configmap", Name: "good"}},
		},
		{
			name:    "items entries without a key are not keys",
			podSpec: `{volumes: [{configMap: {name: a, items: [{path: p}, null]}}]}`,
			want:    []Ref{{Kind: "configmap", Name: "a"}},
		},
		{
			name:    "null items and optional read as unset",
			podSpec: `{volumes: [{configMap: {name: a, items: null, optional: null}}]}`,
			want:    []Ref{{Kind: "configmap", Name: "a"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := extractAll(extractors, fromYAML(t, tt.podSpec))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestExtractAppends(t *testing.T) {
	e := compileAll(t, defaultSpecs[:1])[0]
	prior := []Ref{{Kind: "x", Name: "y"}}
	got := e.Extract(fromYAML(t, `{volumes: [{configMap: {name: a}}]}`), prior)
	want := []Ref{{Kind: "x", Name: "y"}, {Kind: "configmap", Name: "a"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if e.Source() != "configmap" {
		t.Errorf("Source() = %q", e.Source())
	}
}

func TestExtractPlaces(t *testing.T) {
	custom := []Spec{
		{Source: "bundle", From: []string{"$.bundles[*]", "sidecars[*].bundleRefs[*].ref"}, Name: "id", Keys: "only[*]"},
		{Source: "bundle", From: []string{"extra.bundle"}, Name: "id", Optional: "opt"},
	}
	tests := []struct {
		name    string
		specs   []Spec
		podSpec string
		want    []Placed
	}{
		{
			name:  "default forms: elements by name, else by index",
			specs: defaultSpecs,
			podSpec: `
volumes:
- name: cfg
  configMap: {name: whole}
- projected: {sources: [{serviceAccountToken: {path: t}}, {secret: {name: sec, items: [{key: k}]}}]}
containers:
- name: app
  envFrom: [{configMapRef: {name: app-cm}}]
  env: [{name: COLOR, valueFrom: {configMapKeyRef: {name: app-cm, key: color, optional: true}}}]`,
			want: []Placed{
				{Ref: Ref{Kind: "configmap", Name: "whole"}, Spec: 0, Place: "volumes[cfg].configMap"},
				{Ref: Ref{Kind: "secret", Name: "sec", Keys: []string{"k"}}, Spec: 2, Place: "volumes[1].projected.sources[1].secret"},
				{Ref: Ref{Kind: "configmap", Name: "app-cm"}, Spec: 3, Place: "containers[app].envFrom[0].configMapRef"},
				{Ref: Ref{Kind: "configmap", Name: "app-cm", Keys: []string{"color"}, Optional: true}, Spec: 5, Place: "containers[app].env[COLOR].valueFrom.configMapKeyRef"},
			},
		},
		{
			name:    "names that are not strings or are empty name nothing",
			specs:   defaultSpecs,
			podSpec: `{containers: [{name: 5, envFrom: [{configMapRef: {name: a}}]}, {name: "", envFrom: [{configMapRef: {name: b}}]}]}`,
			want: []Placed{
				{Ref: Ref{Kind: "configmap", Name: "a"}, Spec: 3, Place: "containers[0].envFrom[0].configMapRef"},
				{Ref: Ref{Kind: "configmap", Name: "b"}, Spec: 3, Place: "containers[1].envFrom[0].configMapRef"},
			},
		},
		{
			name:  "custom forms: $. prefix, trailing [*], wildcard-free",
			specs: custom,
			podSpec: `
bundles: [{id: a}, {name: named, id: b, only: [x, z]}, x, {id: 5}]
sidecars: [{name: s, bundleRefs: [{ref: {id: c}}, {ref: null}]}]
extra: {bundle: {id: a, opt: true}}`,
			want: []Placed{
				{Ref: Ref{Kind: "bundle", Name: "a"}, Spec: 0, Place: "bundles[0]"},
				{Ref: Ref{Kind: "bundle", Name: "b", Keys: []string{"x", "z"}}, Spec: 0, Place: "bundles[named]"},
				{Ref: Ref{Kind: "bundle", Name: "c"}, Spec: 0, Place: "sidecars[s].bundleRefs[0].ref"},
				{Ref: Ref{Kind: "bundle", Name: "a", Optional: true}, Spec: 1, Place: "extra.bundle"},
			},
		},
		{
			name:    "hostile shapes reach nothing",
			specs:   defaultSpecs,
			podSpec: `{volumes: {configMap: {name: x}}, containers: [null, 1, [], {envFrom: 3}, {env: [null, {valueFrom: x}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extractors := compileAll(t, tt.specs)
			podSpec := fromYAML(t, tt.podSpec)
			got := ExtractPlaces(extractors, podSpec)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			// The places are of exactly the references Extract finds.
			var refs []Ref
			for _, p := range got {
				refs = append(refs, p.Ref)
			}
			if want := extractAll(extractors, podSpec); !reflect.DeepEqual(refs, want) {
				t.Errorf("refs %+v, Extract finds %+v", refs, want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []string
	}{
		{
			name: "everything missing",
			spec: Spec{},
			want: []string{"source: required", "from: required", "name: required"},
		},
		{
			name: "bad paths",
			spec: Spec{Source: "c", From: []string{"ok", "a[0]", "b..c"}, Name: "x[*]", Keys: "k.", Optional: "o[*]"},
			want: []string{
				"from[1]: unexpected character '[' at offset 1: only [*] is supported",
				"from[2]: empty segment at offset 2",
				"name: must not contain [*]",
				"keys: empty segment at offset 2",
				"optional: must not contain [*]",
			},
		},
		{
			name: "bad name path",
			spec: Spec{Source: "c", From: []string{"a"}, Name: "a b"},
			want: []string{"name: unexpected character ' ' at offset 1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Compile(tt.spec)
			if err == nil {
				t.Fatalf("Compile succeeded: %+v", e)
			}
			joined, ok := err.(interface{ Unwrap() []error })
			if !ok {
				t.Fatalf("error is not joined: %v", err)
			}
			var got []string
			for _, e := range joined.Unwrap() {
				if _, ok := e.(*FieldError); !ok {
					t.Errorf("%v is a %T, want *FieldError", e, e)
				}
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func FuzzExtract(f *testing.F) {
	for _, s := range []string{
		`{"volumes":[{"configMap":{"name":"a","items":[{"key":"k"}],"optional":true}}]}`,
		`{"volumes":[{"projected":{"sources":[{"secret":{"name":"s"}}]}}]}`,
		`{"containers":[{"env":[{"valueFrom":{"secretKeyRef":{"name":"s","key":1}}}],"envFrom":[{"configMapRef":{"name":"c"}}]}]}`,
		`{"volumes":"x","containers":[null,[],{"envFrom":{}}]}`,
	} {
		f.Add([]byte(s))
	}
	extractors := compileAll(f, defaultSpecs)
	f.Fuzz(func(t *testing.T, data []byte) {
		var podSpec map[string]interface{}
		if json.Unmarshal(data, &podSpec) != nil {
			return
		}
		for _, r := range extractAll(extractors, podSpec) {
			if r.Name == "" || (r.Keys != nil && len(r.Keys) == 0) {
				t.Fatalf("malformed ref %+v from %s", r, data)
			}
		}
		placed := ExtractPlaces(extractors, podSpec)
		var refs []Ref
		for _, p := range placed {
			refs = append(refs, p.Ref)
		}
		if want := extractAll(extractors, podSpec); !reflect.DeepEqual(refs, want) {
			t.Fatalf("ExtractPlaces finds %+v, Extract %+v, in %s", refs, want, data)
		}
	})
}

// BenchmarkExtract is the controller's extraction of every default form
// from a pod spec with one reference of each kind; ExtractPlaces must not
// add to its allocations.
func BenchmarkExtract(b *testing.B) {
	extractors := compileAll(b, defaultSpecs)
	podSpec := map[string]interface{}{}
	if err := json.Unmarshal([]byte(`{
		"volumes": [{"name": "v", "configMap": {"name": "cm", "items": [{"key": "k"}]}}, {"name": "s", "secret": {"secretName": "sec"}}],
		"containers": [{"name": "app",
			"envFrom": [{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "sec", "optional": true}}],
			"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "a"}}}]}]
	}`), &podSpec); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	out := make([]Ref, 0, 16)
	for i := 0; i < b.N; i++ {
		out = out[:0]
		for _, e := range extractors {
			out = e.Extract(podSpec, out)
		}
	}
}
