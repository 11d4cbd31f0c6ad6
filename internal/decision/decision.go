// Package decision decides what to do with one workload now. It is pure:
// Decide takes a Snapshot of plain values (the workload with its records
// parsed, the sources it reads, the grace periods of their changes, where
// its last restart's rollout stands, and, for a due restart, the pacing
// facts of the fleet) and returns a Verdict. It has no client, queue, lock
// or clock of its own. The controller acts on the verdict, and explain and
// status show it; none of them decides anything itself.
//
// A verdict comes from the comparison of the checksums its pods started
// with and the sources' data now (Compare), and from the gates: every
// reason a restart does not go now is one gate, evaluated in this order.
// Each says go, wait until a time (or an event), or hold because of a
// reason written on the workload.
//
//  1. opt-in: a workload gone or not opted in is not acted on.
//  2. references: one whose references cannot be read is skipped.
//  3. own write: this process's last write to it is not in the cache yet:
//     wait for it (its update event, or the reservation's expiry).
//  4. opt-out (per source): a change the workload or the source opts out
//     of is recorded without a restart, at once.
//  5. grace period (per source): a change younger than its grace period
//     waits for its end, or rides along with a restart due anyway.
//  6. window: a restart outside the workload's restart window waits for
//     its next opening.
//  7. min interval: a restart less than the minimum interval after the
//     workload's last one waits for the interval's end.
//  8. breaker: a workload restarted too often is held until its sources
//     have been still for the quiet time.
//  9. failed rollout: a change a rollout of which failed is halted: its
//     readers not restarted yet are held until that rollout completes after
//     all, the source changes again, or the change is released.
//  10. wave: a paced change restarts its readers in health-gated waves:
//     wait for a place.
//  11. cap: wait while the paced rollouts in flight reach the cap.
//
// Gates 1-5 read the workload and its sources; 6-7 its records and the
// clock, or a release of the change; 8-11 the pacing facts of the fleet,
// which the controller gathers under its pacing lock only for a due
// restart (Verdict.NeedsPacing): a first Decide without them tells whether
// they are needed and for which changes.
package decision

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// Rules are what of the configuration decides, and how checksums are
// made: built once, after the checksum key is loaded (NewRules).
type Rules struct {
	Annotations config.Annotations
	// Ordered: resourceVersions order source writes and template changes.
	Ordered bool
	Breaker config.Breaker
	Waves   config.Waves
	Sums    checksum.Hasher
	// Lifecycle: whether creations and deletions of optional sources restart.
	Lifecycle config.SourceLifecycle
	// IgnoreAnnotations are source ignore annotations beside
	// Annotations.Ignore.
	IgnoreAnnotations []string
	// Kinds are the workload kinds: their restart strategies, rollout
	// rules and minimum intervals.
	Kinds map[schema.GroupVersionResource]config.WorkloadKind
	// Windows are the restart windows, in the configuration's order.
	Windows []config.Window
}

// NewRules returns the rules of a configuration, with sums for checksums.
func NewRules(cfg *config.Config, sums checksum.Hasher) Rules {
	kinds := make(map[schema.GroupVersionResource]config.WorkloadKind, len(cfg.Workloads))
	for _, w := range cfg.Workloads {
		kinds[w.GVR] = w
	}
	return Rules{Annotations: cfg.Annotations, Ordered: cfg.OrderByResourceVersion, Breaker: cfg.Breaker,
		Waves: cfg.Waves, Sums: sums, Lifecycle: cfg.SourceLifecycle,
		IgnoreAnnotations: cfg.IgnoreAnnotations, Kinds: kinds, Windows: cfg.Windows}
}

// Snapshot is everything a decision reads: plain values, read before
// deciding and not changed by it.
type Snapshot struct {
	Key catalog.WorkloadKey
	Now time.Time
	// Workload is the cached workload with its records read; a zero
	// Workload (State nil) is one that is gone.
	Workload Workload
	// Sources are the sources it reads that exist (a large one with the
	// keys it reads), and those its last restart delivered.
	Sources Sources
	// Grace are the open grace periods of the changes of its sources.
	Grace map[catalog.SourceID]Grace
	// Rollout is where its last restart's rollout stands.
	Rollout Rollout
	// OwnWrite, when set, is when this process's last write to the
	// workload, not in the cache yet, stops being waited for.
	OwnWrite time.Time
	// Namespace are the labels of the workload's namespace, for the
	// restart window namespaces have by default; nil when not known.
	Namespace labels.Labels
	// Pace: the restarts are paced (not in a dry run). Pacing holds the
	// fleet's facts once gathered for a due restart.
	Pace   bool
	Pacing *Pacing
}

// Sources are source states by ID.
type Sources map[catalog.SourceID]*catalog.SourceState

// Grace is an open grace period of a source's change.
type Grace struct {
	// Ends is when the change is due.
	Ends time.Time
	// Updating: it holds an update of data that existed before, not only
	// the source's creation.
	Updating bool
}

// Rollout is where the rollout of the workload's last restart stands, as
// the controller read it.
type Rollout struct {
	// Job is the status of the Job a runNow restart started, read from the
	// API server (Jobs are not watched), with JobPoll how soon to read it
	// again while it runs; nil for every other restart, whose status is
	// the workload's own (Workload.Rollout).
	Job     *rollout.Status
	JobPoll time.Duration
	// Followed: this process follows the rollout of the restart at
	// FollowedAt (an unpaced one, whose end is not written), and Ended
	// says it saw its end.
	Followed   bool
	FollowedAt time.Time
	Ended      bool
}

// Pacing are the fleet's facts a due restart is paced by, gathered under
// the controller's pacing lock (or, by explain, from a listing).
type Pacing struct {
	// Now is when they were gathered: a restart they let go is decided
	// then, never before the rollouts it waited for ended.
	Now time.Time
	// LastChange is when the sources the workload reads last changed, as
	// far as the controller knows (its own start at the earliest); zero
	// where only the controller's memory could tell (explain).
	LastChange time.Time
	// Waves are the waves of each change the restart would deliver
	// (Verdict.Deliver), with the workload counted as due for it.
	Waves map[catalog.SourceID]WaveState
	// InFlight counts the paced rollouts in flight in the fleet.
	InFlight int
}

// Action is what a verdict does.
type Action string

const (
	// Nothing: nothing to write.
	Nothing Action = "nothing"
	// Record: write the checksums (and any pacing annotation), no restart.
	Record Action = "record"
	// Restart: a new restart by the workload's strategy, with the
	// checksums and the rollout record.
	Restart Action = "restart"
	// Wait: decide again at Until (a grace period, a window, an interval,
	// the own write), or on an event.
	Wait Action = "wait"
	// Queue: the restart is due but waits, without a hold, for its place in
	// a wave or under the cap on rollouts in flight.
	Queue Action = "queue"
	// Hold: the restart is due but held (Verdict.Hold), written on the
	// workload.
	Hold Action = "hold"
	// EndRollout: write the outcome of the last restart's rollout
	// (Verdict.Ended); the next decision reads it.
	EndRollout Action = "end-rollout"
)

// Gate names the gate a verdict stopped at (see the package doc).
type Gate string

const (
	GateOptIn       Gate = "opt-in"
	GateReferences  Gate = "references"
	GateOwnWrite    Gate = "own write"
	GateOptOut      Gate = "opt-out"
	GateGracePeriod Gate = "grace period"
	GateWindow      Gate = "window"
	GateMinInterval Gate = "min interval"
	GateBreaker     Gate = "breaker"
	GateFailed      Gate = "failed rollout"
	GateWave        Gate = "wave"
	GateCap         Gate = "cap"
)

// queueRecheck is how often a restart waiting for its wave or the cap is
// decided again even if no rollout ending woke it.
const queueRecheck = 30 * time.Second

// Verdict is a decision.
type Verdict struct {
	Action Action
	// Gate is the gate that stopped a due restart (Wait, Queue, Hold), or
	// the workload (opt-in, references); empty when none did.
	Gate Gate
	// Plan is the comparison with the sources and the patch: Applied and
	// TemplateRecord, the restart, and Extra (the rollout record; nil
	// removes a hold). It is written for Record and Restart.
	Plan Plan
	// Hold is the hold written for Hold (already there when Kept).
	Hold *record.Hold
	// Unhold, for Queue and Wait: the workload's hold holds nothing any
	// more and is removed.
	Unhold bool
	// WaitsFor, for Queue at the wave gate: the source whose change's wave
	// it waits for.
	WaitsFor catalog.SourceID
	// LastRestart is the record a restart writes, to reserve until the
	// cache shows it.
	LastRestart *record.LastRestart
	// Ended is the end of the last restart's rollout judged now: written
	// (EndRollout) or, for an unpaced restart, only reported.
	Ended *Ended
	// Follow says what the controller is to remember of the rollouts it
	// follows whose end is not written.
	Follow Follow
	// At is the time the restart carries.
	At time.Time
	// Until, when set, is when to decide again without any event.
	Until time.Time
	// NeedsPacing: the restart is due, and the pacing facts (Pacing) of
	// the changes it would deliver, Deliver, decide whether it goes.
	NeedsPacing bool
	Deliver     []catalog.SourceID
	// OptedOut are sources whose change is recorded without a restart.
	OptedOut []catalog.SourceID
	// Reasons say why, for people (explain, status, logs); Warnings are
	// problems of the workload's own records, for the log; Invalid are
	// annotations its owners set that name nothing usable (a restart
	// window, a minimum interval), said once in a Warning Event.
	Reasons  []string
	Warnings []string
	Invalid  []string

	// timing is the workload's restart window and minimum interval.
	timing timing

	// What Pace resumes from: the changes a due restart would deliver,
	// the gate it stopped before, and when its rollout is judged again.
	deliveries   []delivery
	resume       int
	rolloutUntil time.Time
}

// Ended is the end of a rollout of the workload's last restart.
type Ended struct {
	// Record is the rollout record with its result; written unless the
	// end of an unpaced restart, which its status shows.
	Record  *record.LastRestart
	Written bool
	// Recovered: a rollout judged failed that completed after all.
	Recovered bool
	Verdict   rollout.Verdict
}

// Follow says how the memory of followed rollouts changes.
type Follow struct {
	// Start following the rollout of the restart at At (a new unpaced
	// restart, or one found still rolling), until Deadline.
	Start        bool
	At, Deadline time.Time
	// End: its end was seen. Forget: not followed any more.
	End, Forget bool
}

// Decide decides what to do with the workload now.
func (r Rules) Decide(s Snapshot) Verdict {
	if v, stop := r.workloadGates(s); stop {
		return v
	}
	ended, follow, until := r.judgeRollout(s)
	if ended != nil && ended.Written {
		return Verdict{Action: EndRollout, Ended: ended, Follow: follow, At: s.Now, Until: until}
	}
	v := r.compare(s)
	v.Ended, v.Follow, v.rolloutUntil = ended, follow, until
	if v.Plan.Restart {
		v.deliveries = r.deliveries(s, v.Plan)
		v = r.restartGates(s, v, 0)
	}
	v.Until = earliest(v.Until, until)
	return v
}

// workloadGates are gates 1-3, on the workload before any source.
func (r Rules) workloadGates(s Snapshot) (Verdict, bool) {
	w := s.Workload
	switch {
	case w.State == nil:
		return Verdict{Action: Nothing, Gate: GateOptIn, Follow: Follow{Forget: true}, Reasons: []string{"gone"}}, true
	case !w.State.OptedIn:
		return Verdict{Action: Nothing, Gate: GateOptIn, Follow: Follow{Forget: true}, Reasons: []string{"not opted in"}}, true
	case w.State.Problem != "":
		return Verdict{Action: Nothing, Gate: GateReferences, Reasons: []string{"its references cannot be read (" + w.State.Problem + "): skipped"}}, true
	case !s.OwnWrite.IsZero():
		return Verdict{Action: Wait, Gate: GateOwnWrite, Until: s.OwnWrite.Add(10 * time.Millisecond),
			Reasons: []string{"this controller's last write to it is not in its cache yet: decided once it is"}}, true
	}
	return Verdict{}, false
}

// compare compares the workload's checksums with its sources (Compare) and
// says what that alone asks for: nothing, a record, a wait for a grace
// period, or a restart, which the restart gates decide on.
func (r Rules) compare(s Snapshot) Verdict {
	w := s.Workload
	view, optedOut := r.optOutView(w, s.Sources)
	plan := r.Compare(view, s.Sources, s.Grace, s.Now)
	plan.Strategy = r.Kinds[s.Key.Resource].Restart.StrategyOf(w.State.Picked().Strategy)
	if len(optedOut) > 0 {
		plan.Patch = true // the view's checksums differ from the annotation's
	}
	v := Verdict{Plan: plan, OptedOut: optedOut, At: s.Now, Warnings: w.Warnings, timing: r.timingOf(w, s)}
	v.Invalid = v.timing.problems
	if plan.Wait > 0 {
		v.Until = s.Now.Add(plan.Wait)
	}
	for _, id := range optedOut {
		v.Reasons = append(v.Reasons, fmt.Sprintf("%s/%s changed, but its changes restart this workload not (%s): recorded without a restart",
			id.Kind, id.Name, r.WhyOptedOut(w.State, id, s.Sources[id])))
	}
	switch {
	case plan.Restart:
		v.Action = Restart
	case s.Pace && w.State.Hold != "" && plan.Wait == 0:
		// Nothing is due or waiting: no restart left to hold.
		v.Plan.setExtra(r.Annotations.Hold, nil)
		v.Action = Record
	case plan.Patch:
		v.Action = Record
		if len(optedOut) > 0 {
			v.Gate = GateOptOut
		}
	case plan.Wait > 0:
		v.Action, v.Gate = Wait, GateGracePeriod
		v.Reasons = append(v.Reasons, fmt.Sprintf("a change is inside its grace period, due at %s", v.Until.UTC().Format(time.RFC3339)))
	default:
		v.Action = Nothing
	}
	return v
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
