package restart

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/decision"
)

// gracePeriods tracks, per source, the grace period that its first unsettled
// data change opened. Further changes inside a grace period are merged into
// it rather than extending it, so a source that changes without pause still
// restarts its workloads once per grace period instead of never.
//
// Nothing here needs to survive a crash: the applied checksums on the workload
// still hold the old values, so a new instance sees the difference and acts.
type gracePeriods struct {
	grace time.Duration

	mu    sync.Mutex
	start map[catalog.SourceID]time.Time
	// updated marks grace periods holding a change of data that existed before,
	// which pods may have read; a grace period opened by a creation holds none.
	updated map[catalog.SourceID]bool
	// keys holds, per grace period, the keys its updates touched; a grace period with an
	// entry of nil saw an update whose keys are unknown (a large source).
	// Only for telling the workload's owners which keys changed.
	keys map[catalog.SourceID]map[string]bool
}

// newGracePeriods returns a tracker for the given grace period.
func newGracePeriods(grace time.Duration) *gracePeriods {
	return &gracePeriods{grace: grace, start: map[catalog.SourceID]time.Time{}, updated: map[catalog.SourceID]bool{},
		keys: map[catalog.SourceID]map[string]bool{}}
}

// Observe records a change of the source seen at now (a data update, or a
// creation when created is true) that touched keys (nil: unknown), and
// returns when its grace period ends and whether the change was merged into an
// open grace period.
func (w *gracePeriods) Observe(id catalog.SourceID, now time.Time, created bool, keys []string) (due time.Time, merged bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if start, open := w.start[id]; open && now.Before(start.Add(w.grace)) {
		w.updated[id] = w.updated[id] || !created
		w.addKeys(id, created, keys)
		return start.Add(w.grace), true
	}
	w.start[id] = now
	w.updated[id] = !created
	w.keys[id] = map[string]bool{}
	w.addKeys(id, created, keys)
	return now.Add(w.grace), false
}

// addKeys merges a change's keys into the grace period's. A creation touches no
// key that pods read before (a creation merged with later updates leaves
// their keys known); an update of unknown keys makes the grace period's unknown.
func (w *gracePeriods) addKeys(id catalog.SourceID, created bool, keys []string) {
	if created {
		return
	}
	if keys == nil || w.keys[id] == nil {
		w.keys[id] = nil
		return
	}
	for _, k := range keys {
		w.keys[id][k] = true
	}
}

// ChangedKeys returns the keys the changes in the source's latest grace period
// touched, sorted; known is false when some change's keys are unknown or no
// grace period is kept (the controller restarted since).
func (w *gracePeriods) ChangedKeys(id catalog.SourceID) (keys []string, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set, ok := w.keys[id]
	if !ok || set == nil {
		return nil, false
	}
	return slices.Sorted(maps.Keys(set)), true
}

// Of returns the grace periods open at now of the sources refs read, for a
// decision's snapshot; nil when none is.
func (w *gracePeriods) Of(refs []catalog.Reference, now time.Time) map[catalog.SourceID]decision.Grace {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out map[catalog.SourceID]decision.Grace
	for _, ref := range refs {
		start, open := w.start[ref.ID]
		if !open || !now.Before(start.Add(w.grace)) {
			continue
		}
		if out == nil {
			out = map[catalog.SourceID]decision.Grace{}
		}
		out[ref.ID] = decision.Grace{Ends: start.Add(w.grace), Updating: w.updated[ref.ID]}
	}
	return out
}

// Opened returns when the source's latest grace period opened, for latency metrics.
func (w *gracePeriods) Opened(id catalog.SourceID) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, ok := w.start[id]
	return start, ok
}

// Sweep forgets grace periods that ended before now and returns how many are open.
// A grace period is kept for one extra grace period after it ends so the restart it
// causes can still be timed against it.
func (w *gracePeriods) Sweep(now time.Time) (open int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, start := range w.start {
		end := start.Add(w.grace)
		if !now.Before(end.Add(w.grace + time.Minute)) {
			delete(w.start, id)
			delete(w.updated, id)
			delete(w.keys, id)
			continue
		}
		if now.Before(end) {
			open++
		}
	}
	return open
}
