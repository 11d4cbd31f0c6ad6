package decision

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

var waves = config.Waves{UnpacedUpTo: 3, FirstWave: 1, Growth: 2}

// fleet returns n members named w00..., all pending for the change.
func readers(n int) []Reader {
	ms := make([]Reader, n)
	for i := range ms {
		ms[i] = Reader{Key: fmt.Sprintf("w%02d", i), Pending: true}
	}
	return ms
}

// restart marks the first k pending members (in order) restarted with result.
func restart(ms []Reader, k int, result rollout.Result) {
	for i := range ms {
		if k == 0 {
			return
		}
		if ms[i].Pending {
			ms[i].Pending, ms[i].Restarted, ms[i].Result = false, true, result
			if result == rollout.ResultFailed {
				ms[i].Failure = "DeadlineExceeded"
			}
			k--
		}
	}
}

// A change's wave count is the wave of its last reader.
func TestWaveCount(t *testing.T) {
	w := config.Waves{FirstWave: 1, Growth: 2}
	for reach, want := range map[int]int{0: 0, 1: 1, 2: 2, 3: 2, 4: 3, 7: 3, 8: 4, 60: 6} {
		if got := WaveCount(w, reach); got != want {
			t.Errorf("%d readers: %d waves, want %d", reach, got, want)
		}
	}
}

func TestWaveBoundaries(t *testing.T) {
	for _, tc := range []struct {
		w       config.Waves
		settled int
		number  int
		end     int
	}{
		{config.Waves{FirstWave: 1, Growth: 2}, 0, 1, 1},
		{config.Waves{FirstWave: 1, Growth: 2}, 1, 2, 3},
		{config.Waves{FirstWave: 1, Growth: 2}, 2, 2, 3},
		{config.Waves{FirstWave: 1, Growth: 2}, 3, 3, 7},
		{config.Waves{FirstWave: 1, Growth: 2}, 31, 6, 63},
		{config.Waves{FirstWave: 2, Growth: 1.5}, 2, 2, 5},   // 2, 3, 5, 8
		{config.Waves{FirstWave: 2, Growth: 1.5}, 10, 4, 18}, // 2+3+5+8
		{config.Waves{FirstWave: 5, Growth: 1}, 12, 3, 15},
		{config.Waves{FirstWave: 0, Growth: 0}, 0, 1, 1}, // out-of-bounds settings cannot loop forever
	} {
		n, end := waveAt(tc.w, tc.settled)
		if n != tc.number || end != tc.end {
			t.Errorf("%+v settled %d: wave %d ending at %d, want %d ending at %d", tc.w, tc.settled, n, end, tc.number, tc.end)
		}
	}
}

// A healthy change of a source read by 60 workloads goes out in waves of
// 1, 2, 4, 8, 16 and the remaining 29, each opened by the previous one's
// completion.
func TestWavesGrowOnHealth(t *testing.T) {
	ms := readers(60)
	var sizes []int
	for round := 0; round < 20; round++ {
		s := EvaluateWaves(waves, ms, false)
		if !s.Paced || s.Halted {
			t.Fatalf("round %d: %+v", round, s)
		}
		if len(s.Admit) == 0 {
			break
		}
		sizes = append(sizes, len(s.Admit))
		// They start; while in flight nothing more is admitted.
		restart(ms, len(s.Admit), rollout.ResultPending)
		if s := EvaluateWaves(waves, ms, false); len(s.Admit) != 0 {
			t.Fatalf("round %d: admitted %v while the wave is in flight", round, s.Admit)
		}
		for i := range ms {
			if ms[i].Restarted {
				ms[i].Result = rollout.ResultComplete
			}
		}
	}
	if want := []int{1, 2, 4, 8, 16, 29}; !reflect.DeepEqual(sizes, want) {
		t.Fatalf("wave sizes %v, want %v", sizes, want)
	}
}

// Membership is by key order, whatever order the members come in.
func TestWaveMembershipDeterministic(t *testing.T) {
	ms := readers(10)
	rev := append([]Reader(nil), ms...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	a, b := EvaluateWaves(waves, ms, false), EvaluateWaves(waves, rev, false)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a.Admit, []string{"w00"}) {
		t.Fatalf("%v vs %v", a.Admit, b.Admit)
	}
}

// A wave partly started (the controller's cap held some back) keeps its
// place: the rest of it may start while the first are in flight.
func TestWaveFillsWhileInFlight(t *testing.T) {
	ms := readers(20)
	restart(ms, 3, rollout.ResultComplete) // waves 1 and 2 done
	restart(ms, 2, rollout.ResultPending)  // 2 of wave 3 (4 wide) in flight
	s := EvaluateWaves(waves, ms, false)
	if s.Wave != 3 || s.Limit != 7 || !reflect.DeepEqual(s.Admit, []string{"w05", "w06"}) {
		t.Fatalf("%+v", s)
	}
}

func TestFewReadersUnpaced(t *testing.T) {
	ms := readers(3)
	s := EvaluateWaves(waves, ms, false)
	if s.Paced || len(s.Admit) != 3 {
		t.Fatalf("%+v", s)
	}
	// Readers of the source the change does not concern are not counted.
	ms = append(ms, Reader{Key: "other-keys"}, Reader{Key: "other-keys-2"})
	if s := EvaluateWaves(waves, ms, false); s.Paced || s.Reach != 3 {
		t.Fatalf("%+v", s)
	}
}

// A failed rollout halts the change: nothing more starts, every pending
// member is held, with the failure as the cause.
func TestFailureHalts(t *testing.T) {
	ms := readers(60)
	restart(ms, 1, rollout.ResultFailed)
	s := EvaluateWaves(waves, ms, false)
	if !s.Halted || len(s.Admit) != 0 || len(s.Held) != 59 || s.Cause != "w00: DeadlineExceeded" {
		t.Fatalf("%+v", s)
	}
	// One failure in a later wave halts too, even with others still rolling.
	ms = readers(60)
	restart(ms, 3, rollout.ResultComplete)
	restart(ms, 2, rollout.ResultPending)
	restart(ms, 1, rollout.ResultFailed)
	s = EvaluateWaves(waves, ms, false)
	if !s.Halted || len(s.Admit) != 0 || s.Cause != "w05: DeadlineExceeded" || s.InFlight != 2 {
		t.Fatalf("%+v", s)
	}
}

// Holds outlive the failure record: the failed workload restarted since (its
// record names another change) or is gone, and the change stays halted.
func TestHoldsOutliveFailure(t *testing.T) {
	ms := readers(10)
	ms[0].Pending = true // w00 pending again after another restart
	for i := 1; i < 10; i++ {
		ms[i].HeldHere, ms[i].Cause = true, "w00: ProgressDeadlineExceeded"
	}
	s := EvaluateWaves(waves, ms, false)
	if !s.Halted || len(s.Held) != 10 || s.Cause != "w00: ProgressDeadlineExceeded" {
		t.Fatalf("%+v", s)
	}
}

// A release lets the change go on: the failure counts as settled, the held
// members take their places in the waves.
func TestReleaseResumes(t *testing.T) {
	ms := readers(10)
	restart(ms, 1, rollout.ResultFailed)
	for i := 1; i < 10; i++ {
		ms[i].HeldHere, ms[i].Cause = true, "w00: DeadlineExceeded"
	}
	s := EvaluateWaves(waves, ms, true)
	if s.Halted || s.Wave != 2 || !reflect.DeepEqual(s.Admit, []string{"w01", "w02"}) {
		t.Fatalf("%+v", s)
	}
}

// Members held for another reason keep no place: the next in order takes it.
func TestHeldElsewhereSkipped(t *testing.T) {
	ms := readers(10)
	ms[0].HeldElsewhere = true
	s := EvaluateWaves(waves, ms, false)
	if !reflect.DeepEqual(s.Admit, []string{"w01"}) || s.Reach != 10 {
		t.Fatalf("%+v", s)
	}
}

// Not rolling (paused, OnDelete) settles without proving health or failing.
func TestNotRollingSettles(t *testing.T) {
	ms := readers(10)
	restart(ms, 1, rollout.ResultNotRolling)
	if s := EvaluateWaves(waves, ms, false); s.Halted || s.Settled != 1 || len(s.Admit) != 2 {
		t.Fatalf("%+v", s)
	}
}

func TestBreaker(t *testing.T) {
	b := config.Breaker{Budget: 3, Window: 20 * time.Second, Quiet: 5 * time.Second}
	now := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)
	ago := func(s ...int) []time.Time {
		var out []time.Time
		for _, n := range s {
			out = append(out, now.Add(-time.Duration(n)*time.Second))
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		restarts []time.Time
		held     bool
		changed  time.Time
		want     breakerVerdict
		wait     time.Duration
	}{
		{"under budget", ago(15, 10), false, now, breakerAllow, 0},
		{"budget used within the window", ago(15, 10, 5), false, now, breakerTrip, 0},
		{"older restarts left the window", ago(40, 30, 10, 5), false, now, breakerAllow, 0},
		{"held, sources still changing", ago(15, 10, 5), true, now.Add(-2 * time.Second), breakerKeep, 3 * time.Second},
		{"held, sources still for the quiet time", ago(15, 10, 5), true, now.Add(-5 * time.Second), breakerRelease, 0},
		{"held survives the window passing", ago(60, 50, 40), true, now.Add(-time.Second), breakerKeep, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, wait := checkBreaker(b, tc.restarts, tc.held, tc.changed, now)
			if v != tc.want || wait != tc.wait {
				t.Fatalf("got %v wait %s", v, wait)
			}
		})
	}
	if v, _ := checkBreaker(config.Breaker{}, ago(1, 1, 1, 1, 1, 1), false, now, now); v != breakerAllow {
		t.Fatal("budget 0 must turn the breaker off")
	}
}

// A hold's halt ends once the rollout it names as failed has completed
// after all; a hold naming a workload that is still failed, or gone, halts.
func TestRecoveredFailureEndsHolds(t *testing.T) {
	ms := readers(10)
	ms[0].Pending, ms[0].Restarted, ms[0].Result = false, true, rollout.ResultComplete
	for i := 1; i < 10; i++ {
		ms[i].HeldHere, ms[i].Cause = true, "w00: DeadlineExceeded"
	}
	if s := EvaluateWaves(waves, ms, false); s.Halted || !reflect.DeepEqual(s.Admit, []string{"w01", "w02"}) {
		t.Fatalf("recovered: %+v", s)
	}
	ms[0].Result = rollout.ResultFailed
	if s := EvaluateWaves(waves, ms, false); !s.Halted {
		t.Fatalf("still failed: %+v", s)
	}
	if s := EvaluateWaves(waves, ms[1:], false); !s.Halted {
		t.Fatalf("failed workload gone: %+v", s)
	}
	if got := record.FailedWorkload("deployments.apps/shop/w00: DeadlineExceeded: not complete"); got != "deployments.apps/shop/w00" {
		t.Fatalf("FailedWorkload %q", got)
	}
}
