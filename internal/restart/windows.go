package restart

import (
	"sort"
	"sync"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// Windows tracks, per source, the grace period that its first unsettled data
// change opened. Further changes inside a window are merged into it rather
// than extending it, so a source that changes without pause still restarts its
// workloads once per grace period instead of never.
//
// Nothing here needs to survive a crash: the applied checksums on the workload
// still hold the old values, so a new instance sees the difference and acts.
type Windows struct {
	grace time.Duration

	mu    sync.Mutex
	start map[catalog.SourceID]time.Time
	// updated marks windows holding a change of data that existed before,
	// which pods may have read; a window opened by a creation holds none.
	updated map[catalog.SourceID]bool
	// keys holds, per window, the keys its updates touched; a window with an
	// entry of nil saw an update whose keys are unknown (a large source).
	// Only for telling the workload's owners which keys changed.
	keys map[catalog.SourceID]map[string]bool
}

// NewWindows returns a tracker for the given grace period.
func NewWindows(grace time.Duration) *Windows {
	return &Windows{grace: grace, start: map[catalog.SourceID]time.Time{}, updated: map[catalog.SourceID]bool{},
		keys: map[catalog.SourceID]map[string]bool{}}
}

// Observe records a change of the source seen at now (a data update, or a
// creation when created is true) that touched keys (nil: unknown), and
// returns when its window ends and whether the change was merged into an
// open window.
func (w *Windows) Observe(id catalog.SourceID, now time.Time, created bool, keys []string) (due time.Time, merged bool) {
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

// addKeys merges a change's keys into the window's. A creation touches no
// key that pods read before (a creation merged with later updates leaves
// their keys known); an update of unknown keys makes the window's unknown.
func (w *Windows) addKeys(id catalog.SourceID, created bool, keys []string) {
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

// ChangedKeys returns the keys the changes in the source's latest window
// touched, sorted; known is false when some change's keys are unknown or no
// window is kept (the controller restarted since).
func (w *Windows) ChangedKeys(id catalog.SourceID) (keys []string, known bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set, ok := w.keys[id]
	if !ok || set == nil {
		return nil, false
	}
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, true
}

// Updating reports whether the source's open window holds an update of data
// that existed before it.
func (w *Windows) Updating(id catalog.SourceID, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, open := w.start[id]
	return open && now.Before(start.Add(w.grace)) && w.updated[id]
}

// Due returns when the source's open window ends; ok is false when no window
// is open, in which case any difference is due at once.
func (w *Windows) Due(id catalog.SourceID, now time.Time) (due time.Time, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, open := w.start[id]
	if !open || !now.Before(start.Add(w.grace)) {
		return time.Time{}, false
	}
	return start.Add(w.grace), true
}

// Opened returns when the source's latest window opened, for latency metrics.
func (w *Windows) Opened(id catalog.SourceID) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, ok := w.start[id]
	return start, ok
}

// Sweep forgets windows that ended before now and returns how many are open.
// A window is kept for one extra grace period after it ends so the restart it
// causes can still be timed against it.
func (w *Windows) Sweep(now time.Time) (open int) {
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
