package decision

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
)

// The verdict's plan carries the strategy: the kind's, or the one the
// workload's annotation picks; pacing and the record are the same for
// every strategy, since waves and the breaker count records.
func TestDecideCarriesTheStrategy(t *testing.T) {
	rollouts := schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
	cronjobs := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "cronjobs"}
	restartAt := config.Strategy{Name: config.TimestampAt}
	runNow := config.Strategy{Name: config.RunNow}
	rules := testRules
	rules.Kinds = map[schema.GroupVersionResource]config.WorkloadKind{
		rollouts: {Restart: config.Restart{Strategy: config.Strategy{Name: config.TemplateAnnotation}, ByAnnotation: map[string]config.Strategy{"restart": restartAt}}},
		cronjobs: {Restart: config.Restart{Strategy: runNow}},
	}
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	for _, tc := range []struct {
		name     string
		resource schema.GroupVersionResource
		picked   string // the workload's Strategy, as the catalog reduced its annotation
		data     *catalog.SourceState
		want     Action
		strategy config.StrategyName
	}{
		{"a Rollout without the annotation: the template", rollouts, "", v2, Restart, config.TemplateAnnotation},
		{"a Rollout picking restart: spec.restartAt", rollouts, "restart", v2, Restart, config.TimestampAt},
		{"a CronJob: a Job now", cronjobs, "", v2, Restart, config.RunNow},
		{"a kind not configured: the template", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "", v2, Restart, ""},
		{"no change: nothing, whatever the strategy", cronjobs, "", v1, Nothing, config.RunNow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := catalog.WorkloadKey{Resource: tc.resource, Namespace: "shop", Name: "w"}
			w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow, Picks: picks(tc.picked),
				Applied: annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}), References: []catalog.Reference{{ID: cmApp}}}
			w.Namespace, w.Name = "shop", "w"
			fleet := Pacing{Now: decideNow, Waves: map[catalog.SourceID]WaveState{cmApp: {}}}
			v := decideWith(rules, Snapshot{Key: key, Workload: ReadWorkload(w), Sources: sourceMap{cmApp: tc.data}, Pace: true, Now: decideNow}, fleet)
			if v.Action != tc.want || v.Plan.Strategy.Name != tc.strategy {
				t.Fatalf("verdict %s by %q, want %s by %q", v.Action, v.Plan.Strategy.Name, tc.want, tc.strategy)
			}
			if v.Action == Restart && v.LastRestart == nil {
				t.Fatal("a restart without its record: waves and the breaker would not count it")
			}
		})
	}
}

func picks(strategy string) *catalog.Picks {
	if strategy == "" {
		return nil
	}
	return &catalog.Picks{Strategy: strategy}
}
