// Package status answers, from the objects alone, what restart-controller
// is doing across the cluster: each source change in progress with its
// waves, every restart held or waiting with its reason and when it ends, the
// rollouts in flight, and the controller's leader and health. It reads with
// the caller's credentials and never writes, so it works with the
// controller down.
//
// Every verdict is explain's (package explain), which is the controller's
// decision (package decision) on the objects, paced by the controller's own
// pacing code (package pacing) over the listing: where the objects decide,
// status, explain and the controller agree; where only the controller's
// memory could tell (a grace period under way, the breaker's quiet time),
// status says so, as explain does.
package status

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/explain"
	"github.com/restart-controller/restart-controller/internal/record"
)

// Reasons a restart does not go now, in the order status shows them: the
// ones a person may have to act on first.
const (
	ReasonWaveHalted  = "wave halted"      // a rollout of the change failed: held
	ReasonBreaker     = "breaker"          // restarted too often: held
	ReasonWindow      = "window"           // waits for its restart window
	ReasonMinInterval = "minimum interval" // waits for its minimum interval's end
	ReasonWave        = "wave"             // waits for its place in a wave
	ReasonCap         = "cap"              // waits for the cap on rollouts in flight
	ReasonDue         = "due"              // goes now, or when its grace period ends
	ReasonUnknown     = "unknown"          // could not be decided: a source could not be read
)

var reasonOrder = []string{ReasonWaveHalted, ReasonBreaker, ReasonWindow, ReasonMinInterval, ReasonWave, ReasonCap, ReasonDue, ReasonUnknown}

// Report is what the controller is doing across the namespaces read.
type Report struct {
	// Scope names the namespaces read: "all namespaces", or their names.
	Scope string    `json:"scope"`
	Time  time.Time `json:"time"`
	// Controller is its leader and health; nil when not asked.
	Controller *Controller `json:"controller,omitempty"`
	Workloads  Counts      `json:"workloads"`
	// Changes are the source changes in progress: some reader not restarted
	// for it yet, or a rollout of it not complete.
	Changes []Change `json:"changes"`
	// Restarts are every restart held, waiting, queued, due or undecided,
	// by reason (in reasonOrder), then workload.
	Restarts []Restart `json:"restarts"`
	// Rollouts are the last restarts whose rollout is under way or failed.
	Rollouts []Rollout `json:"rollouts"`
	// NotRead names what could not be read, and what that leaves out.
	NotRead []string `json:"notRead,omitempty"`
	// Notes say what only the controller's memory could tell.
	Notes []string `json:"notes,omitempty"`
}

// Counts are the opted-in workloads read, of the namespaces the controller
// acts on, by what the controller would do now (explain's actions).
type Counts struct {
	OptedIn int            `json:"optedIn"`
	Actions map[string]int `json:"actions"`
}

// Change is a source change in progress and where its waves stand.
type Change struct {
	Source string `json:"source"` // "configmap/NS/NAME"
	Change string `json:"change"`
	// Paced: it reaches more workloads than waves.unpacedUpTo, and they
	// restart in waves; Wave is the one under way (or halted), of Waves.
	Paced bool `json:"paced"`
	Wave  int  `json:"wave,omitempty"`
	Waves int  `json:"waves,omitempty"`
	// Reach counts the workloads it concerns; Restarted those restarted
	// for it, InFlight and Failed of these the rollouts under way and
	// failed; Waiting the others waiting for their window or interval.
	Reach     int `json:"reach"`
	Restarted int `json:"restarted"`
	InFlight  int `json:"inFlight"`
	Failed    int `json:"failed"`
	Waiting   int `json:"waiting"`
	// Halted: a failed rollout (Cause) holds its Held readers since
	// HeldSince, until Release, a new change of the source, or the failed
	// rollout's completion.
	// Elsewhere counts the readers due for it but held for another reason
	// (the breaker, another change's halt).
	Elsewhere int        `json:"elsewhere,omitempty"`
	Halted    bool       `json:"halted"`
	Cause     string     `json:"cause,omitempty"`
	Held      int        `json:"held"`
	HeldSince *time.Time `json:"heldSince,omitempty"`
	Released  bool       `json:"released,omitempty"`
	Release   string     `json:"release,omitempty"`
}

// Restart is a workload whose restart does not go now, or goes now.
type Restart struct {
	// Workload is "RESOURCE.GROUP/NAMESPACE/NAME", as holds, records and
	// Events name workloads.
	Workload string `json:"workload"`
	Reason   string `json:"reason"`
	// Action and Gate are explain's (the controller's decision).
	Action string `json:"action"`
	Gate   string `json:"gate,omitempty"`
	// Sources are the sources whose change it waits to deliver.
	Sources []string `json:"sources,omitempty"`
	// Since is when its hold was written; Until when its wait ends, where
	// the objects and the clock tell; Ends says what ends it.
	Since   *time.Time `json:"since,omitempty"`
	Until   *time.Time `json:"until,omitempty"`
	Ends    string     `json:"ends"`
	Release string     `json:"release,omitempty"`
	Reasons []string   `json:"reasons"`
}

// Rollout is a last restart whose rollout is under way or failed.
type Rollout struct {
	Workload string     `json:"workload"`
	At       time.Time  `json:"at"`
	Result   string     `json:"result"` // "rolling out" or "failed"
	Reason   string     `json:"reason,omitempty"`
	Deadline *time.Time `json:"deadline,omitempty"`
	Sources  []string   `json:"sources,omitempty"`
	Job      string     `json:"job,omitempty"`
	Note     string     `json:"note"`
}

// Build decides every workload of the listing at now, with explain's
// decision paced over the whole listing, and gathers the changes in
// progress, the restarts that do not go now and the rollouts in flight.
// scope names the namespaces listed.
func Build(l *Listing, scope string, now time.Time) *Report {
	l.group()
	c := l.cfg
	pacer := c.NewPacer(l.fleet)
	rep := &Report{Scope: scope, Time: now, Workloads: Counts{Actions: map[string]int{}},
		Changes: []Change{}, Restarts: []Restart{}, Rollouts: []Rollout{}, NotRead: l.notRead}
	candidates := map[catalog.SourceID]bool{}
	// holds are the wave holds in force, by the change they hold.
	holds := map[[2]string][]time.Time{}
	for _, key := range l.fleet.Keys() {
		raw, _ := l.fleet.Raw(key)
		if !raw.OptedIn {
			continue // nothing is ever decided for it
		}
		wr := c.ExplainListed(l.kinds[key.Resource], raw, l.fetch, pacer, now)
		rep.Workloads.OptedIn++
		rep.Workloads.Actions[wr.Decision.Action]++
		name := key.String()
		if rs, ok := restartOf(l, name, wr); ok {
			rep.Restarts = append(rep.Restarts, rs)
			for _, s := range rs.Sources {
				if id, ok := catalog.ParseSourceID(s); ok {
					candidates[id] = true
				}
			}
		}
		if h := wr.Hold; h != nil && h.InForce && h.Kind == string(record.HoldWave) {
			if id, ok := catalog.ParseSourceID(h.Source); ok {
				candidates[id] = true
				holds[[2]string{h.Source, h.Change}] = append(holds[[2]string{h.Source, h.Change}], h.Since)
			}
		}
		if ro := wr.Rollout; ro.Open() {
			rep.Rollouts = append(rep.Rollouts, Rollout{Workload: name, At: ro.At, Result: ro.Result, Reason: ro.Reason,
				Deadline: ro.Deadline, Sources: ro.Sources, Job: ro.Job, Note: ro.Note})
			for _, s := range ro.Sources {
				if id, ok := catalog.ParseSourceID(s); ok {
					candidates[id] = true
				}
			}
		}
	}
	slices.SortStableFunc(rep.Restarts, func(a, b Restart) int {
		if d := slices.Index(reasonOrder, a.Reason) - slices.Index(reasonOrder, b.Reason); d != 0 {
			return d
		}
		return strings.Compare(a.Workload, b.Workload)
	})
	for _, id := range slices.SortedFunc(maps.Keys(candidates), func(a, b catalog.SourceID) int { return strings.Compare(a.String(), b.String()) }) {
		if ch, ok := changeOf(l, pacer, id, rep.Restarts, holds, now); ok {
			rep.Changes = append(rep.Changes, ch)
		}
	}
	// Halted changes first, then the paced ones: what may need a person.
	slices.SortStableFunc(rep.Changes, func(a, b Change) int { return rank(a) - rank(b) })
	rep.Notes = notes(l, rep)
	return rep
}

// rank orders changes: halted, paced, the others.
func rank(c Change) int {
	switch {
	case c.Halted:
		return 0
	case c.Paced:
		return 1
	}
	return 2
}

// restartOf is the workload's entry among the restarts that do not go
// now (or go now), from explain's report of it; false when it has none:
// nothing to do, or only a record to write.
func restartOf(l *Listing, name string, wr *explain.WorkloadReport) (Restart, bool) {
	d := wr.Decision
	rs := Restart{Workload: name, Action: d.Action, Gate: d.Gate, Sources: d.Changed, Until: d.Until, Reasons: d.Reasons}
	h := wr.Hold
	if h != nil && h.InForce {
		since := h.Since
		rs.Since = &since
	}
	switch decision.Gate(d.Gate) {
	case decision.GateFailed:
		rs.Reason = ReasonWaveHalted
		rs.Ends = "the failed rollout completes after all, the source changes again, or the change is released"
		if h != nil && h.InForce && h.Kind == string(record.HoldWave) {
			rs.Ends, rs.Release = h.EndsWhen, h.Release
		}
	case decision.GateBreaker:
		rs.Reason = ReasonBreaker
		rs.Ends = fmt.Sprintf("the sources it reads have been still for %s (the breaker's quiet time, timed by the controller's memory)", l.cfg.Breaker.Quiet)
		if h != nil && h.InForce && h.Kind == string(record.HoldBreaker) {
			rs.Ends = h.EndsWhen
		}
	case decision.GateWindow, decision.GateMinInterval:
		rs.Reason, rs.Ends = ReasonWindow, "its restart window opens"
		if d.Gate == string(decision.GateMinInterval) {
			rs.Reason, rs.Ends = ReasonMinInterval, "its minimum interval since its last restart ends"
		}
		if d.Until != nil {
			rs.Ends += " at " + d.Until.Format(time.RFC3339)
		}
		rs.Release = releaseOf(l, d.Changed)
	case decision.GateWave:
		rs.Reason, rs.Ends = ReasonWave, "its place in the wave comes: the rollouts of the waves before it complete"
	case decision.GateCap:
		rs.Reason, rs.Ends = ReasonCap, fmt.Sprintf("fewer paced rollouts than the cap (%d) are in flight", l.cfg.Waves.MaxInFlight)
	default:
		switch d.Action {
		case explain.ActionRestart:
			rs.Reason, rs.Ends = ReasonDue, "now, or when the grace period of its change ends (when the controller saw the change lives in its memory only)"
		case explain.ActionUnknown:
			rs.Reason, rs.Ends = ReasonUnknown, strings.Join(d.Reasons, "; ")
		default:
			return Restart{}, false
		}
	}
	return rs, true
}

// releaseOf is the command that lets a waiting restart go now: the release
// of the change of the first of its sources that exists.
func releaseOf(l *Listing, sources []string) string {
	for _, s := range sources {
		id, ok := catalog.ParseSourceID(s)
		if !ok {
			continue
		}
		if src, ok := l.fleet.Source(id); ok {
			return decision.ReleaseCommand(l.cfg.Annotations.Release, id, src.Change(l.cfg.Sums))
		}
	}
	return ""
}

// changeOf is where the current change of the source stands, by the
// controller's own wave evaluation over the listing; false when it is not
// in progress (every reader restarted for it and settled) or the source is
// not listed.
func changeOf(l *Listing, pacer *explain.Pacer, id catalog.SourceID, restarts []Restart, holds map[[2]string][]time.Time, now time.Time) (Change, bool) {
	src, ok := l.fleet.Source(id)
	if !ok {
		return Change{}, false
	}
	c := l.cfg
	change := src.Change(c.Sums)
	ws := pacer.Waves(id, src, now)
	if ws.Reach == ws.Settled && !ws.Halted {
		return Change{}, false
	}
	ch := Change{Source: id.String(), Change: change, Paced: ws.Paced, Reach: ws.Reach, Restarted: ws.Restarted, InFlight: ws.InFlight,
		Failed: ws.Failed, Elsewhere: len(ws.Elsewhere), Halted: ws.Halted, Cause: ws.Cause, Held: len(ws.Held), Released: ws.Released}
	if ws.Paced {
		ch.Waves = decision.WaveCount(c.Waves, ws.Reach)
		ch.Wave = ws.Wave
		if ch.Wave == 0 {
			// Halted: the wave of the last reader restarted.
			ch.Wave = decision.WaveCount(c.Waves, max(ch.Restarted, 1))
		}
	}
	for _, rs := range restarts {
		if (rs.Reason == ReasonWindow || rs.Reason == ReasonMinInterval) && slices.Contains(rs.Sources, ch.Source) {
			ch.Waiting++
		}
	}
	if since := holds[[2]string{ch.Source, change}]; len(since) > 0 {
		first := slices.MinFunc(since, func(a, b time.Time) int { return a.Compare(b) })
		ch.HeldSince = &first
	}
	if ws.Halted {
		ch.Release = decision.ReleaseCommand(c.Annotations.Release, id, change)
	}
	return ch, true
}

// notes say what the objects cannot tell about what the report shows.
func notes(l *Listing, rep *Report) []string {
	var out []string
	has := func(reason string) bool {
		return slices.ContainsFunc(rep.Restarts, func(r Restart) bool { return r.Reason == reason })
	}
	if has(ReasonDue) {
		out = append(out, fmt.Sprintf("restarts shown as due go now, or once the grace period of their change (%s) ends: "+
			"when the controller saw a change lives in its memory only", l.cfg.Settings.GracePeriod))
	}
	if has(ReasonBreaker) {
		out = append(out, fmt.Sprintf("a breaker hold ends once the sources the workload reads have been still for %s: "+
			"when they last changed lives in the controller's memory only (a newly started controller counts from its own start), "+
			"so whether that time has passed cannot be told from the objects", l.cfg.Breaker.Quiet))
	}
	for _, ns := range l.scope {
		if why := l.cfg.NamespaceNotWatched(ns); ns != "" && why != "" {
			out = append(out, why+": the controller does not act on its workloads")
		}
	}
	if l.cfg.Waves.MaxInFlight > 0 && !l.coversWatched() && rep.Workloads.OptedIn > 0 {
		out = append(out, fmt.Sprintf("the cap on paced rollouts in flight (%d) counts those of every namespace; "+
			"only those of %s were read", l.cfg.Waves.MaxInFlight, rep.Scope))
	}
	return out
}
