package decision

import (
	"time"

	"github.com/restart-controller/restart-controller/internal/config"
)

// BreakerVerdict is what the breaker says about a restart that is due.
type BreakerVerdict int

const (
	// Allow: restart.
	Allow BreakerVerdict = iota
	// Trip: hold now; the workload used its budget.
	Trip
	// Keep: stay held; the sources changed less than Quiet ago.
	Keep
	// Release: the sources stayed still for Quiet: restart once, ending the hold.
	Release
)

// Check decides on a due restart of a workload whose recent restarts are
// restarts, held by the breaker or not, whose sources last changed at
// lastChange. wait is how long until a Keep may become a Release.
func checkBreaker(b config.Breaker, restarts []time.Time, held bool, lastChange, now time.Time) (v BreakerVerdict, wait time.Duration) {
	if held {
		if quietAt := lastChange.Add(b.Quiet); now.Before(quietAt) {
			return Keep, quietAt.Sub(now)
		}
		return Release, 0
	}
	if b.Budget <= 0 {
		return Allow, 0
	}
	if Recent(restarts, b.Window, now) >= b.Budget {
		return Trip, 0
	}
	return Allow, 0
}

// Recent counts the restarts within window before now.
func Recent(restarts []time.Time, window time.Duration, now time.Time) int {
	n := 0
	for _, t := range restarts {
		if now.Sub(t) < window {
			n++
		}
	}
	return n
}
