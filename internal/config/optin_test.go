package config

import "testing"

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
