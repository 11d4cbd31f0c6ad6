package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestCoverageNeedsNoSourceAnnotationWhenAnyOptInDoesNot: of two opt-ins
// covering a kind, the one without a source annotation decides, whatever
// their order in the file.
func TestCoverageNeedsNoSourceAnnotationWhenAnyOptInDoesNot(t *testing.T) {
	cfg, err := Parse([]byte(`
optInAnnotations:
- {annotation: example.com/search, sourceAnnotation: example.com/match}
- {annotation: example.com/configmaps, sources: [configmap]}`))
	if err != nil {
		t.Fatal(err)
	}
	cov := cfg.Coverage(WorkloadAnnotations{Workload: map[string]string{"example.com/search": "true", "example.com/configmaps": "TRUE"}})
	if !cov.OptedIn {
		t.Fatal("not opted in")
	}
	for kind, want := range map[string]string{"configmap": "", "secret": "example.com/match"} {
		if got, ok := cov.Covers(kind); !ok || got != want {
			t.Errorf("%s: covered %v, source annotation %q; want %q", kind, ok, got, want)
		}
	}
	cov = cfg.Coverage(WorkloadAnnotations{Workload: map[string]string{"example.com/configmaps": "yes"}})
	if cov.OptedIn {
		t.Error(`"yes" opted in; only the configured value does`)
	}
}

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
	if !cfg.ReadsPodTemplate() {
		t.Error("ReadsPodTemplate is false")
	}
	on := func(workload, template map[string]string) WorkloadAnnotations {
		return WorkloadAnnotations{Workload: workload, PodTemplate: template}
	}
	if cfg.Coverage(on(map[string]string{"example.com/auto": "1"}, nil)).OptedIn {
		t.Error("opted in by the workload's annotation; it is read on the pod template")
	}
	if !cfg.Coverage(on(nil, map[string]string{"example.com/auto": "1"})).OptedIn {
		t.Error("not opted in by the pod template's annotation")
	}
	listed, optsIn := cfg.ListedSourcesOf(on(map[string]string{"example.com/reload": "a"}, map[string]string{"example.com/reload": "b"}), "ns", false)
	if !optsIn || len(listed) != 1 || listed[0].Name != "a" {
		t.Errorf("listed %+v, opts in %v; want the workload's a only", listed, optsIn)
	}
	listed, _ = cfg.ListedSourcesOf(on(map[string]string{"other": "x"}, map[string]string{"example.com/reload": "b"}), "ns", false)
	if len(listed) != 1 || listed[0].Name != "b" {
		t.Errorf("listed %+v; want the pod template's b", listed)
	}
	if got := cfg.ExcludedSources(map[string]string{"example.com/exclude": " a, ,ns/b,c"}); !reflect.DeepEqual(got, []ExcludedSource{
		{"configmap/a", "example.com/exclude"}, {"configmap/c", "example.com/exclude"}}) {
		t.Errorf("excluded %q", got)
	}
	want := []string{
		"com.xing.deployment-restart: enabled",
		"example.com/auto: a value strconv.ParseBool reads as true (1, t, T, TRUE, true, True) (read on the pod template; with optInAll, another value opts out)",
		"example.com/reload: NAME,... (secret sources it lists; opts in for them; read on the workload, or on the pod template for a source kind none of whose annotations read this way are on the workload)",
	}
	if got := cfg.OptInDescriptions(); !reflect.DeepEqual(got, want) {
		t.Errorf("descriptions\n%q\nwant\n%q", got, want)
	}
	cfg.OptInAll = true
	if got := cfg.OptInDescriptions(); len(got) != 4 || !strings.Contains(got[1], "optInAll") {
		t.Errorf("with optInAll, descriptions %q", got)
	}
}

// TestListPatterns: a regex list's entries are anchored whole (an
// alternation too), a bad entry is reported and skipped, and a list that
// does not opt in counts only on a workload opted in another way.
func TestListPatterns(t *testing.T) {
	cfg, err := Parse([]byte(`
sourceListAnnotations:
- {annotation: example.com/reload, source: configmap, optIn: true, match: regex}
- {annotation: example.com/extra, source: secret, match: regex}
- {annotation: example.com/names, source: secret}`))
	if err != nil {
		t.Fatal(err)
	}
	a := WorkloadAnnotations{Workload: map[string]string{"example.com/reload": " a|b ,, (", "example.com/extra": "s.*", "example.com/names": "x.*"}}
	patterns, problems, optsIn := cfg.ListPatternsOf(a, false)
	if !optsIn || len(patterns) != 1 || patterns[0].Entry != "a|b" || patterns[0].Kind != "configmap" {
		t.Fatalf("patterns %+v, opts in %v", patterns, optsIn)
	}
	for name, want := range map[string]bool{"a": true, "b": true, "ab": false, "xa": false} {
		if got := patterns[0].Re.MatchString(name); got != want {
			t.Errorf("%q matched %v, want %v", name, got, want)
		}
	}
	if len(problems) != 1 || !strings.HasPrefix(problems[0], `example.com/reload: entry "(" is not a regular expression, skipped: `) {
		t.Errorf("problems %q", problems)
	}
	if patterns, _, _ := cfg.ListPatternsOf(a, true); len(patterns) != 2 || patterns[1].Annotation != "example.com/extra" {
		t.Errorf("opted in: patterns %+v", patterns)
	}
	if listed, _ := cfg.ListedSourcesOf(a, "shop", true); len(listed) != 1 || listed[0].Name != "x.*" {
		t.Errorf("exact lists: %+v (a regex list's entries are no names)", listed)
	}
	if got := cfg.SourceLists[0].String(); got != "example.com/reload: REGEX,... (configmap sources whose names an entry matches whole; opts in for them)" {
		t.Errorf("description %q", got)
	}
}
