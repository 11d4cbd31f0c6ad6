// Package decision decides what to do with one workload now. It is pure:
// no client, queue or clock of its own. Its entry point, Rules.Decide, takes
// a Snapshot (the workload as cached, the sources it reads, their grace
// periods, the fleet's view of its waves and breaker, and the time) and
// returns a Verdict: restart, record, wait, queue for a wave, hold, or
// nothing, with the patch and the reasons. The controller acts on it, and
// explain shows it; neither decides anything itself.
package decision

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/pacing"
)

// Rules are what of the configuration decides, and how checksums are made.
type Rules struct {
	Annotations config.Annotations
	// Ordered: resourceVersions order source writes and template changes.
	Ordered     bool
	Breaker     pacing.Breaker
	Waves       pacing.Waves
	MaxInFlight int
	Sums        checksum.Hasher
	// Lifecycle: whether creations and deletions of optional sources restart.
	Lifecycle config.SourceLifecycle
	// IgnoreAnnotations are source ignore annotations beside
	// Annotations.Ignore.
	IgnoreAnnotations []string
	// Restarts are the restart strategies of each workload kind.
	Restarts map[schema.GroupVersionResource]config.Restart
}

// RulesOf returns the rules of a configuration, with sums for checksums.
func RulesOf(cfg *config.Config, sums checksum.Hasher) Rules {
	restarts := make(map[schema.GroupVersionResource]config.Restart, len(cfg.Workloads))
	for _, w := range cfg.Workloads {
		restarts[w.GVR] = w.Restart
	}
	return Rules{Annotations: cfg.Annotations, Ordered: cfg.OrderByResourceVersion, Breaker: cfg.Breaker,
		Waves: cfg.Waves, MaxInFlight: cfg.MaxInFlight, Sums: sums, Lifecycle: cfg.SourceLifecycle,
		IgnoreAnnotations: cfg.IgnoreAnnotations, Restarts: restarts}
}

// FleetView is what the fleet knows that the workload alone does not. The
// controller's view holds the fleet's lock from its first use until the
// controller has acted on the verdict, so that two decisions never both
// take the last place of a wave.
type FleetView interface {
	// Now is the time a restart is decided at: taken once the fleet's
	// state is held, never before the rollouts it waited for ended.
	Now() time.Time
	// LastChange is when any of the sources last changed, as far as the
	// fleet knows (the breaker's quiet time runs from it); known is false
	// where only the controller's memory could tell (explain).
	LastChange(refs []catalog.Reference) (last time.Time, known bool)
	// Wave is the waves' state of the source's current change, with the
	// workload being decided as a member whose restart for it is due.
	Wave(id catalog.SourceID, src *catalog.SourceState) pacing.State
	// InFlight counts the rollouts under way in the fleet.
	InFlight() int
	// Source is the source as the fleet's cache holds it (for the changes a
	// previous restart delivered).
	Source(id catalog.SourceID) (*catalog.SourceState, bool)
}

// Snapshot is everything a decision reads.
type Snapshot struct {
	Key      catalog.WorkloadKey
	Workload *catalog.WorkloadState
	// Sources are the sources it reads (a large one with the keys it reads).
	Sources SourceLookup
	// Windows are the grace periods of recent changes.
	Windows WindowLookup
	// Fleet is nil where nothing is paced (a dry run).
	Fleet FleetView
	Now   time.Time
}

// Action is what a verdict does.
type Action string

const (
	// Nothing: the data its pods read is what they started with.
	Nothing Action = "nothing"
	// Record: write the checksums (and any fleet annotation), no restart.
	Record Action = "record"
	// Restart: a new restart timestamp in the pod template, with the
	// checksums and the rollout record.
	Restart Action = "restart"
	// Wait: a change is inside its grace period; decide again at Recheck.
	Wait Action = "wait"
	// Queue: the restart is due but waits, without a hold, for its place in
	// a wave or under the cap on rollouts in flight.
	Queue Action = "queue"
	// Hold: the restart is due but held (Verdict.Hold), written on the
	// workload.
	Hold Action = "hold"
)

// queueRecheck is how often a restart waiting for its wave is decided again
// even if no rollout ending woke it.
const queueRecheck = 30 * time.Second

// Verdict is a decision.
type Verdict struct {
	Action Action
	// Plan is the comparison with the sources and the patch: Applied and
	// TemplateRecord, the restart, and Extra (the rollout record; nil
	// removes a hold). It is written for Record and Restart.
	Plan Plan
	// Hold is the hold written for Hold (already there when kept).
	Hold *pacing.Hold
	// Unhold, for Queue: the workload's hold holds nothing any more and is
	// removed.
	Unhold bool
	// Capped, for Queue: it waits for the cap, not for its wave.
	Capped bool
	// WaitsFor, for Queue: the source whose change's wave it waits for
	// (zero when it waits for the cap).
	WaitsFor catalog.SourceID
	// LastRestart is the record a restart writes, for the fleet to
	// reserve.
	LastRestart *pacing.LastRestart
	// At is the time the restart carries.
	At time.Time
	// Recheck, when positive, is when to decide again without any event.
	Recheck time.Duration
	// OptedOut are sources whose change is recorded without a restart.
	OptedOut []catalog.SourceID
	// Reasons say why, for people (explain, logs).
	Reasons []string
}

// Decide decides what to do with the workload now.
func (r Rules) Decide(s Snapshot) Verdict {
	view, optedOut := r.OptOutView(s.Workload, s.Sources)
	plan := Compare(view, s.Sources, s.Windows, s.Now, r.Ordered, r.Sums, r.Lifecycle)
	plan.Strategy = r.Restarts[s.Key.Resource].StrategyOf(s.Workload.Strategy)
	if len(optedOut) > 0 {
		plan.Patch = true // the view's checksums differ from the annotation's
	}
	v := Verdict{Plan: plan, OptedOut: optedOut, At: s.Now, Recheck: plan.Wait}
	if plan.Restart && s.Fleet != nil {
		return r.pace(s, v)
	}
	if !plan.Restart && s.Fleet != nil && s.Workload.Hold != "" && plan.Wait == 0 {
		// Nothing is due or waiting: no restart left to hold.
		v.Plan.setExtra(r.Annotations.Hold, nil)
	}
	switch {
	case v.Plan.Restart:
		v.Action = Restart
	case v.Plan.Patch:
		v.Action = Record
	case plan.Wait > 0:
		v.Action = Wait
		v.Reasons = append(v.Reasons, fmt.Sprintf("a change is inside its grace period, due in %s", plan.Wait.Round(time.Millisecond)))
	default:
		v.Action = Nothing
	}
	return v
}

// pace applies the breaker and the waves to a plan that restarts. It may
// drop sources riding along (still in their grace period) whose waves have
// no place for the workload yet, and adds to the plan the rollout record the
// restart writes, with the removal of any hold.
func (r Rules) pace(s Snapshot, v Verdict) Verdict {
	w := s.Workload
	hold, err := pacing.ParseHold(w.Hold)
	if err != nil {
		v.Reasons = append(v.Reasons, "unreadable hold annotation, removed: "+err.Error())
	}
	prev, _ := pacing.ParseLastRestart(w.LastRestart)
	var restarts []time.Time
	if prev != nil {
		restarts = prev.Restarts
	}
	b := r.Breaker
	heldByBreaker := hold != nil && hold.Kind == pacing.HoldBreaker
	last, known := s.Fleet.LastChange(w.References)
	if !known {
		// Nobody knows better than that it may have changed just now.
		last = s.Now
	}
	switch verdict, wait := b.Check(restarts, heldByBreaker, last, s.Now); verdict {
	case pacing.Trip:
		v.Action, v.Recheck = Hold, b.Quiet
		v.Hold = &pacing.Hold{Kind: pacing.HoldBreaker, Since: s.Now,
			Cause: fmt.Sprintf("restarted %d times within %s (budget %d)", pacing.Recent(restarts, b.Window, s.Now), b.Window, b.Budget)}
		v.Reasons = append(v.Reasons, fmt.Sprintf("held by the breaker: %s; it restarts once the sources it reads have been still for %s",
			v.Hold.Cause, b.Quiet))
		return v
	case pacing.Keep:
		v.Action, v.Hold, v.Recheck = Hold, hold, wait
		if known {
			v.Reasons = append(v.Reasons, fmt.Sprintf("held by the breaker (%s): its sources last changed at %s; it restarts once they have been still for %s, at %s",
				hold.Cause, last.UTC().Format(time.RFC3339), b.Quiet, last.Add(b.Quiet).UTC().Format(time.RFC3339)))
		} else {
			v.Reasons = append(v.Reasons, fmt.Sprintf("held by the breaker (%s): it restarts once the sources it reads have been still for %s "+
				"(when they last changed only the controller knows; a newly started controller counts from its own start)", hold.Cause, b.Quiet))
		}
		return v
	}
	return r.admit(s, v, hold, prev)
}

// admit gives the restart its places in the waves of the changes it
// delivers, under the cap on rollouts in flight, or queues or holds it.
func (r Rules) admit(s Snapshot, v Verdict, hold *pacing.Hold, prev *pacing.LastRestart) Verdict {
	now := s.Fleet.Now()
	delivered, rank, paced, stop := r.places(s, &v, hold, now)
	if stop {
		return v
	}
	// Only a paced restart asks: counting the rollouts in flight is not
	// free, and an unpaced one is not capped.
	if paced && r.MaxInFlight > 0 {
		if inFlight := s.Fleet.InFlight(); inFlight+rank >= r.MaxInFlight {
			v.Action, v.Recheck, v.Capped = Queue, queueRecheck, true
			v.Unhold = r.staleHold(s, hold) || unreadableHold(s, hold)
			v.Reasons = append(v.Reasons, fmt.Sprintf("waits for the cap on rollouts in flight (%d in flight, at most %d)", inFlight, r.MaxInFlight))
			return v
		}
	}
	carried := r.carryOver(s, prev, delivered)
	rec := pacing.NewLastRestart(prev, delivered, now, r.Breaker.Window)
	// Nothing waits on the end of a restart whose changes are all unpaced
	// (those it carries over from a paced record may still be waited on).
	rec.Unpaced = !paced && (!carried || prev.Unpaced)
	v.Plan.setExtra(r.Annotations.Rollout, pacing.Encode(rec))
	if s.Workload.Hold != "" {
		v.Plan.setExtra(r.Annotations.Hold, nil)
	}
	v.Action, v.LastRestart, v.At, v.Recheck = Restart, rec, now, 0
	return v
}

// places finds the restart's place in the wave of each change it delivers:
// the changes it is for, and those riding along from inside their grace
// period. It returns the changes delivered, the workload's rank among those
// its paced waves let through now (under the cap the first ones go, in the
// same order), whether any wave is paced, and stop when the verdict is
// already a queue or a hold.
func (r Rules) places(s Snapshot, v *Verdict, hold *pacing.Hold, now time.Time) (delivered map[string]string, rank int, paced, stop bool) {
	w, plan := s.Workload, &v.Plan
	applied := map[string]string{}
	_ = json.Unmarshal([]byte(w.Applied), &applied) // Compare has warned about a bad one
	delivered = map[string]string{}
	self := s.Key.String()
	for _, ref := range w.References {
		sid := ref.ID.String()
		src, ok := s.Sources.Source(ref.ID)
		if !ok {
			continue
		}
		// Sources neither due nor riding along only have their record
		// rewritten (a newer checksum format, say).
		due := slices.Contains(plan.Changed, ref.ID)
		if !due {
			_, waiting := s.Windows.Due(ref.ID, now)
			old, value := applied[sid], plan.Applied[sid]
			if !waiting || value == old || value == Absent || value == Pending || src.Matches(r.Sums, old, ref.Keys) {
				continue
			}
		}
		change := src.Change(r.Sums)
		state := s.Fleet.Wave(ref.ID, src)
		place := slices.Index(state.Admit, self)
		switch {
		case !state.Paced || place >= 0:
			delivered[sid] = change
			if state.Paced {
				paced, rank = true, max(rank, place)
			}
		case !due:
			// Riding along: it will get its own restart in its own wave.
			if old, known := applied[sid]; known {
				plan.Applied[sid] = old
			} else {
				delete(plan.Applied, sid)
			}
		case state.Halted:
			v.Action, v.Recheck = Hold, 0
			v.Hold = &pacing.Hold{Kind: pacing.HoldWave, Source: sid, Change: change, Cause: state.Cause, Since: now}
			v.Reasons = append(v.Reasons, fmt.Sprintf("held: the change %s of %s is halted, a rollout of it failed (%s); it goes on when that rollout completes after all, when %s changes again, or when released",
				change, sid, state.Cause, sid))
			return nil, 0, false, true
		default:
			v.Action, v.Recheck, v.WaitsFor = Queue, queueRecheck, ref.ID
			// A wave hold for this change that no longer halts it (the
			// failed rollout recovered) goes: the workload now only waits.
			v.Unhold = hold.HoldsChange(sid, change) || r.staleHold(s, hold) || unreadableHold(s, hold)
			v.Reasons = append(v.Reasons, fmt.Sprintf("waits for its place in wave %d of the change of %s (%d of %d settled, %d in flight)",
				state.Wave, sid, state.Settled, state.Reach, state.InFlight))
			return nil, 0, false, true
		}
	}
	return delivered, rank, paced, false
}

// carryOver adds to delivered what the last restart delivered that is still
// current: the new rollout delivers it again, and its outcome speaks for
// those changes too. It reports whether it added any.
func (r Rules) carryOver(s Snapshot, prev *pacing.LastRestart, delivered map[string]string) bool {
	if prev == nil {
		return false
	}
	carried := false
	for sid, change := range prev.Sources {
		if _, ok := delivered[sid]; ok {
			continue
		}
		if id, ok := ParseSourceID(sid); ok {
			if src, ok := s.Fleet.Source(id); ok && src.Change(r.Sums) == change {
				delivered[sid] = change
				carried = true
			}
		}
	}
	return carried
}

// unreadableHold reports a hold annotation that is not a hold: it holds
// nothing, and goes.
func unreadableHold(s Snapshot, hold *pacing.Hold) bool { return hold == nil && s.Workload.Hold != "" }

// staleHold reports a wave hold whose change is over (HoldOver).
func (r Rules) staleHold(s Snapshot, hold *pacing.Hold) bool {
	over, _ := r.HoldOver(hold, s.Fleet)
	return over
}

// HoldOver reports a wave hold whose change is over, and why: its source
// changed again, is gone, or the change was released. Other holds end by
// the decision on the workload itself.
func (r Rules) HoldOver(hold *pacing.Hold, sources SourceLookup) (bool, string) {
	if hold == nil || hold.Kind != pacing.HoldWave {
		return false, ""
	}
	id, ok := ParseSourceID(hold.Source)
	if !ok {
		return true, "it names no source"
	}
	src, ok := sources.Source(id)
	switch {
	case !ok:
		return true, hold.Source + " is gone"
	case src.Change(r.Sums) != hold.Change:
		return true, hold.Source + " has changed since"
	case src.Annotations[r.Annotations.Release] == hold.Change:
		return true, "the change was released"
	}
	return false, ""
}

// WaveState evaluates the waves of the source's current change over its
// readers, as Rules.Member sees each. The controller keeps the same
// evaluation memoized per source; explain evaluates it from a listing.
func (r Rules) WaveState(readers []Reader, id catalog.SourceID, src *catalog.SourceState) pacing.State {
	change := src.Change(r.Sums)
	var members []pacing.Member
	for _, rd := range readers {
		if m, ok := r.Member(rd, id, src, change); ok {
			members = append(members, m)
		}
	}
	return r.Waves.Evaluate(members, src.Annotations[r.Annotations.Release] == change)
}

// ParseSourceID reads "KIND/NAMESPACE/NAME", as checksums, records and holds
// name sources.
func ParseSourceID(s string) (catalog.SourceID, bool) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 {
		return catalog.SourceID{}, false
	}
	return catalog.SourceID{Kind: parts[0], Namespace: parts[1], Name: parts[2]}, true
}
