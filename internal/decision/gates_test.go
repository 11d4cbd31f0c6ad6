package decision

import (
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// The gates stop a due restart in their documented order (the package
// doc): a workload that every gate would stop is stopped by the first;
// with that gate's condition gone, by the next; and so on until it
// restarts. Each step also checks what the gate says: go, wait until a
// time, or hold for a reason.
func TestGatesInOrder(t *testing.T) {
	now := decideNow
	v1 := sourceState(t, cmApp, map[string]string{"a": "1"})
	v2 := sourceState(t, cmApp, map[string]string{"a": "2"})
	change := v2.Change(testSums)
	key := catalog.WorkloadKey{Namespace: "shop", Name: "web"}
	recent := []time.Time{now.Add(-3 * time.Minute), now.Add(-2 * time.Minute), now.Add(-time.Minute)}

	// Every condition that stops a restart, each undone by one step.
	type state struct {
		notOptedIn, problem, ownWrite, grace, ignored, window, interval, breaker, halted, noPlace, capped bool
	}
	// A window that opens at half past the hour, for five minutes.
	rules := testRules
	rules.Windows = testWindows(t, `- {name: soon, schedule: "30 * * * *", duration: 5m}`)
	opens := now.Truncate(time.Hour).Add(30 * time.Minute) // the tests' clock is at 03:04
	snapshot := func(st state) (Snapshot, Pacing) {
		w := &catalog.WorkloadState{OptedIn: !st.notOptedIn, HasApplied: true, TemplateHash: tmplNow, AppliedTemplateHash: tmplNow,
			Applied: annotation(t, map[string]string{cmApp.String(): v1.Checksum(testSums, nil)}), References: []catalog.Reference{{ID: cmApp}}}
		w.Namespace, w.Name = key.Namespace, key.Name
		if st.problem {
			w.Problem = "no pod template"
		}
		if st.breaker {
			w.LastRestart = record.Encode(&record.LastRestart{At: recent[2], Result: rollout.ResultComplete, Restarts: recent})
		}
		if st.window || st.interval {
			w.Picks = &catalog.Picks{}
			if st.window {
				w.Picks.Window = "soon"
			}
			if st.interval {
				w.Picks.MinInterval = "2m" // the last restart was a minute ago
			}
		}
		src := v2
		if st.ignored {
			src = v2.DeepCopyObject().(*catalog.SourceState)
			src.Annotations = map[string]string{"ignore": "true"}
		}
		s := Snapshot{Key: key, Now: now, Workload: ReadWorkload(w), Sources: sourceMap{cmApp: src}, Pace: true}
		if st.ownWrite {
			s.OwnWrite = now.Add(time.Minute)
		}
		if st.grace {
			s.Grace = graceAt(dueAt{cmApp: now.Add(2 * time.Second)}, true)
		}
		wave := WaveState{Paced: true, Wave: 1, Admit: []string{key.String()}}
		switch {
		case st.halted:
			wave = WaveState{Paced: true, Halted: true, Cause: "deployments.apps/shop/other: ProgressDeadlineExceeded"}
		case st.noPlace:
			wave = WaveState{Paced: true, Wave: 2, Reach: 9, Admit: []string{"other"}}
		}
		p := Pacing{Now: now, LastChange: now.Add(-30 * time.Second), Waves: map[catalog.SourceID]WaveState{cmApp: wave}}
		if st.capped {
			p.InFlight = rules.Waves.MaxInFlight
		}
		return s, p
	}
	st := state{true, true, true, true, true, true, true, true, true, true, true}
	for _, step := range []struct {
		gate  Gate
		want  Action
		until time.Time // zero: decided again on an event
		hold  record.HoldKind
		undo  func(*state)
	}{
		{GateOptIn, Nothing, time.Time{}, "", func(s *state) { s.notOptedIn = false }},
		{GateReferences, Nothing, time.Time{}, "", func(s *state) { s.problem = false }},
		{GateOwnWrite, Wait, now.Add(time.Minute + 10*time.Millisecond), "", func(s *state) { s.ownWrite = false }},
		{GateOptOut, Record, time.Time{}, "", func(s *state) { s.ignored = false }},
		{GateGracePeriod, Wait, now.Add(2 * time.Second), "", func(s *state) { s.grace = false }},
		{GateWindow, Wait, opens, "", func(s *state) { s.window = false }},
		{GateMinInterval, Wait, recent[2].Add(2 * time.Minute), "", func(s *state) { s.interval = false }},
		{GateBreaker, Hold, now.Add(rules.Breaker.Quiet), record.HoldBreaker, func(s *state) { s.breaker = false }},
		{GateFailed, Hold, time.Time{}, record.HoldWave, func(s *state) { s.halted = false }},
		{GateWave, Queue, now.Add(queueRecheck), "", func(s *state) { s.noPlace = false }},
		{GateCap, Queue, now.Add(queueRecheck), "", func(s *state) { s.capped = false }},
		{"", Restart, time.Time{}, "", nil},
	} {
		s, p := snapshot(st)
		v := decideWith(rules, s, p)
		if v.Gate != step.gate || v.Action != step.want || !v.Until.Equal(step.until) {
			t.Fatalf("at gate %q: stopped at %q with %s until %v, want %s until %v; reasons %q",
				step.gate, v.Gate, v.Action, v.Until, step.want, step.until, v.Reasons)
		}
		if step.hold != "" && (v.Hold == nil || v.Hold.Kind != step.hold) {
			t.Fatalf("at gate %q: hold %+v, want a %s hold", step.gate, v.Hold, step.hold)
		}
		if step.want == Restart && (v.LastRestart == nil || !v.LastRestart.Delivered(cmApp.String(), change)) {
			t.Fatalf("the restart records %+v, want the change %s delivered", v.LastRestart, change)
		}
		if step.undo != nil {
			step.undo(&st)
		}
	}
}

// testWindows compiles restart windows written as the config file's list.
func testWindows(t *testing.T, list string) []config.Window {
	t.Helper()
	cfg, err := config.Parse([]byte("restartWindows:\n" + list + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Windows
}
