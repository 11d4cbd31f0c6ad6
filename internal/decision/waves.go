package decision

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
	"k8s.io/apimachinery/pkg/labels"
)

// Reader is what the waves of a source's change know of one workload
// reading the source. Everything comes from the workload's cached
// annotations, so it survives a restart of the controller.
type Reader struct {
	// Key orders readers; wave places follow this order.
	Key string
	// Pending: its pods run older data of the source than the change, and a
	// restart for it is due.
	Pending bool
	// Restarted: its last restart delivered this change (LastRestart.Delivered);
	// Result is that restart's outcome so far, Failure explains a failed one.
	Restarted bool
	Result    rollout.Result
	Failure   string
	// HeldHere: it carries a wave hold for this change; Cause is that hold's.
	HeldHere bool
	Cause    string
	// HeldElsewhere: held for another reason (the breaker, another source's
	// halted change), so it cannot take a place in this change's waves.
	HeldElsewhere bool
	// Waiting: its restart window is closed, or its minimum interval not
	// over, until WaitsUntil: it takes no place in the waves meanwhile, so
	// that it never stalls the restarts of the others.
	Waiting    bool
	WaitsUntil time.Time
}

// WaveState is where the waves of one change of one source stand.
type WaveState struct {
	// Reach is how many workloads the change concerns: those still to
	// restart for it and those restarted for it.
	Reach int
	// Paced is false when the change reaches few enough workloads to restart
	// them all at once.
	Paced bool
	// Settled counts readers whose rollout completed (or whose controller
	// does not roll them); InFlight those still rolling out; Failed those
	// that failed; Restarted all of them, whatever their rollout's outcome.
	Settled, InFlight, Failed, Restarted int
	// Released: a release was given for this change, and its failures
	// count as settled too (Settled includes Failed).
	Released bool
	// Halted: a rollout of this change failed (or a reader carries a hold
	// for it) and no release was given; Cause names the first failure.
	Halted bool
	Cause  string
	// Wave is the 1-based number of the wave under way; Limit is how many
	// readers may have started once it is fully started.
	Wave, Limit int
	// Admit lists, in order, the pending readers that may start now (the
	// controller's cap on rollouts in flight still applies). Held lists the
	// pending readers that must wait while the change is halted.
	Admit, Held []string
	// Elsewhere lists the pending readers held for another reason (the
	// breaker, another source's halted change): they take a place only
	// when they decide themselves, and their holds may have ended since
	// (a breaker's quiet time passes without an event), so a rollout that
	// ends wakes them too.
	Elsewhere []string
}

// EvaluateWaves decides, for one change of one source, which of its
// pending readers may restart now. Waves grow only on health: the next wave opens
// when every rollout of this change started so far has completed, and a
// failed one halts the change until released (released) or replaced by a
// new change (which is evaluated afresh, from the first wave). Places are
// deterministic: readers in Key order, the settled ones counting first.
func EvaluateWaves(w config.Waves, readers []Reader, released bool) WaveState {
	readers = append([]Reader(nil), readers...)
	sort.Slice(readers, func(i, j int) bool { return readers[i].Key < readers[j].Key })
	s := WaveState{Released: released}
	var candidates []string
	var failure, holdCause string
	// A hold names the workload whose rollout failed (its Cause starts with
	// that reader's Key). When that rollout has since completed (the
	// controller keeps following a failed rollout, and records a late
	// completion), the failure it proved is over, and so is its halt.
	recovered := map[string]bool{}
	for _, m := range readers {
		if m.Restarted && m.Result == rollout.ResultComplete {
			recovered[m.Key] = true
		}
	}
	for _, m := range readers {
		switch {
		case m.Pending:
			s.Reach++
			if m.HeldHere && holdCause == "" && !recovered[record.FailedWorkload(m.Cause)] {
				holdCause = m.Cause
			}
			switch {
			case m.Waiting:
			case m.HeldHere || !m.HeldElsewhere:
				candidates = append(candidates, m.Key)
			default:
				s.Elsewhere = append(s.Elsewhere, m.Key)
			}
		case m.Restarted:
			s.Reach++
			s.Restarted++
			switch m.Result {
			case rollout.ResultPending:
				s.InFlight++
			case rollout.ResultFailed:
				s.Failed++
				if failure == "" {
					failure = fmt.Sprintf("%s: %s", m.Key, m.Failure)
				}
			default:
				s.Settled++
			}
		}
	}
	switch {
	case released:
		// Failures of a released change no longer stop it.
		s.Settled += s.Failed
	case failure != "":
		s.Halted, s.Cause = true, failure
	case holdCause != "":
		// A hold outlives the record of the failure that caused it (that
		// workload may have been restarted since, or be gone).
		s.Halted, s.Cause = true, holdCause
	}
	s.Paced = s.Reach > w.UnpacedUpTo
	if !s.Paced {
		s.Wave, s.Limit = 1, s.Reach
		s.Admit = candidates
		return s
	}
	if s.Halted {
		s.Held = candidates
		return s
	}
	s.Wave, s.Limit = waveAt(w, s.Settled)
	slots := min(s.Limit-s.Settled-s.InFlight, len(candidates))
	if slots > 0 {
		s.Admit = candidates[:slots]
	}
	return s
}

// WaveCount is how many waves a paced change of reach readers takes, by
// the arithmetic of the wave gate: for people (status's "wave 2 of 4"),
// never for a decision. Zero readers take none.
func WaveCount(w config.Waves, reach int) int {
	if reach <= 0 {
		return 0
	}
	n, _ := waveAt(w, reach-1)
	return n
}

// waveAt returns the wave under way when settled readers have completed
// (the first wave whose end lies beyond them) and the end of that wave,
// counted in readers from the first.
func waveAt(w config.Waves, settled int) (number, end int) {
	size := float64(max(w.FirstWave, 1))
	growth := math.Max(w.Growth, 1)
	end = int(size)
	number = 1
	for end <= settled {
		size = math.Ceil(size * growth)
		end += int(size)
		number++
	}
	return number, end
}

// ReaderOf is the part a workload reading the source id takes in the waves
// of its change, or false when it takes none: not opted in, unreadable
// references, opted out of the source, or whether it is pending unknown (a
// large source whose keys it reads the state does not cover: it takes its
// place when it decides itself, as self, and counts once restarted).
//
// reserved: its LastRestart is a record this process wrote on it that the
// cache does not show yet, standing for the cached one. self is the workload
// being decided, whose restart for the source is due. Whether another
// reader is pending is the comparison its own decision makes (existing),
// grace periods aside: waves do not wait for them. A pending one whose
// restart window is closed, or whose minimum interval is not over, at now
// is Waiting (ns: its namespace's labels, for its namespace's window).
func (r Rules) ReaderOf(key catalog.WorkloadKey, w Workload, reserved, self bool,
	id catalog.SourceID, src *catalog.SourceState, change string, ns labels.Labels, now time.Time) (Reader, bool) {
	ws := w.State
	if !ws.OptedIn || ws.Problem != "" || r.WhyOptedOut(ws, id, src) != "" {
		return Reader{}, false
	}
	sid := id.String()
	rd := Reader{Key: key.String()}
	last := w.LastRestart
	if last.Delivered(sid, change) {
		rd.Restarted, rd.Result = true, last.Outcome(RolloutStatus(ws).Phase)
		rd.Failure = last.Reason
		if last.Message != "" {
			rd.Failure += ": " + last.Message
		}
	}
	switch {
	case reserved:
	case self:
		rd.Pending = true
	default:
		pending, known := r.pending(w, id, src)
		if !known && !rd.Restarted {
			return Reader{}, false
		}
		rd.Pending = pending
		if pending && src.Annotations[r.Annotations.Release] != change {
			var at *time.Time
			if last != nil {
				at = &last.At
			}
			t := r.timingOf(w, Snapshot{Key: key, Namespace: ns})
			if until, _, gate := t.closed(at, now); gate != "" {
				rd.Waiting, rd.WaitsUntil = true, until
			}
		}
	}
	if hold := w.Hold; hold != nil {
		switch {
		case hold.HoldsChange(sid, change):
			rd.HeldHere, rd.Cause = true, hold.Cause
		case hold.Kind == record.HoldWave && hold.Source == sid:
			// A hold for an older change of this source: stale.
		case self:
			// The deciding workload's own hold, of another kind or
			// source, never keeps it out of this wave: the decision has
			// asked the breaker first, and evaluates the waves of the
			// hold's source itself, so a hold still in force holds it
			// there. Counted as held elsewhere, a released workload would
			// never take a place in a paced wave: every breaker hold over
			// a source of more than unpacedUpTo readers, and every wave
			// hold of a reader of two such sources whose failed rollout
			// recovered, would last for ever.
		default:
			rd.HeldElsewhere = true
		}
	}
	return rd, true
}

// pending reports whether the workload's pods run other data of the source
// than it holds now, such that a restart for it is due, by the comparison
// its own decision makes; known is false when the state cannot tell (a
// large source that does not cover the keys it reads).
func (r Rules) pending(w Workload, id catalog.SourceID, src *catalog.SourceState) (pending, known bool) {
	for _, ref := range w.State.References {
		if ref.ID != id {
			continue
		}
		if !src.Covers(ref.Keys) {
			return false, false
		}
		c, _ := r.newComparison(w, nil, time.Time{})
		old, recorded := c.applied[id.String()]
		_, _, changed := c.existing(ref, old, recorded, src)
		return changed, true
	}
	return false, true
}
