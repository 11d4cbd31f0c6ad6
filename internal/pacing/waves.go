package pacing

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/restart-controller/restart-controller/internal/rollout"
)

// Waves are the settings of health-gated waves.
type Waves struct {
	// UnpacedUpTo: a change that reaches at most this many workloads restarts
	// them all at once.
	UnpacedUpTo int
	// First is the size of the first wave; each next wave is Growth times
	// the previous one (rounded up).
	First  int
	Growth float64
}

// Member is what wave decisions know of one workload reading the source, for
// the source's current change. Everything comes from the workload's cached
// annotations, so it survives a restart of the controller.
type Member struct {
	// Key orders members; wave membership follows this order.
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
}

// State is where one change of one source stands.
type State struct {
	// Reach is how many workloads the change concerns: those still to
	// restart for it and those restarted for it.
	Reach int
	// Paced is false when the change reaches few enough workloads to restart
	// them all at once.
	Paced bool
	// Settled counts members whose rollout completed (or whose controller
	// does not roll them); InFlight those still rolling out; Failed those
	// that failed.
	Settled, InFlight, Failed int
	// Halted: a rollout of this change failed (or a member carries a hold
	// for it) and no release was given; Cause names the first failure.
	Halted bool
	Cause  string
	// Wave is the 1-based number of the wave under way; Limit is how many
	// members may have started once it is fully started.
	Wave, Limit int
	// Admit lists, in order, the pending members that may start now (the
	// controller's cap on rollouts in flight still applies). Held lists the
	// pending members that must wait while the change is halted.
	Admit, Held []string
	// Elsewhere lists the pending members held for another reason (the
	// breaker, another source's halted change): they take a place only
	// when they decide themselves, and their holds may have ended since
	// (a breaker's quiet time passes without an event), so a rollout that
	// ends wakes them too.
	Elsewhere []string
}

// Evaluate decides, for one change of one source, which of its pending
// members may restart now. Waves grow only on health: the next wave opens
// when every rollout of this change started so far has completed, and a
// failed one halts the change until released (released) or replaced by a
// new change (which is evaluated afresh, from the first wave). Membership is
// deterministic: members in Key order, the settled ones counting first.
func (w Waves) Evaluate(members []Member, released bool) State {
	members = append([]Member(nil), members...)
	sort.Slice(members, func(i, j int) bool { return members[i].Key < members[j].Key })
	var s State
	var candidates []string
	var failure, holdCause string
	// A hold names the workload whose rollout failed (its Cause starts with
	// that member's Key). When that rollout has since completed (the
	// controller keeps following a failed rollout, and records a late
	// completion), the failure it proved is over, and so is its halt.
	recovered := map[string]bool{}
	for _, m := range members {
		if m.Restarted && m.Result == rollout.ResultComplete {
			recovered[m.Key] = true
		}
	}
	for _, m := range members {
		switch {
		case m.Pending:
			s.Reach++
			if m.HeldHere && holdCause == "" && !recovered[FailedWorkload(m.Cause)] {
				holdCause = m.Cause
			}
			if m.HeldHere || !m.HeldElsewhere {
				candidates = append(candidates, m.Key)
			} else {
				s.Elsewhere = append(s.Elsewhere, m.Key)
			}
		case m.Restarted:
			s.Reach++
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
	s.Wave, s.Limit = w.wave(s.Settled)
	slots := min(s.Limit-s.Settled-s.InFlight, len(candidates))
	if slots > 0 {
		s.Admit = candidates[:slots]
	}
	return s
}

// wave returns the wave under way when settled members have completed (the
// first wave whose end lies beyond them) and the end of that wave, counted
// in members from the first.
func (w Waves) wave(settled int) (number, end int) {
	size := float64(max(w.First, 1))
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

// FailedWorkload names the workload whose failed rollout a wave hold's cause
// reports: the member Key before the first ": " (Evaluate writes causes so).
func FailedWorkload(cause string) string {
	key, _, _ := strings.Cut(cause, ": ")
	return key
}
