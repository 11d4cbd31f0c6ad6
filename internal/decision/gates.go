package decision

import (
	"fmt"
	"slices"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/record"
)

// due is a restart the comparison found due, as the restart gates see it
// beside its verdict (which holds the changes it would deliver,
// Verdict.deliveries), and what they decide.
type due struct {
	s Snapshot
	// Set by the gates as they pass: the changes delivered, the
	// workload's rank among the readers its paced waves admit now (under
	// the cap the first ones go, in the same order), and whether any wave
	// is paced.
	delivered map[string]string
	rank      int
	paced     bool
}

// delivery is one change a restart would deliver.
type delivery struct {
	id     catalog.SourceID
	change string
	// due: the source is due; otherwise it rides along, and stays behind
	// when its wave has no place for the workload yet.
	due bool
}

// gate is one reason a due restart may not go now: it returns nil to let
// it go, or the verdict that stops it.
type gate func(r Rules, d *due, v Verdict) *Verdict

// restartGates are gates 6 to 11 (the package doc), in their order; those
// from the breaker on read the pacing facts.
var restartGates = [...]struct {
	name   Gate
	pacing bool
	check  gate
}{
	{GateWindow, false, timingGate(GateWindow)},
	{GateMinInterval, false, timingGate(GateMinInterval)},
	{GateBreaker, true, breakerGate},
	{GateFailed, true, failedGate},
	{GateWave, true, waveGate},
	{GateCap, true, capGate},
}

// restartGates lets the due restart go, or stops it at the first gate
// that says so, from gate number from of restartGates on. A gate that reads
// the pacing facts before they are gathered asks for them (NeedsPacing):
// Pace then resumes there.
func (r Rules) restartGates(s Snapshot, v Verdict, from int) Verdict {
	d := &due{s: s, delivered: map[string]string{}}
	for i := from; i < len(restartGates); i++ {
		g := restartGates[i]
		if g.pacing && !s.Pace {
			continue // a dry run does not pace
		}
		if g.pacing && s.Pacing == nil {
			v.NeedsPacing, v.resume = true, i
			for _, dl := range v.deliveries {
				v.Deliver = append(v.Deliver, dl.id)
			}
			return v
		}
		if stop := g.check(r, d, v); stop != nil {
			stop.Gate = g.name
			return *stop
		}
	}
	return r.restart(d, v)
}

// Pace finishes a verdict that needs the pacing facts (NeedsPacing) with
// the snapshot that now holds them: the second of a due restart's two pure
// steps, which the controller takes under its pacing lock. (Decide on a
// snapshot that holds them from the start takes both at once.)
func (r Rules) Pace(s Snapshot, v Verdict) Verdict {
	if !v.NeedsPacing || s.Pacing == nil {
		return v
	}
	resume := v.resume
	v.NeedsPacing, v.Deliver = false, nil
	v = r.restartGates(s, v, resume)
	v.Until = earliest(v.Until, v.rolloutUntil)
	return v
}

// deliveries lists the changes a due restart would deliver: those of the
// sources due, and of those still inside their grace period whose new
// data the restart would record (they ride along).
func (r Rules) deliveries(s Snapshot, plan Plan) []delivery {
	w := s.Workload
	var out []delivery
	for _, ref := range w.State.References {
		src, ok := s.Sources[ref.ID]
		if !ok {
			continue
		}
		isDue := slices.Contains(plan.Changed, ref.ID)
		if !isDue {
			// Sources neither due nor riding along only have their record
			// rewritten (a newer checksum format, say).
			sid := ref.ID.String()
			_, waiting := graceOf(s.Grace, ref.ID, s.Now)
			old, value := w.Applied[sid], plan.Applied[sid]
			if !waiting || value == old || value == record.Absent || value == record.Pending || src.Matches(r.Sums, old, ref.Keys) {
				continue
			}
		}
		out = append(out, delivery{id: ref.ID, change: src.Change(r.Sums), due: isDue})
	}
	return out
}

// breakerGate: a workload restarted its budget of times within the
// breaker's window is held until the sources it reads have been still for
// the quiet time; a breaker hold is kept until then.
func breakerGate(r Rules, d *due, v Verdict) *Verdict {
	s, b := d.s, r.Breaker
	hold, prev := s.Workload.Hold, s.Workload.LastRestart
	var restarts []time.Time
	if prev != nil {
		restarts = prev.Restarts
	}
	last := s.Pacing.LastChange
	known := !last.IsZero()
	if !known {
		// Nobody knows better than that it may have changed just now.
		last = s.Now
	}
	heldByBreaker := hold != nil && hold.Kind == record.HoldBreaker
	switch verdict, wait := checkBreaker(b, restarts, heldByBreaker, last, s.Now); verdict {
	case breakerTrip:
		v.Action, v.Until = Hold, s.Now.Add(b.Quiet)
		v.Hold = &record.Hold{Kind: record.HoldBreaker, Since: s.Now,
			Cause: fmt.Sprintf("restarted %d times within %s (budget %d)", recent(restarts, b.Window, s.Now), b.Window, b.Budget)}
		v.Reasons = append(v.Reasons, fmt.Sprintf("held by the breaker: %s; it restarts once the sources it reads have been still for %s",
			v.Hold.Cause, b.Quiet))
		return &v
	case breakerKeep:
		v.Action, v.Hold, v.Until = Hold, hold, s.Now.Add(wait)
		if known {
			v.Reasons = append(v.Reasons, fmt.Sprintf("held by the breaker (%s): its sources last changed at %s; it restarts once they have been still for %s, at %s",
				hold.Cause, last.UTC().Format(time.RFC3339), b.Quiet, last.Add(b.Quiet).UTC().Format(time.RFC3339)))
		} else {
			v.Reasons = append(v.Reasons, fmt.Sprintf("held by the breaker (%s): it restarts once the sources it reads have been still for %s "+
				"(when they last changed only the controller knows; a newly started controller counts from its own start)", hold.Cause, b.Quiet))
		}
		return &v
	}
	return nil
}

// failedGate: a change the restart is due for is halted (a rollout of it
// failed, or a reader holds a hold for it): hold.
func failedGate(r Rules, d *due, v Verdict) *Verdict {
	for _, dl := range v.deliveries {
		state := d.s.Pacing.Waves[dl.id]
		if !dl.due || !state.Paced || !state.Halted || slices.Contains(state.Admit, d.s.Key.String()) {
			continue
		}
		sid := dl.id.String()
		v.Action, v.Until = Hold, time.Time{}
		v.Hold = &record.Hold{Kind: record.HoldWave, Source: sid, Change: dl.change, Cause: state.Cause, Since: d.s.Pacing.Now}
		v.Reasons = append(v.Reasons, fmt.Sprintf("held: the change %s of %s is halted, a rollout of it failed (%s); it goes on when that rollout completes after all, when %s changes again, or when released",
			dl.change, sid, state.Cause, sid))
		return &v
	}
	return nil
}

// waveGate gives the restart its place in the wave of each change it
// delivers, or it waits for one. A change riding along whose wave has no
// place for it yet stays behind: its own restart comes in its own wave.
func waveGate(r Rules, d *due, v Verdict) *Verdict {
	self := d.s.Key.String()
	for _, dl := range v.deliveries {
		state := d.s.Pacing.Waves[dl.id]
		sid := dl.id.String()
		place := slices.Index(state.Admit, self)
		switch {
		case !state.Paced || place >= 0:
			d.delivered[sid] = dl.change
			if state.Paced {
				d.paced, d.rank = true, max(d.rank, place)
			}
		case !dl.due:
			if old, known := d.s.Workload.Applied[sid]; known {
				v.Plan.Applied[sid] = old
			} else {
				delete(v.Plan.Applied, sid)
			}
		default:
			v.Action, v.Until, v.WaitsFor = Queue, d.s.Now.Add(queueRecheck), dl.id
			// A wave hold for this change that no longer halts it (the
			// failed rollout recovered) goes: the workload now only waits.
			hold := d.s.Workload.Hold
			v.Unhold = hold.HoldsChange(sid, dl.change) || r.holdsNothing(d.s)
			v.Reasons = append(v.Reasons, fmt.Sprintf("waits for its place in wave %d of the change of %s (%d of %d settled, %d in flight)",
				state.Wave, sid, state.Settled, state.Reach, state.InFlight))
			return &v
		}
	}
	return nil
}

// capGate: a paced restart waits while the paced rollouts in flight reach
// the cap (an unpaced one is not capped).
func capGate(r Rules, d *due, v Verdict) *Verdict {
	if !d.paced || r.Waves.MaxInFlight <= 0 {
		return nil
	}
	if inFlight := d.s.Pacing.InFlight; inFlight+d.rank >= r.Waves.MaxInFlight {
		v.Action, v.Until = Queue, d.s.Now.Add(queueRecheck)
		v.Unhold = r.holdsNothing(d.s)
		v.Reasons = append(v.Reasons, fmt.Sprintf("waits for the cap on rollouts in flight (%d in flight, at most %d)", inFlight, r.Waves.MaxInFlight))
		return &v
	}
	return nil
}

// restart lets the due restart go: the record it writes, with what its last
// restart delivered that is still current (carried over: the new rollout
// delivers it again, and its outcome speaks for those changes too).
func (r Rules) restart(d *due, v Verdict) Verdict {
	s := d.s
	if !s.Pace {
		v.Action = Restart // a dry run writes no record
		return v
	}
	now := s.Pacing.Now
	prev := s.Workload.LastRestart
	carried := false
	if prev != nil {
		for sid, change := range prev.Sources {
			if _, ok := d.delivered[sid]; ok {
				continue
			}
			if id, ok := catalog.ParseSourceID(sid); ok {
				if src, ok := s.Sources[id]; ok && src.Change(r.Sums) == change {
					d.delivered[sid] = change
					carried = true
				}
			}
		}
	}
	rec := record.NewLastRestart(prev, d.delivered, now, r.Breaker.Window)
	// Nothing waits on the end of a restart whose changes are all unpaced
	// (those it carries over from a paced record may still be waited on).
	rec.Unpaced = !d.paced && (!carried || prev.Unpaced)
	v.Plan.setExtra(r.Annotations.Rollout, record.Encode(rec))
	if s.Workload.State.Hold != "" {
		v.Plan.setExtra(r.Annotations.Hold, nil)
	}
	v.Action, v.LastRestart, v.At, v.Until = Restart, rec, now, time.Time{}
	if rec.EndUnwritten() {
		v.Follow = Follow{Start: true, At: now, Deadline: now.Add(r.Kinds[s.Key.Resource].Rollout.DeadlineOrDefault())}
	}
	return v
}

// holdsNothing reports a hold that holds nothing, and goes: a wave hold
// whose change is over (HoldOver), or a hold annotation that is not a hold.
func (r Rules) holdsNothing(s Snapshot) bool {
	over, _ := r.HoldOver(s.Workload.Hold, s.Sources)
	return over || s.Workload.Hold == nil && s.Workload.State.Hold != ""
}

// HoldOver reports a wave hold whose change is over, and why: its source
// changed again, is gone, or the change was released. Other holds end by
// the decision on the workload itself.
func (r Rules) HoldOver(hold *record.Hold, sources Sources) (bool, string) {
	if hold == nil || hold.Kind != record.HoldWave {
		return false, ""
	}
	id, ok := catalog.ParseSourceID(hold.Source)
	if !ok {
		return true, "it names no source"
	}
	src, ok := sources[id]
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

// ReleaseCommand is the command that sets a source's release annotation to
// a change, releasing it: its held or waiting restarts go on.
func ReleaseCommand(annotation string, id catalog.SourceID, change string) string {
	return fmt.Sprintf("kubectl annotate %s %s -n %s %s=%s --overwrite", id.Kind, id.Name, id.Namespace, annotation, change)
}
