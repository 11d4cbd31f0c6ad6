package explain

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// ActionHold: a restart is due but a hold the controller placed keeps it.
const ActionHold = "hold"

// HoldReport is the hold annotation on a workload, read as the controller
// reads it, with the condition that ends it.
type HoldReport struct {
	Kind  string    `json:"kind"`
	Since time.Time `json:"since"`
	Cause string    `json:"cause,omitempty"`
	// Source and Change name the halted change of a wave hold.
	Source string `json:"source,omitempty"`
	Change string `json:"change,omitempty"`
	// InForce is false when the hold holds nothing any more (its change was
	// replaced or released): the controller removes it at its next decision.
	InForce bool `json:"inForce"`
	// EndsWhen names what ends the hold without anyone acting.
	EndsWhen string `json:"endsWhen"`
	// Release is what a person can do to end it now, if anything.
	Release string `json:"release,omitempty"`
	// Error says why the annotation cannot be read (the controller then
	// removes it).
	Error string `json:"error,omitempty"`
}

// RolloutReport is the controller's record of the workload's last restart.
type RolloutReport struct {
	At      time.Time `json:"at"`
	Result  string    `json:"result"`
	Reason  string    `json:"reason,omitempty"`
	Sources []string  `json:"sources,omitempty"`
	// Job is the Job a runNow restart started, in the workload's namespace.
	Job string `json:"job,omitempty"`
	// Deadline, for a rollout under way, is when it is judged failed if
	// not complete.
	Deadline *time.Time `json:"deadline,omitempty"`
	// Note says what the controller does next with it.
	Note string `json:"note"`
}

// Open reports whether the last restart's rollout is under way or failed:
// what explain and status show of it.
func (r *RolloutReport) Open() bool {
	return r != nil && (r.Result == "rolling out" || r.Result == string(rollout.ResultFailed))
}

// holdReport reports the workload's hold as decision.ReadWorkload read it.
// sources are the sources it reads as fetched (nil when absent); a wave
// hold's source is among them.
func (c *Config) holdReport(w decision.Workload, sources decision.Sources) *HoldReport {
	if w.HoldErr != nil {
		return &HoldReport{Error: w.HoldErr.Error(), EndsWhen: "the controller removes an unreadable hold at its next decision"}
	}
	h := w.Hold
	if h == nil {
		return nil
	}
	r := &HoldReport{Kind: string(h.Kind), Since: h.Since, Cause: h.Cause, Source: h.Source, Change: h.Change, InForce: true}
	switch h.Kind {
	case record.HoldBreaker:
		r.EndsWhen = fmt.Sprintf("the sources it reads have been still for %s (the breaker's quiet time; the controller keeps "+
			"the time of the last change it saw in memory, and a newly started controller counts from its own start): "+
			"then it restarts once, in its wave", c.Breaker.Quiet)
	case record.HoldWave:
		r.EndsWhen = fmt.Sprintf("the failed rollout (%s) completes after all, or %s changes again: then it restarts in its wave",
			record.FailedWorkload(h.Cause), h.Source)
		if id, ok := catalog.ParseSourceID(h.Source); ok {
			r.Release = decision.ReleaseCommand(c.Annotations.Release, id, h.Change)
		}
		if over, why := c.rules().HoldOver(h, sources); over {
			r.InForce, r.EndsWhen, r.Release = false, why+": the hold is over", ""
		}
	}
	return r
}

// rolloutReport reports the workload's rollout record, as
// decision.ReadWorkload read it (none when unreadable); deadline is its
// kind's (rollout.Rule.DeadlineOrDefault).
func (c *Config) rolloutReport(w decision.Workload, deadline time.Duration) *RolloutReport {
	rec := w.LastRestart
	if rec == nil {
		return nil
	}
	r := &RolloutReport{At: rec.At, Result: string(rec.Result), Reason: rec.Reason, Job: rec.Job, Sources: slices.Sorted(maps.Keys(rec.Sources))}
	switch outcome := rec.Outcome(decision.RolloutStatus(w.State).Phase); {
	case outcome != rec.Result: // an unpaced restart's end is not written
		r.Result, r.Reason, r.Note = string(outcome), w.State.Rollout.Reason, "ended, as the workload's status shows (an unpaced restart's end is not written)"
	case rec.Result == rollout.ResultPending:
		r.Result = "rolling out"
		ends := rec.At.Add(deadline).UTC()
		r.Deadline = &ends
		r.Note = fmt.Sprintf("followed until it completes, or judged failed at %s (the deadline, %s after the restart)",
			ends.Format(time.RFC3339), deadline)
	case rec.Result == rollout.ResultFailed:
		r.Note = "the restarts of the same changes not made yet are held; still followed, and recorded complete if it completes after all"
	default:
		r.Note = "ended"
	}
	return r
}
