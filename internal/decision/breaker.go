package decision

import (
	"time"

	"github.com/restart-controller/restart-controller/internal/config"
)

// breakerVerdict is what the breaker says about a restart that is due.
type breakerVerdict int

const (
	// Allow: restart.
	breakerAllow breakerVerdict = iota
	// Trip: hold now; the workload used its budget.
	breakerTrip
	// Keep: stay held; the sources changed less than Quiet ago.
	breakerKeep
	// Release: the sources stayed still for Quiet: restart once, ending the hold.
	breakerRelease
)

// Check decides on a due restart of a workload whose recent restarts are
// restarts, held by the breaker or not, whose sources last changed at
// lastChange. wait is how long until a breakerKeep may become a breakerRelease.
func checkBreaker(b config.Breaker, restarts []time.Time, held bool, lastChange, now time.Time) (v breakerVerdict, wait time.Duration) {
	if held {
		if quietAt := lastChange.Add(b.Quiet); now.Before(quietAt) {
			return breakerKeep, quietAt.Sub(now)
		}
		return breakerRelease, 0
	}
	if b.Budget <= 0 {
		return breakerAllow, 0
	}
	if recent(restarts, b.Window, now) >= b.Budget {
		return breakerTrip, 0
	}
	return breakerAllow, 0
}

// Recent counts the restarts within window before now.
func recent(restarts []time.Time, window time.Duration, now time.Time) int {
	n := 0
	for _, t := range restarts {
		if now.Sub(t) < window {
			n++
		}
	}
	return n
}
