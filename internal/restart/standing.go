package restart

import (
	"sync"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
)

// standing remembers, per workload, why its last decision let its due
// restart not go: a hold, or a wait for its restart window or minimum
// interval. The gauges of held and waiting restarts count it, and a wait
// that begins is said once. Memory only: a new process rebuilds it as it
// decides every workload at start-up.
type standing struct {
	mu      sync.Mutex
	held    map[catalog.WorkloadKey]string
	waiting map[catalog.WorkloadKey]string
	// The counts by reason, kept as entries change: a fleet of thousands
	// waiting for one night window is not counted again at each decision.
	heldBy, waitingBy map[string]int
}

// waitReason is the metric's reason of a verdict that makes a restart wait
// without a hold, or "".
func waitReason(v decision.Verdict) string {
	switch {
	case v.Action != decision.Wait:
		return ""
	case v.Gate == decision.GateWindow:
		return "window"
	case v.Gate == decision.GateMinInterval:
		return "min-interval"
	}
	return ""
}

// set notes the workload's standing after a decision: held for a reason
// (kind, "" when not), waiting for a reason ("" when not). It publishes the
// counts by reason while it holds the lock: workers decide at once, and
// counts published after the lock could land out of order and leave a
// gauge stale until some workload is decided again, which for a fleet of
// held workloads is never. It returns whether the wait began now.
func (s *standing) set(key catalog.WorkloadKey, kind record.HoldKind, waiting string, publish func(held, waiting map[string]int)) (began bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held, s.waiting = map[catalog.WorkloadKey]string{}, map[catalog.WorkloadKey]string{}
		s.heldBy, s.waitingBy = map[string]int{}, map[string]int{}
	}
	note(s.held, s.heldBy, key, string(kind))
	began = waiting != "" && s.waiting[key] != waiting
	note(s.waiting, s.waitingBy, key, waiting)
	publish(s.heldBy, s.waitingBy)
	return began
}

// note sets the workload's reason ("" none) in byKey, keeping the counts.
func note(byKey map[catalog.WorkloadKey]string, counts map[string]int, key catalog.WorkloadKey, reason string) {
	if old, ok := byKey[key]; ok {
		counts[old]--
		delete(byKey, key)
	}
	if reason != "" {
		byKey[key] = reason
		counts[reason]++
	}
}
