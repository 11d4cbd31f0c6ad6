package decision

import (
	"encoding/json"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/pacing"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// TrustedApplied returns the workload's applied checksums, or nil when they
// cannot be trusted: none, unreadable, or recorded against another pod
// template (Compare then records afresh). Parsed on each call rather than
// kept: a parsed copy of every workload's annotations was 16% of the heap at
// 10,000 workloads.
func TrustedApplied(w *catalog.WorkloadState) map[string]string {
	if !w.HasApplied {
		return nil
	}
	if rec := parseTemplateRecord(w.AppliedTemplateHash); rec.hash == "" || rec.hash != w.TemplateHash {
		return nil
	}
	applied := map[string]string{}
	if json.Unmarshal([]byte(w.Applied), &applied) != nil {
		return nil
	}
	return applied
}

// PendingFor reports whether a reader's pods run other data of the source
// than it holds now, such that a restart for it is due (as Compare would
// find, leaving aside grace periods, which waves do not need). known is
// false when the state cannot tell: a large source that does not cover the
// keys the reader reads. applied is TrustedApplied of the reader.
// onCreate is config.SourceLifecycle.RestartOnCreate.
func PendingFor(sums checksum.Hasher, w *catalog.WorkloadState, applied map[string]string, id catalog.SourceID, src *catalog.SourceState,
	onCreate bool) (pending, known bool) {
	if applied == nil {
		return false, true
	}
	old, ok := applied[id.String()]
	if !ok {
		return false, true
	}
	for _, ref := range w.References {
		if ref.ID != id {
			continue
		}
		if !src.Covers(ref.Keys) {
			return false, false
		}
		if src.Matches(sums, old, ref.Keys) || sums.Rebaseline(old) || (old == Absent && (!ref.Optional || !onCreate)) {
			return false, true
		}
		return true, true
	}
	return false, true
}

// RolloutPhase is where the rollout of the workload's pod template stands,
// for its record (pacing.LastRestart.Outcome): NotRolling where a
// configured condition says its template replaces no pods now.
func RolloutPhase(w *catalog.WorkloadState) rollout.Phase {
	if w.NotRolled != "" {
		return rollout.NotRolling
	}
	return w.Rollout.Phase
}

// Reader is one workload reading a source, as wave decisions see it.
type Reader struct {
	Key   catalog.WorkloadKey
	State *catalog.WorkloadState
	// LastRestart is the record of its last restart: Reserved when the
	// fleet has written it and the cache does not show it yet.
	LastRestart *pacing.LastRestart
	Reserved    bool
	// Self: it is the workload being decided, whose restart for the source
	// is due.
	Self bool
}

// Member is the reader's part in the waves of the change of the source, or
// false when it takes none: not opted in, unreadable references, opted out
// of the source, or its pending state unknown (a large source whose keys it
// reads the state does not cover: it takes its place when it decides
// itself, as Self, and counts once restarted).
func (r Rules) Member(rd Reader, id catalog.SourceID, src *catalog.SourceState, change string) (pacing.Member, bool) {
	w := rd.State
	if !w.OptedIn || w.Problem != "" || r.OptedOut(w, id, src) {
		return pacing.Member{}, false
	}
	sid := id.String()
	m := pacing.Member{Key: rd.Key.String()}
	if rd.LastRestart.Delivered(sid, change) {
		m.Restarted, m.Result = true, rd.LastRestart.Outcome(RolloutPhase(w))
		m.Failure = rd.LastRestart.Reason
		if rd.LastRestart.Message != "" {
			m.Failure += ": " + rd.LastRestart.Message
		}
	}
	switch {
	case rd.Reserved:
	case rd.Self:
		m.Pending = true
	default:
		pending, known := PendingFor(r.Sums, w, TrustedApplied(w), id, src, r.Lifecycle.RestartOnCreate)
		if !known && !m.Restarted {
			return pacing.Member{}, false
		}
		m.Pending = pending
	}
	if hold, _ := pacing.ParseHold(w.Hold); hold != nil {
		switch {
		case hold.HoldsChange(sid, change):
			m.HeldHere, m.Cause = true, hold.Cause
		case hold.Kind == pacing.HoldWave && hold.Source == sid:
			// A hold for an older change of this source: stale.
		case rd.Self:
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
			m.HeldElsewhere = true
		}
	}
	return m, true
}
