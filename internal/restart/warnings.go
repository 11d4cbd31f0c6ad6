package restart

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// warnings remembers, per workload and Event reason, the Warning Events
// about a workload's state that were recorded, so that each is recorded
// once while that state lasts, not at every reconcile. A warning that goes
// and comes back is a new state, recorded again. Memory only: a new process
// warns once more, which is what Events are for.
type warnings struct {
	mu    sync.Mutex
	byKey map[catalog.WorkloadKey]map[string][]string
}

// fresh returns the notes of current that were not current at the last call
// for the workload and reason, and remembers current.
func (s *warnings) fresh(key catalog.WorkloadKey, reason string, current []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	byReason := s.byKey[key]
	var out []string
	for _, note := range current {
		if !slices.Contains(byReason[reason], note) {
			out = append(out, note)
		}
	}
	switch {
	case len(current) > 0 && byReason == nil:
		if s.byKey == nil {
			s.byKey = map[catalog.WorkloadKey]map[string][]string{}
		}
		s.byKey[key] = map[string][]string{reason: slices.Clone(current)}
	case len(current) > 0:
		byReason[reason] = slices.Clone(current)
	case byReason != nil:
		delete(byReason, reason)
		if len(byReason) == 0 {
			delete(s.byKey, key)
		}
	}
	return out
}

// forget drops what was remembered of a workload that is gone.
func (s *warnings) forget(key catalog.WorkloadKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byKey, key)
}

// warnOnce records a Warning Event on the workload for each note not
// recorded for it under reason while it was current, and logs it.
func (c *Controller) warnOnce(key catalog.WorkloadKey, w *catalog.WorkloadState, reason, action string, notes []string) {
	for _, note := range c.warned.fresh(key, reason, notes) {
		c.Log.Warn(note, "workload", key.String(), "reason", reason)
		c.event(w, corev1.EventTypeWarning, reason, action, "%s", note)
	}
}

// requiredGoneNotes say, for each required source deleted since the pods
// started, why nothing restarts.
func requiredGoneNotes(ids []catalog.SourceID) []string {
	notes := make([]string, len(ids))
	for i, id := range ids {
		notes[i] = id.String() + " was deleted; its pods need it, so nothing restarts (new pods could not start): " +
			"running pods keep the data they started with until it is created again"
	}
	return notes
}
