package optin

import (
	"reflect"
	"strings"
	"testing"
)

var kinds = []string{"configmap", "secret"}

// Of two opt-ins covering a kind, the one without a source annotation
// decides, whatever their order.
func TestCoverageNeedsNoSourceAnnotationWhenAnyOptInDoesNot(t *testing.T) {
	for _, optIns := range [][]OptIn{
		{{Annotation: "example.com/search", Value: "true", SourceAnnotation: "example.com/match"}, {Annotation: "example.com/configmaps", Value: "true", Kinds: []string{"configmap"}}},
		{{Annotation: "example.com/configmaps", Value: "true", Kinds: []string{"configmap"}}, {Annotation: "example.com/search", Value: "true", SourceAnnotation: "example.com/match"}},
	} {
		r := Rules{Annotation: "xing/restart", OptIns: optIns, Kinds: kinds}
		cov := r.Coverage(WorkloadAnnotations{Workload: map[string]string{"example.com/search": "true", "example.com/configmaps": "TRUE"}})
		if !cov.OptedIn {
			t.Fatal("not opted in")
		}
		for kind, want := range map[string]string{"configmap": "", "secret": "example.com/match"} {
			if got, ok := cov.Covers(kind); !ok || got != want {
				t.Errorf("%s: covered %v, source annotation %q; want %q", kind, ok, got, want)
			}
		}
		if cov := r.Coverage(WorkloadAnnotations{Workload: map[string]string{"example.com/configmaps": "yes"}}); cov.OptedIn {
			t.Error(`"yes" opted in; only the configured value does`)
		}
	}
}

// Xing's own annotation "enabled" covers every kind; under All every kind
// is covered unless an opt-out or xing's annotation with another value
// says otherwise.
func TestCoverageOfAllAndOptOuts(t *testing.T) {
	auto := OptIn{Annotation: "example.com/auto", Value: "true", Kinds: []string{"secret"}, OptOut: true}
	r := Rules{Annotation: "xing/restart", OptIns: []OptIn{auto}, Kinds: kinds, All: true}
	for _, tc := range []struct {
		name string
		on   map[string]string
		want []string // kinds covered
	}{
		{"nothing", nil, kinds},
		{"xing's opt-in", map[string]string{"xing/restart": "enabled"}, kinds},
		{"xing's annotation, another value", map[string]string{"xing/restart": "false"}, nil},
		{"opted out of secrets", map[string]string{"example.com/auto": "false"}, []string{"configmap"}},
		{"opted in for secrets", map[string]string{"example.com/auto": "true"}, kinds},
	} {
		cov := r.Coverage(WorkloadAnnotations{Workload: tc.on})
		var got []string
		for _, k := range kinds {
			if _, ok := cov.Covers(k); ok && cov.OptedIn {
				got = append(got, k)
			}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: covers %v, want %v", tc.name, got, tc.want)
		}
	}
	r.All = false
	if cov := r.Coverage(WorkloadAnnotations{}); cov.OptedIn {
		t.Error("opted in without All or an annotation")
	}
}

// Listed sources: qualified or in the workload's namespace, left out when
// their namespace is not watched; lists that do not opt in count only on a
// workload opted in another way. Exclude lists name sources of the
// workload's namespace only.
func TestListedAndExcludedSources(t *testing.T) {
	r := Rules{Kinds: kinds, Namespaces: []string{"shop", "shared"},
		SourceLists: []SourceList{{Annotation: "example.com/reload", Kind: "configmap", OptIn: true}, {Annotation: "example.com/extra", Kind: "secret"}},
		Excludes:    []Exclude{{Annotation: "example.com/exclude", Kind: "configmap"}}}
	a := WorkloadAnnotations{Workload: map[string]string{"example.com/reload": " a, shared/b ,, elsewhere/c", "example.com/extra": "s"}}
	listed, optsIn := r.ListedSourcesOf(a, "shop", false)
	want := []ListedSource{{Kind: "configmap", Namespace: "shop", Name: "a", Annotation: "example.com/reload"},
		{Kind: "configmap", Namespace: "shared", Name: "b", Annotation: "example.com/reload"}}
	if !optsIn || !reflect.DeepEqual(listed, want) {
		t.Errorf("listed %+v, opts in %v; want %+v", listed, optsIn, want)
	}
	if listed, _ := r.ListedSourcesOf(a, "shop", true); len(listed) != 3 || listed[2].Name != "s" {
		t.Errorf("opted in: listed %+v", listed)
	}
	got := r.ExcludedSources(map[string]string{"example.com/exclude": " a, ,ns/b,c"})
	if want := []ExcludedSource{{Entry: "configmap/a", Annotation: "example.com/exclude"}, {Entry: "configmap/c", Annotation: "example.com/exclude"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("excluded %q", got)
	}
}

// A regex list's entries are anchored whole (an alternation too), a bad
// entry is reported and skipped, and a list that does not opt in counts
// only on a workload opted in another way.
func TestListPatterns(t *testing.T) {
	r := Rules{Kinds: kinds, SourceLists: []SourceList{
		{Annotation: "example.com/reload", Kind: "configmap", OptIn: true, Regex: true},
		{Annotation: "example.com/extra", Kind: "secret", Regex: true},
		{Annotation: "example.com/names", Kind: "secret"}}}
	a := WorkloadAnnotations{Workload: map[string]string{"example.com/reload": " a|b ,, (", "example.com/extra": "s.*", "example.com/names": "x.*"}}
	patterns, problems, optsIn := r.ListPatternsOf(a, false)
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
	if patterns, _, _ := r.ListPatternsOf(a, true); len(patterns) != 2 || patterns[1].Annotation != "example.com/extra" {
		t.Errorf("opted in: patterns %+v", patterns)
	}
	if listed, _ := r.ListedSourcesOf(a, "shop", true); len(listed) != 1 || listed[0].Name != "x.*" {
		t.Errorf("exact lists: %+v (a regex list's entries are no names)", listed)
	}
	if got := r.SourceLists[0].String(); got != "example.com/reload: REGEX,... (configmap sources whose names an entry matches whole; opts in for them)" {
		t.Errorf("description %q", got)
	}
}
