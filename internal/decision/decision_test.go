package decision

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

var testRules = Rules{
	Annotations: config.Annotations{Rollout: "rollout", Hold: "hold", Release: "release", Ignore: "ignore", IgnoreSources: "ignore-sources"},
	Breaker:     config.Breaker{Budget: 3, Window: time.Hour, Quiet: 2 * time.Minute},
	Waves:       config.Waves{UnpacedUpTo: 3, FirstWave: 1, Growth: 2, MaxInFlight: 5},
	Sums:        testSums,
}

// The fleet's part of the decision: a workload whose read key changed and
// whose grace period is over, under each state of its fleet.
func TestDecideFleetStates(t *testing.T) {
	now := decideNow
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	change := v2.Change(testSums)
	key := catalog.WorkloadKey{Namespace: "shop", Name: "web"}
	self := key.String()
	workload := func(annotations map[string]string) *catalog.WorkloadState {
		w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow,
			Applied:    annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}),
			References: []catalog.Reference{{ID: cmApp}}}
		w.Namespace, w.Name = "shop", "web"
		w.LastRestart, w.Hold = annotations["rollout"], annotations["hold"]
		return w
	}
	recent := func(n int) string {
		var at []time.Time
		for i := n; i > 0; i-- {
			at = append(at, now.Add(-time.Duration(i)*time.Minute))
		}
		return record.Encode(&record.LastRestart{At: at[len(at)-1], Result: rollout.ResultComplete, Restarts: at})
	}
	breakerHold := record.Encode(&record.Hold{Kind: record.HoldBreaker, Cause: "restarted 3 times", Since: now.Add(-5 * time.Minute)})
	waveHold := record.Encode(&record.Hold{Kind: record.HoldWave, Source: cmApp.String(), Change: change, Cause: "x/y/z: failed", Since: now})
	admitted := WaveState{Paced: true, Wave: 1, Admit: []string{self}}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		fleet       Pacing
		want        Action
		hold        record.HoldKind
		unhold      bool
		recheck     time.Duration
		reason      string
	}{
		{"unpaced: restart", nil, Pacing{Waves: map[catalog.SourceID]WaveState{cmApp: {}}}, Restart, "", false, 0, ""},
		{"its place in the wave: restart", nil, Pacing{Waves: map[catalog.SourceID]WaveState{cmApp: admitted}}, Restart, "", false, 0, ""},
		{"no place yet: queue", nil, Pacing{Waves: map[catalog.SourceID]WaveState{cmApp: {Paced: true, Wave: 2, Reach: 9, Admit: []string{"other"}}}},
			Queue, "", false, queueRecheck, "waits for its place in wave 2"},
		{"halted: wave hold", nil, Pacing{Waves: map[catalog.SourceID]WaveState{cmApp: {Paced: true, Halted: true, Cause: "x/y/z: failed"}}},
			Hold, record.HoldWave, false, 0, "is halted"},
		{"halt over, still queued: the hold goes", map[string]string{"hold": waveHold},
			Pacing{Waves: map[catalog.SourceID]WaveState{cmApp: {Paced: true, Wave: 2, Admit: []string{"other"}}}}, Queue, "", true, queueRecheck, ""},
		{"cap reached: queue", nil, Pacing{InFlight: 5, Waves: map[catalog.SourceID]WaveState{cmApp: admitted}}, Queue, "", false, queueRecheck, "cap"},
		{"budget used: breaker trips", map[string]string{"rollout": recent(3)}, Pacing{LastChange: now,
			Waves: map[catalog.SourceID]WaveState{cmApp: admitted}}, Hold, record.HoldBreaker, false, 2 * time.Minute, "held by the breaker"},
		{"breaker, sources changing: kept until quiet", map[string]string{"rollout": recent(3), "hold": breakerHold},
			Pacing{LastChange: now.Add(-30 * time.Second)}, Hold, record.HoldBreaker, false, 90 * time.Second, "still for 2m0s"},
		{"breaker, last change unknown (explain): kept", map[string]string{"rollout": recent(3), "hold": breakerHold},
			Pacing{}, Hold, record.HoldBreaker, false, 2 * time.Minute, "only the controller knows"},
		{"breaker, quiet: restart in its wave", map[string]string{"rollout": recent(3), "hold": breakerHold},
			Pacing{LastChange: now.Add(-3 * time.Minute), Waves: map[catalog.SourceID]WaveState{cmApp: admitted}}, Restart, "", false, 0, ""},
		{"breaker, quiet, no place yet: queue", map[string]string{"rollout": recent(3), "hold": breakerHold},
			Pacing{LastChange: now.Add(-3 * time.Minute), Waves: map[catalog.SourceID]WaveState{cmApp: {Paced: true, Admit: []string{"other"}}}},
			Queue, "", false, queueRecheck, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fleet.Now = now
			v := decideWith(testRules, Snapshot{Key: key, Workload: ReadWorkload(workload(tc.annotations)), Sources: sourceMap{cmApp: v2},
				Pace: true, Now: now}, tc.fleet)
			if recheck := v.Until.Sub(now); v.Action != tc.want || v.Unhold != tc.unhold || max(recheck, 0) != tc.recheck {
				t.Fatalf("verdict %s (unhold %v, recheck %s), want %s (unhold %v, recheck %s); reasons %q",
					v.Action, v.Unhold, recheck, tc.want, tc.unhold, tc.recheck, v.Reasons)
			}
			if tc.hold != "" && (v.Hold == nil || v.Hold.Kind != tc.hold) {
				t.Fatalf("hold %+v, want kind %s", v.Hold, tc.hold)
			}
			if tc.reason != "" && !strings.Contains(strings.Join(v.Reasons, "; "), tc.reason) {
				t.Fatalf("reasons %q, want one with %q", v.Reasons, tc.reason)
			}
			if v.Action == Restart {
				rec, err := record.ParseLastRestart(v.Plan.Extra["rollout"].(string))
				if err != nil || !rec.Delivered(cmApp.String(), change) || !rec.At.Equal(now) {
					t.Fatalf("record %+v (%v)", rec, err)
				}
				// Only an unpaced restart leaves its end unwritten.
				if paced := tc.fleet.Waves[cmApp].Paced; rec.Unpaced == paced {
					t.Fatalf("record %+v of a restart paced %v: unpaced must be %v", rec, paced, !paced)
				}
				if _, removes := v.Plan.Extra["hold"]; removes != (tc.annotations["hold"] != "") {
					t.Fatalf("extra %v: a restart removes a hold, and only one that is there", v.Plan.Extra)
				}
			}
		})
	}
}

// An unpaced restart's record is unpaced, so its end goes unwritten, unless
// it carries over a change a paced restart delivered, whose waves may wait
// on this rollout's end.
func TestDecideUnpacedRecordCarryingOver(t *testing.T) {
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	db := sourceState(t, secDB, map[string]string{"p": "1"})
	key := catalog.WorkloadKey{Namespace: "shop", Name: "web"}
	for _, tc := range []struct {
		name     string
		previous *record.LastRestart
		unpaced  bool
	}{
		{"no previous record", nil, true},
		{"previous change over", &record.LastRestart{At: decideNow.Add(-time.Minute), Sources: map[string]string{secDB.String(): "old"}}, true},
		{"carries over a paced change", &record.LastRestart{At: decideNow.Add(-time.Minute),
			Sources: map[string]string{secDB.String(): db.Change(testSums)}}, false},
		{"carries over an unpaced change", &record.LastRestart{At: decideNow.Add(-time.Minute), Unpaced: true,
			Sources: map[string]string{secDB.String(): db.Change(testSums)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow,
				Applied: annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}), References: []catalog.Reference{{ID: cmApp}},
				LastRestart: record.Encode(tc.previous)}
			fleet := Pacing{Now: decideNow, Waves: map[catalog.SourceID]WaveState{cmApp: {}}}
			v := decideWith(testRules, Snapshot{Key: key, Workload: ReadWorkload(w), Sources: sourceMap{cmApp: v2, secDB: db}, Pace: true, Now: decideNow}, fleet)
			if v.Action != Restart || v.LastRestart == nil {
				t.Fatalf("verdict %s, reasons %q", v.Action, v.Reasons)
			}
			if v.LastRestart.Unpaced != tc.unpaced {
				t.Fatalf("record %+v, want unpaced %v", v.LastRestart, tc.unpaced)
			}
		})
	}
}

// Without a restart due, a hold left on the workload goes; while a change
// waits in its grace period, it stays.
func TestDecideNoRestartDropsHold(t *testing.T) {
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	hold := record.Encode(&record.Hold{Kind: record.HoldBreaker, Since: decideNow})
	w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow, Hold: hold,
		Applied: annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}), References: []catalog.Reference{{ID: cmApp}}}
	v := testRules.Decide(Snapshot{Workload: ReadWorkload(w), Sources: sourceMap{cmApp: v1}, Pace: true, Now: decideNow})
	if _, removes := v.Plan.Extra["hold"]; v.Action != Record || !removes {
		t.Fatalf("up to date with a hold: %s, extra %v; want the hold removed", v.Action, v.Plan.Extra)
	}
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	v = testRules.Decide(Snapshot{Workload: ReadWorkload(w), Sources: sourceMap{cmApp: v2}, Grace: graceAt(dueAt{cmApp: decideNow.Add(time.Second)}, true),
		Pace: true, Now: decideNow})
	if v.Action != Wait || !v.Until.Equal(decideNow.Add(time.Second)) || v.Plan.Extra != nil {
		t.Fatalf("waiting with a hold: %s until %s extra %v", v.Action, v.Until, v.Plan.Extra)
	}
	// A dry run paces nothing and removes nothing.
	v = testRules.Decide(Snapshot{Workload: ReadWorkload(w), Sources: sourceMap{cmApp: v2}, Now: decideNow})
	if v.Action != Restart || v.Plan.Extra != nil {
		t.Fatalf("dry run: %s extra %v", v.Action, v.Plan.Extra)
	}
}

// An unreadable hold annotation holds nothing: a restart that must wait for
// its wave removes it meanwhile.
func TestDecideQueuedDropsUnreadableHold(t *testing.T) {
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	key := catalog.WorkloadKey{Namespace: "shop", Name: "web"}
	w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow, Hold: "not a hold",
		Applied: annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}), References: []catalog.Reference{{ID: cmApp}}}
	fleet := Pacing{Now: decideNow, Waves: map[catalog.SourceID]WaveState{cmApp: {Paced: true, Wave: 1, Admit: []string{"other"}}}}
	v := decideWith(testRules, Snapshot{Key: key, Workload: ReadWorkload(w), Sources: sourceMap{cmApp: v2}, Pace: true, Now: decideNow}, fleet)
	if v.Action != Queue || !v.Unhold {
		t.Fatalf("verdict %s, unhold %v: want queue, removing the unreadable hold", v.Action, v.Unhold)
	}
}

// The deletion of an optional source restarts through the fleet's part of
// the decision too (a deleted source takes no wave part), unless the
// workload ignores it: then the absence is recorded, nothing restarts.
func TestDecideDeletedOptionalSource(t *testing.T) {
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	rules := testRules
	rules.Lifecycle = bothRestart
	for _, tc := range []struct {
		name    string
		ignores []string
		want    Action
	}{
		{"read: restart", nil, Restart},
		{"ignored: recorded", []string{"configmap/app"}, Record},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow,
				Applied:    annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}),
				References: []catalog.Reference{{ID: cmApp, Optional: true}}, IgnoreSources: tc.ignores}
			w.Namespace, w.Name = "shop", "web"
			v := decideWith(rules, Snapshot{Key: catalog.WorkloadKey{Namespace: "shop", Name: "web"}, Workload: ReadWorkload(w), Sources: sourceMap{},
				Pace: true, Now: decideNow}, Pacing{Now: decideNow})
			if v.Action != tc.want || v.Plan.Applied[cmApp.String()] != record.Absent {
				t.Fatalf("verdict %s recording %q, want %s recording absent; reasons %q", v.Action, v.Plan.Applied[cmApp.String()], tc.want, v.Reasons)
			}
		})
	}
}

// WhyOptedOut names the opt-out that holds: either ignore annotation of the
// source (annotations.ignore and ignoreAnnotations both work), the
// workload's ignore-sources annotation, or the exclude annotation that
// names the source.
func TestWhyOptedOutNamesTheAnnotation(t *testing.T) {
	rules := testRules
	rules.IgnoreAnnotations = []string{"example.com/ignore"}
	src := func(annotations map[string]string) *catalog.SourceState {
		s := sourceState(t, cmApp, map[string]string{"a": "1"})
		s.Annotations = annotations
		return s
	}
	w := func(ignoreSources []string, excluded []config.ExcludedSource) *catalog.WorkloadState {
		w := &catalog.WorkloadState{IgnoreSources: ignoreSources, Excluded: excluded, References: []catalog.Reference{{ID: cmApp}}}
		w.Namespace, w.Name = "shop", "web"
		return w
	}
	for _, tc := range []struct {
		name string
		w    *catalog.WorkloadState
		src  *catalog.SourceState
		want string
	}{
		{"annotations.ignore", w(nil, nil), src(map[string]string{"ignore": "true"}), `the source's annotation ignore is "true"`},
		{"ignoreAnnotations", w(nil, nil), src(map[string]string{"example.com/ignore": "true"}), `the source's annotation example.com/ignore is "true"`},
		{"ignore-sources", w([]string{"app"}, nil), src(nil), "the workload's annotation ignore-sources names it"},
		{"exclude annotation", w(nil, []config.ExcludedSource{{Entry: "configmap/app", Annotation: "example.com/exclude"}}), src(nil),
			"the workload's annotation example.com/exclude names it"},
		{"another kind excluded", w(nil, []config.ExcludedSource{{Entry: "secret/app", Annotation: "example.com/exclude"}}), src(nil), ""},
		{"none", w(nil, nil), src(map[string]string{"example.com/ignore": "false"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rules.WhyOptedOut(tc.w, cmApp, tc.src); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// Under the Reloader preset, xing's ignore annotation keeps working beside
// Reloader's, and an excluded source names Reloader's exclude annotation.
func TestReloaderPresetOptOuts(t *testing.T) {
	data, err := os.ReadFile("../../examples/presets/reloader.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	rules := NewRules(cfg, testSums)
	w := &catalog.WorkloadState{References: []catalog.Reference{{ID: cmApp}},
		Excluded: cfg.OptInRules().ExcludedSources(map[string]string{"configmaps.exclude.reloader.stakater.com/reload": "app"})}
	for key, want := range map[string]string{
		"reloader.stakater.com/ignore":       `the source's annotation reloader.stakater.com/ignore is "true"`,
		"com.xing.deployment-restart.ignore": `the source's annotation com.xing.deployment-restart.ignore is "true"`,
	} {
		src := sourceState(t, cmApp, map[string]string{"a": "1"})
		src.Annotations = map[string]string{key: "true"}
		if got := rules.WhyOptedOut(&catalog.WorkloadState{References: w.References}, cmApp, src); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
	if got, want := rules.WhyOptedOut(w, cmApp, sourceState(t, cmApp, nil)), "the workload's annotation configmaps.exclude.reloader.stakater.com/reload names it"; got != want {
		t.Errorf("excluded: %q, want %q", got, want)
	}
}

// A reader restarted for the change by an unpaced restart has no result
// written: its status gives it. A written record is what counts otherwise,
// whatever the status says now.
func TestReaderOutcomeOfUnwrittenEnd(t *testing.T) {
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	change := v2.Change(testSums)
	key := catalog.WorkloadKey{Namespace: "shop", Name: "other"}
	for _, tc := range []struct {
		name   string
		record record.LastRestart
		phase  rollout.Phase
		want   rollout.Result
	}{
		{"unpaced, status complete", record.LastRestart{Unpaced: true}, rollout.Complete, rollout.ResultComplete},
		{"unpaced, status not rolling", record.LastRestart{Unpaced: true}, rollout.NotRolling, rollout.ResultNotRolling},
		{"unpaced, still rolling", record.LastRestart{Unpaced: true}, rollout.Progressing, rollout.ResultPending},
		{"unpaced, failed and written", record.LastRestart{Unpaced: true, Result: rollout.ResultFailed}, rollout.Complete, rollout.ResultFailed},
		{"unpaced Job: its end is written", record.LastRestart{Unpaced: true, Job: "j"}, rollout.Complete, rollout.ResultPending},
		{"paced: its end is written", record.LastRestart{}, rollout.Complete, rollout.ResultPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.record
			rec.At, rec.Sources = decideNow, map[string]string{cmApp.String(): change}
			w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow,
				Applied: annotation(t, map[string]string{cmApp.String(): v2.Checksum(testSums, nil)}), References: []catalog.Reference{{ID: cmApp}},
				LastRestart: record.Encode(&rec), Rollout: rollout.Status{Phase: tc.phase}}
			rd, ok := testRules.ReaderOf(key, ReadWorkload(w), false, false, cmApp, v2, change, nil, decideNow)
			if !ok || !rd.Restarted || rd.Result != tc.want {
				t.Fatalf("reader %+v (%v), want restarted with result %q", rd, ok, tc.want)
			}
		})
	}
}

// A workload a configured condition says rolls no pods now is not rolling,
// whatever its kind's rule read from the status.
func TestRolloutPhaseOfNotRolled(t *testing.T) {
	w := &catalog.WorkloadState{Rollout: rollout.Status{Phase: rollout.Complete}}
	if got := RolloutStatus(w).Phase; got != rollout.Complete {
		t.Fatalf("phase %s, want the status's", got)
	}
	w.NotRolled = "spec.suspend is true"
	if got := RolloutStatus(w).Phase; got != rollout.NotRolling {
		t.Fatalf("phase %s, want NotRolling", got)
	}
}
