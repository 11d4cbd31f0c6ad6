package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestOptInsReadOnPodTemplates: where each entry is read, how its values
// count, and what check and explain say of it.
func TestOptInsReadOnPodTemplates(t *testing.T) {
	cfg, err := Parse([]byte(`
optInAnnotations:
- {annotation: example.com/auto, parseBool: true, readFrom: podTemplate, optOut: true}
sourceListAnnotations:
- {annotation: example.com/reload, source: secret, optIn: true, readFrom: both}
excludeAnnotations:
- {annotation: example.com/exclude, source: configmap}`))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.OptInRules().ReadsPodTemplate() {
		t.Error("ReadsPodTemplate is false")
	}
	on := func(workload, template map[string]string) WorkloadAnnotations {
		return WorkloadAnnotations{Workload: workload, PodTemplate: template}
	}
	if cfg.OptInRules().Coverage(on(map[string]string{"example.com/auto": "1"}, nil)).OptedIn {
		t.Error("opted in by the workload's annotation; it is read on the pod template")
	}
	if !cfg.OptInRules().Coverage(on(nil, map[string]string{"example.com/auto": "1"})).OptedIn {
		t.Error("not opted in by the pod template's annotation")
	}
	listed, optsIn := cfg.OptInRules().ListedSourcesOf(on(map[string]string{"example.com/reload": "a"}, map[string]string{"example.com/reload": "b"}), "ns", false)
	if !optsIn || len(listed) != 1 || listed[0].Name != "a" {
		t.Errorf("listed %+v, opts in %v; want the workload's a only", listed, optsIn)
	}
	listed, _ = cfg.OptInRules().ListedSourcesOf(on(map[string]string{"other": "x"}, map[string]string{"example.com/reload": "b"}), "ns", false)
	if len(listed) != 1 || listed[0].Name != "b" {
		t.Errorf("listed %+v; want the pod template's b", listed)
	}
	if got := cfg.OptInRules().ExcludedSources(map[string]string{"example.com/exclude": " a, ,ns/b,c"}); !reflect.DeepEqual(got, []ExcludedSource{
		{Entry: "configmap/a", Annotation: "example.com/exclude"}, {Entry: "configmap/c", Annotation: "example.com/exclude"}}) {
		t.Errorf("excluded %q", got)
	}
	want := []string{
		"com.xing.deployment-restart: enabled",
		"example.com/auto: a value strconv.ParseBool reads as true (1, t, T, TRUE, true, True) (read on the pod template; with optInAll, another value opts out)",
		"example.com/reload: NAME,... (secret sources it lists; opts in for them; read on the workload, or on the pod template for a source kind none of whose annotations read this way are on the workload)",
	}
	if got := cfg.OptInRules().Descriptions(); !reflect.DeepEqual(got, want) {
		t.Errorf("descriptions\n%q\nwant\n%q", got, want)
	}
	cfg.OptInAll = true
	if got := cfg.OptInRules().Descriptions(); len(got) != 4 || !strings.Contains(got[1], "optInAll") {
		t.Errorf("with optInAll, descriptions %q", got)
	}
}
