package catalog

import (
	"fmt"
	"strings"
	"testing"

	"github.com/restart-controller/restart-controller/internal/config"
)

// templatePodSpec is presetPodSpec with annotations on the workload (the
// first %s) and on its pod template (the second).
const templatePodSpec = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  annotations: {%s}
spec:
  template:
    metadata:
      annotations: {%s}
    spec:
      volumes:
      - {name: v, configMap: {name: cm-vol}}
      containers:
      - name: app
        envFrom: [{secretRef: {name: sec}}]
        env: [{name: A, valueFrom: {configMapKeyRef: {name: cm-env, key: a}}}]
`

// reloaderCase is a workload annotated on its metadata and on its pod
// template, and what the Reloader preset reduces it to.
type reloaderCase struct {
	workload, template string
	optedIn            bool
	refs               string
	ignores            string
}

const (
	allRefs   = "configmap/shop/cm-env[a] configmap/shop/cm-vol secret/shop/sec"
	cmRefs    = "configmap/shop/cm-env[a] configmap/shop/cm-vol"
	matchRefs = "configmap/shop/cm-env[a]@reloader.stakater.com/match configmap/shop/cm-vol@reloader.stakater.com/match secret/shop/sec@reloader.stakater.com/match"
)

func runReloaderCases(t *testing.T, optInAll bool, cases []reloaderCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(fmt.Sprintf("workload{%s} template{%s}", tt.workload, tt.template), func(t *testing.T) {
			cfg := presetConfig(t, "reloader")
			cfg.OptInAll = optInAll
			w := withFixtureSources(reduceWorkloadOf(t, cfg, fromYAML(t, fmt.Sprintf(templatePodSpec, tt.workload, tt.template))))
			if w.OptedIn != tt.optedIn {
				t.Errorf("opted in %v, want %v", w.OptedIn, tt.optedIn)
			}
			if got := describeRefs(w); got != tt.refs {
				t.Errorf("references\n got %s\nwant %s", got, tt.refs)
			}
			ignores := w.IgnoreSources
			for _, e := range w.Excluded {
				ignores = append(ignores, e.Entry)
			}
			if got := strings.Join(ignores, " "); got != tt.ignores {
				t.Errorf("ignores %q, want %q", got, tt.ignores)
			}
		})
	}
}

// TestReloaderPresetReadsPodTemplates: Reloader reads a source kind's
// annotations (its reload list, auto, its typed auto, search) on the pod
// template when the workload's metadata has none of them, whatever their
// values; the preset reads them the same way, kind by kind.
func TestReloaderPresetReadsPodTemplates(t *testing.T) {
	runReloaderCases(t, false, []reloaderCase{
		{template: `reloader.stakater.com/auto: "true"`, optedIn: true, refs: allRefs},
		{template: `configmap.reloader.stakater.com/auto: "true"`, optedIn: true, refs: cmRefs},
		{template: `reloader.stakater.com/search: "true"`, optedIn: true, refs: matchRefs},
		{template: `configmap.reloader.stakater.com/reload: "cm-env, other"`, optedIn: true,
			refs: "configmap/shop/cm-env? configmap/shop/other?"},
		// The workload's own annotation decides, even when it says no.
		{workload: `reloader.stakater.com/auto: "false"`, template: `reloader.stakater.com/auto: "true"`, optedIn: false, refs: allRefs},
		// Present with an empty value, it still keeps the pod template's
		// annotations of its kind from counting (here the ConfigMaps'),
		// while the Secrets' fall back to the pod template.
		{workload: `configmap.reloader.stakater.com/reload: ""`, template: `reloader.stakater.com/auto: "true"`,
			optedIn: true, refs: "secret/shop/sec"},
		// A Secret-only annotation on the workload leaves the ConfigMaps
		// to the pod template's annotations.
		{workload: `secret.reloader.stakater.com/auto: "true"`, template: `configmap.reloader.stakater.com/auto: "true"`,
			optedIn: true, refs: allRefs},
		{workload: `secret.reloader.stakater.com/reload: "x"`, template: `configmap.reloader.stakater.com/reload: "cm-env"`,
			optedIn: true, refs: "configmap/shop/cm-env? secret/shop/x?"},
		// Ours is read on the workload only.
		{template: `com.xing.deployment-restart: enabled`, optedIn: false, refs: allRefs},
		// Unrelated pod-template annotations change nothing.
		{template: `prometheus.io/scrape: "true", com.xing.deployment-restart.timestamp: "2026-01-01T00:00:00Z"`, optedIn: false, refs: allRefs},
	})
}

// TestReloaderPresetParsesBooleans: the auto annotations opt in on what
// strconv.ParseBool reads as true, and on nothing else.
func TestReloaderPresetParsesBooleans(t *testing.T) {
	var cases []reloaderCase
	for _, v := range []string{"1", "t", "T", "TRUE", "true", "True"} {
		cases = append(cases,
			reloaderCase{workload: `reloader.stakater.com/auto: "` + v + `"`, optedIn: true, refs: allRefs},
			reloaderCase{template: `secret.reloader.stakater.com/auto: "` + v + `"`, optedIn: true, refs: "secret/shop/sec"})
	}
	for _, v := range []string{"tRUE", "yes", "on", "enabled", "0", "false", " true", ""} {
		cases = append(cases, reloaderCase{workload: `reloader.stakater.com/auto: "` + v + `"`, optedIn: false, refs: allRefs})
	}
	runReloaderCases(t, false, cases)
}

// TestReloaderPresetExcludes: the exclude lists become kind-qualified
// ignore-sources entries (the one opt-out decisions apply), read on the
// workload only, as Reloader reads them.
func TestReloaderPresetExcludes(t *testing.T) {
	runReloaderCases(t, false, []reloaderCase{
		{workload: `reloader.stakater.com/auto: "true", configmaps.exclude.reloader.stakater.com/reload: "cm-vol, other,"`,
			optedIn: true, refs: allRefs, ignores: "configmap/cm-vol configmap/other"},
		{workload: `reloader.stakater.com/auto: "true", secrets.exclude.reloader.stakater.com/reload: sec, com.xing.deployment-restart.ignore-sources: cm-env`,
			optedIn: true, refs: allRefs, ignores: "cm-env secret/sec"},
		// A namespace-qualified entry names nothing: Reloader compares names.
		{workload: `reloader.stakater.com/auto: "true", secrets.exclude.reloader.stakater.com/reload: shop/sec`,
			optedIn: true, refs: allRefs},
		{workload: `reloader.stakater.com/auto: "true"`, template: `configmaps.exclude.reloader.stakater.com/reload: cm-vol`,
			optedIn: true, refs: allRefs},
	})
	cfg := presetConfig(t, "reloader")
	w := reduceWorkloadOf(t, cfg, fromYAML(t, fmt.Sprintf(templatePodSpec,
		`reloader.stakater.com/auto: "true", configmaps.exclude.reloader.stakater.com/reload: cm-vol`, "")))
	for id, want := range map[SourceID]bool{
		{Kind: "configmap", Namespace: "shop", Name: "cm-vol"}: true,
		{Kind: "secret", Namespace: "shop", Name: "cm-vol"}:    false,
		{Kind: "configmap", Namespace: "shop", Name: "cm-env"}: false,
	} {
		if got := w.Ignores(id); got != want {
			t.Errorf("Ignores(%s) = %v, want %v", id, got, want)
		}
	}
}

// TestReloaderPresetOptInAll: with optInAll (Reloader's --auto-reload-all),
// a workload is opted in for each kind unless an auto annotation covering
// it, read as above, says otherwise.
func TestReloaderPresetOptInAll(t *testing.T) {
	runReloaderCases(t, true, []reloaderCase{
		{optedIn: true, refs: allRefs},
		{workload: `reloader.stakater.com/auto: "false"`, optedIn: false, refs: allRefs},
		{workload: `reloader.stakater.com/auto: "no"`, optedIn: false, refs: allRefs},
		{template: `reloader.stakater.com/auto: "false"`, optedIn: false, refs: allRefs},
		// The workload decides for ConfigMaps; the pod template's opt-out
		// still counts for Secrets.
		{workload: `configmap.reloader.stakater.com/reload: ""`, template: `reloader.stakater.com/auto: "false"`, optedIn: true, refs: cmRefs},
		{workload: `configmap.reloader.stakater.com/auto: "false"`, optedIn: true, refs: "secret/shop/sec"},
		{workload: `reloader.stakater.com/auto: "false", configmap.reloader.stakater.com/auto: "1"`, optedIn: true, refs: cmRefs},
		{workload: `reloader.stakater.com/auto: ""`, optedIn: true, refs: allRefs},
		// search is no opt-out, and all sources restart without match.
		{workload: `reloader.stakater.com/search: "false"`, optedIn: true, refs: allRefs},
		{workload: `reloader.stakater.com/search: "true"`, optedIn: true, refs: allRefs},
		{workload: `com.xing.deployment-restart: disabled`, optedIn: false, refs: allRefs},
		{workload: `com.xing.deployment-restart: enabled`, optedIn: true, refs: allRefs},
		{workload: `configmaps.exclude.reloader.stakater.com/reload: cm-vol`, optedIn: true, refs: allRefs, ignores: "configmap/cm-vol"},
	})
}

// TestRestartKeepsPodTemplateOptIn: a restart writes only the restart
// timestamp into the pod template. It changes neither what a workload
// opted in on its pod template reads nor its template hash, while any other
// change of the pod template's annotations, an opt-in's included, changes
// the hash (it rolls the pods by itself).
func TestRestartKeepsPodTemplateOptIn(t *testing.T) {
	cfg := exampleConfig(t)
	cfg.OptIns = []config.OptIn{{Annotation: "example.com/auto", ParseBool: true, ReadFrom: config.OnPodTemplate}}
	reduce := func(template string) *WorkloadState {
		return reduceWorkloadOf(t, cfg, fromYAML(t, fmt.Sprintf(templatePodSpec, `example.com/auto: "false"`, template)))
	}
	before := reduce(`example.com/auto: "1"`)
	if !before.OptedIn || describeRefs(before) != allRefs {
		t.Fatalf("opted in %v, references %s: the pod template's annotation must opt in, the workload's not count", before.OptedIn, describeRefs(before))
	}
	restarted := reduce(`example.com/auto: "1", com.xing.deployment-restart.timestamp: "2026-11-25T14:00:00Z"`)
	if !before.SameDecisionInputs(restarted) {
		t.Errorf("a restart changed the decision's inputs:\n%+v\n%+v", before, restarted)
	}
	if before.TemplateHash != restarted.TemplateHash {
		t.Error("the restart timestamp changed the template hash")
	}
	if off := reduce(`example.com/auto: "0"`); off.OptedIn || off.TemplateHash == before.TemplateHash {
		t.Errorf("with the pod template's opt-in off: opted in %v, same template hash %v", off.OptedIn, off.TemplateHash == before.TemplateHash)
	}
}

// TestReadFromWorkloadIgnoresPodTemplate: the default place is the
// workload's metadata, for opt-ins and lists alike.
func TestReadFromWorkloadIgnoresPodTemplate(t *testing.T) {
	cfg := exampleConfig(t)
	cfg.OptIns = []config.OptIn{{Annotation: "example.com/auto", Value: "true", ReadFrom: config.OnWorkload}}
	cfg.SourceLists = []config.SourceList{{Annotation: "example.com/reload", Kind: "secret", OptIn: true, ReadFrom: config.OnWorkload}}
	w := reduceWorkloadOf(t, cfg, fromYAML(t, fmt.Sprintf(templatePodSpec, "", `example.com/auto: "true", example.com/reload: x`)))
	if w.OptedIn {
		t.Errorf("opted in by pod template annotations: %s", describeRefs(w))
	}
	w = reduceWorkloadOf(t, cfg, fromYAML(t, fmt.Sprintf(templatePodSpec, `example.com/reload: x`, "")))
	if !w.OptedIn || describeRefs(w) != "secret/shop/x?" {
		t.Errorf("opted in %v, references %s", w.OptedIn, describeRefs(w))
	}
}
