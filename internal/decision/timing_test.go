package decision

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// When a due restart may go: the window its annotation names, or its
// namespace's; none at all with "none"; a name or an interval that is not
// one is said (Invalid) and the workload restarts as if it had none; the
// kind's interval unless its annotation says another; a released change
// goes past both.
func TestTiming(t *testing.T) {
	now := decideNow // 03:04:05 UTC
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	rules := testRules
	rules.Windows = testWindows(t, `
- {name: nights, schedule: "0 2 * * *", duration: 1h, namespaceSelector: "window=nights"}
- {name: halfpast, schedule: "30 * * * *", duration: 5m}`)
	rules.Kinds = map[schema.GroupVersionResource]config.WorkloadKind{deployments: {MinInterval: 10 * time.Minute}}
	nightOpens := time.Date(2030, 1, 3, 2, 0, 0, 0, time.UTC)
	halfPast := time.Date(2030, 1, 2, 3, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		window    string
		interval  string
		ns        labels.Labels
		lastAgo   time.Duration // 0: never restarted
		released  bool
		want      Action
		gate      Gate
		until     time.Time
		invalid   string
		reasonHas string
	}{
		{name: "no window, never restarted: restart", want: Restart},
		{name: "its window closed: wait for its opening", window: "halfpast", want: Wait, gate: GateWindow, until: halfPast,
			reasonHas: "waits for its restart window halfpast, which opens at 2030-01-02T03:30:00Z"},
		{name: "its namespace's window", ns: labels.Set{"window": "nights"}, want: Wait, gate: GateWindow, until: nightOpens},
		{name: "its own window before its namespace's", window: "halfpast", ns: labels.Set{"window": "nights"},
			want: Wait, gate: GateWindow, until: halfPast},
		{name: "none: not its namespace's either", window: "none", ns: labels.Set{"window": "nights"}, want: Restart},
		{name: "a name of no window: said, as if it named none", window: "nihgts", want: Restart, invalid: `names no restart window: "nihgts"`},
		{name: "a name of no window, its namespace's still", window: "nihgts", ns: labels.Set{"window": "nights"},
			want: Wait, gate: GateWindow, until: nightOpens, invalid: "names no restart window"},
		{name: "the kind's interval since its last restart", lastAgo: 4 * time.Minute, want: Wait, gate: GateMinInterval,
			until: now.Add(6 * time.Minute), reasonHas: "next restart not before 2030-01-02T03:10:05Z"},
		{name: "its own interval before the kind's", interval: "2m", lastAgo: 4 * time.Minute, want: Restart},
		{name: "an interval that is none: said, the kind's", interval: "ten minutes", lastAgo: 4 * time.Minute,
			want: Wait, gate: GateMinInterval, until: now.Add(6 * time.Minute), invalid: `"ten minutes" is not a duration`},
		{name: "a released change goes past both", window: "halfpast", lastAgo: time.Minute, released: true, want: Restart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow,
				Applied: annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}), References: []catalog.Reference{{ID: cmApp}}}
			w.Namespace, w.Name = "shop", "web"
			if tc.window != "" || tc.interval != "" {
				w.Picks = &catalog.Picks{Window: tc.window, MinInterval: tc.interval}
			}
			if tc.lastAgo > 0 {
				w.LastRestart = record.Encode(&record.LastRestart{At: now.Add(-tc.lastAgo), Result: rollout.ResultComplete})
			}
			src := v2
			if tc.released {
				src = v2.DeepCopyObject().(*catalog.SourceState)
				src.Annotations = map[string]string{"release": v2.Change(testSums)}
			}
			key := catalog.WorkloadKey{Resource: deployments, Namespace: "shop", Name: "web"}
			v := decideWith(rules, Snapshot{Key: key, Now: now, Workload: ReadWorkload(w), Sources: sourceMap{cmApp: src}, Namespace: tc.ns, Pace: true},
				Pacing{Now: now, Waves: map[catalog.SourceID]WaveState{cmApp: {}}})
			if v.Action != tc.want || v.Gate != tc.gate || !v.Until.Equal(tc.until) {
				t.Fatalf("%s at %q until %v, want %s at %q until %v; reasons %q", v.Action, v.Gate, v.Until, tc.want, tc.gate, tc.until, v.Reasons)
			}
			if got := strings.Join(v.Invalid, "; "); (tc.invalid == "") != (got == "") || !strings.Contains(got, tc.invalid) {
				t.Fatalf("invalid %q, want %q", got, tc.invalid)
			}
			if !strings.Contains(strings.Join(v.Reasons, "; "), tc.reasonHas) {
				t.Fatalf("reasons %q, want one with %q", v.Reasons, tc.reasonHas)
			}
			if v.Action == Wait && (v.Hold != nil || v.Plan.Extra != nil) {
				t.Fatalf("a wait writes nothing: hold %+v, extra %v", v.Hold, v.Plan.Extra)
			}
		})
	}
}

// A reader waiting for its window takes no place in the waves of a change:
// the others restart meanwhile, and it takes its place once its window
// opens.
func TestWaitingReaderNeverStallsTheWaves(t *testing.T) {
	now := decideNow
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	rules := testRules
	rules.Windows = testWindows(t, `- {name: halfpast, schedule: "30 * * * *", duration: 5m}`)
	readers := map[catalog.WorkloadKey]Workload{}
	for i := range 6 {
		w := &catalog.WorkloadState{OptedIn: true, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow,
			Applied: annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}), References: []catalog.Reference{{ID: cmApp}}}
		w.Namespace, w.Name = "shop", fmt.Sprintf("w%d", i)
		if i == 0 {
			w.Picks = &catalog.Picks{Window: "halfpast"} // first in key order
		}
		readers[catalog.WorkloadKey{Namespace: "shop", Name: w.Name}] = ReadWorkload(w)
	}
	state := waveOf(rules, readers, cmApp, v2, now)
	if !state.Paced || state.Reach != 6 || len(state.Admit) != 1 || state.Admit[0] != "./shop/w1" {
		t.Fatalf("closed window: %+v, want the first wave to admit w1, not the waiting w0", state)
	}
	state = waveOf(rules, readers, cmApp, v2, time.Date(2030, 1, 2, 3, 31, 0, 0, time.UTC))
	if len(state.Admit) != 1 || state.Admit[0] != "./shop/w0" {
		t.Fatalf("open window: %+v, want w0 first again", state)
	}
}

// waveOf evaluates the waves of the source's current change over its
// readers, as ReaderOf sees each, none of them being decided; the
// controller does so in package pacing, which memoizes it per source.
func waveOf(r Rules, readers map[catalog.WorkloadKey]Workload, id catalog.SourceID, src *catalog.SourceState, now time.Time) WaveState {
	change := src.Change(r.Sums)
	var rds []Reader
	for key, w := range readers {
		if rd, ok := r.ReaderOf(key, w, false, false, id, src, change, nil, now); ok {
			rds = append(rds, rd)
		}
	}
	return EvaluateWaves(r.Waves, rds, src.Annotations[r.Annotations.Release] == change)
}
