package catalog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/restart-controller/restart-controller/internal/config"
)

// presetConfig compiles examples/presets/NAME.yaml.
func presetConfig(t *testing.T, name string) *config.Config {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "presets", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("preset %s: %v", name, err)
	}
	return cfg
}

// presetPodSpec names configmap/cm-env (one key), configmap/cm-vol (whole)
// and secret/sec (whole).
const presetPodSpec = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  annotations: {%s}
spec:
  template:
    spec:
      volumes:
      - {name: v, configMap: {name: cm-vol}}
      containers:
      - name: app
        envFrom: [{secretRef: {name: sec}}]
        env: [{name: A, valueFrom: {configMapKeyRef: {name: cm-env, key: a}}}]
`

// describeRefs renders references as "kind/ns/name[keys]@annotation" for
// comparison.
func describeRefs(w *WorkloadState) string {
	var out []string
	for _, r := range w.References {
		s := r.ID.String()
		if r.Keys != nil {
			s += "[" + strings.Join(r.Keys, ",") + "]"
		}
		if r.Optional {
			s += "?"
		}
		if r.SourceAnnotation != "" {
			s += "@" + r.SourceAnnotation
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// withFixtureSources is w as the catalog reads it when the sources its
// tests name exist: Reloader's reload lists are regular expressions, matched
// against the sources that exist.
func withFixtureSources(w *WorkloadState) *WorkloadState {
	existing := map[string][]string{"configmap": {"cm-env", "cm-vol", "other"}, "secret": {"sec", "x"}}
	return w.WithMatches(func(kind string) []string { return existing[kind] })
}

// TestPresetsOptInAndReferences reduces one pod spec annotated each peer's
// way under that peer's preset: who is opted in, and what each reads.
func TestPresetsOptInAndReferences(t *testing.T) {
	const (
		all   = "configmap/shop/cm-env[a] configmap/shop/cm-vol secret/shop/sec"
		cms   = "configmap/shop/cm-env[a] configmap/shop/cm-vol"
		match = "configmap/shop/cm-env[a]@reloader.stakater.com/match configmap/shop/cm-vol@reloader.stakater.com/match secret/shop/sec@reloader.stakater.com/match"
	)
	tests := []struct {
		preset, annotations string
		optedIn             bool
		refs                string
	}{
		{"xing", `com.xing.deployment-restart: enabled`, true, all},
		{"xing", `reloader.stakater.com/auto: "true"`, false, all},
		{"reloader", `com.xing.deployment-restart: enabled`, true, all},
		{"reloader", `reloader.stakater.com/auto: "true"`, true, all},
		{"reloader", `reloader.stakater.com/auto: "True"`, true, all},
		{"reloader", `reloader.stakater.com/auto: "false"`, false, all},
		{"reloader", `configmap.reloader.stakater.com/auto: "true"`, true, cms},
		{"reloader", `secret.reloader.stakater.com/auto: "true"`, true, "secret/shop/sec"},
		{"reloader", `reloader.stakater.com/search: "true"`, true, match},
		// auto needs no match annotation, so it wins over search.
		{"reloader", `reloader.stakater.com/search: "true", reloader.stakater.com/auto: "true"`, true, all},
		// search still needs the match annotation for the secrets that
		// the ConfigMap-only auto does not cover.
		{"reloader", `reloader.stakater.com/search: "true", configmap.reloader.stakater.com/auto: "true"`, true,
			cms + " secret/shop/sec@reloader.stakater.com/match"},
		// A reload list opts in for what it lists only, read whole and
		// optional; merged with the pod spec's reference when auto is on.
		{"reloader", `configmap.reloader.stakater.com/reload: "cm-env, other,"`, true, "configmap/shop/cm-env? configmap/shop/other?"},
		{"reloader", `secret.reloader.stakater.com/reload: "sec", reloader.stakater.com/auto: "true"`, true, all},
		{"reloader", `configmap.reloader.stakater.com/reload: ""`, false, all},
		// Listed, a source restarts whatever its annotations.
		{"reloader", `reloader.stakater.com/search: "true", configmap.reloader.stakater.com/reload: cm-env`, true,
			"configmap/shop/cm-env configmap/shop/cm-vol@reloader.stakater.com/match secret/shop/sec@reloader.stakater.com/match"},
		{"wave", `wave.pusher.com/update-on-config-change: "true"`, true, all},
		// The extra lists count only with update-on-config-change.
		{"wave", `wave.pusher.com/extra-configmaps: "x"`, false, all},
		{"wave", `wave.pusher.com/update-on-config-change: "true", wave.pusher.com/extra-configmaps: "x,ops/y", wave.pusher.com/extra-secrets: "z"`, true,
			"configmap/ops/y? " + cms + " configmap/shop/x? secret/shop/sec secret/shop/z?"},
	}
	for _, tt := range tests {
		t.Run(tt.preset+" "+tt.annotations, func(t *testing.T) {
			cfg := presetConfig(t, tt.preset)
			w := withFixtureSources(reduceWorkloadOf(t, cfg, fromYAML(t, fmt.Sprintf(presetPodSpec, tt.annotations))))
			if w.OptedIn != tt.optedIn {
				t.Errorf("opted in %v, want %v", w.OptedIn, tt.optedIn)
			}
			if got := describeRefs(w); got != tt.refs {
				t.Errorf("references\n got %s\nwant %s", got, tt.refs)
			}
		})
	}
}

// TestPresetsKeepSourceAnnotations: the sources' cache keeps the annotation
// an opt-in requires, and both ignore annotations, xing's and Reloader's, or
// decisions could never see them.
func TestPresetsKeepSourceAnnotations(t *testing.T) {
	keys := presetConfig(t, "reloader").SourceAnnotations()
	want := []string{"com.xing.deployment-restart.ignore", "com.xing.deployment-restart.release", "reloader.stakater.com/ignore",
		"reloader.stakater.com/match"}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("source annotations kept %v, want %v", keys, want)
	}
}

// A listed source in a namespace the controller does not watch is left out:
// it would never be seen, and its absence never confirmed.
func TestListedSourcesOutsideWatchedNamespaces(t *testing.T) {
	cfg := presetConfig(t, "wave")
	cfg.Namespaces = []string{"shop"}
	w := reduceWorkloadOf(t, cfg, fromYAML(t, fmt.Sprintf(presetPodSpec,
		`wave.pusher.com/update-on-config-change: "true", wave.pusher.com/extra-configmaps: "x,ops/y,shop/z"`)))
	want := "configmap/shop/cm-env[a] configmap/shop/cm-vol configmap/shop/x? configmap/shop/z? secret/shop/sec"
	if got := describeRefs(w); got != want {
		t.Errorf("references\n got %s\nwant %s", got, want)
	}
}
