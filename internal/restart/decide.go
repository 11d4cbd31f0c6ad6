// Package restart decides, per workload, whether the sources its pods read have
// changed since they started, and patches the workload's pod template so that
// its own controller rolls the pods.
package restart

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// absent is the applied checksum of a source that did not exist when it was
// recorded; its later creation is a change only for optional references.
const absent = ""

// pending is recorded for a source whose data was updated moments before a
// workload (or its new template) was first seen: pods started before that
// update read the old data, so the workload restarts once the update's grace
// period ends.
// Being on the workload, it survives a crash of the controller.
const pending = "pending"

// SourceLookup finds the current state of a config.
type SourceLookup interface {
	Source(id catalog.SourceID) (*catalog.SourceState, bool)
}

// WindowLookup tells whether a source's change is still inside its grace period.
type WindowLookup interface {
	Due(id catalog.SourceID, now time.Time) (time.Time, bool)
	// Updating reports an open grace period holding an update of data that
	// existed before (not only the source's creation).
	Updating(id catalog.SourceID, now time.Time) bool
}

// Plan is the outcome of comparing a workload with the current sources.
type Plan struct {
	// Applied is the checksums annotation to hold after the patch.
	Applied map[string]string
	// Patch is true when the workload must be written at all.
	Patch bool
	// Restart is true when the pod template gets a new restart timestamp.
	Restart bool
	// Changed lists the sources whose change causes the restart.
	Changed []catalog.SourceID
	// Wait is how long until a change that is still in its grace period is due;
	// zero when none is waiting.
	Wait time.Duration
	// Warning describes hostile state found on the workload, for the log.
	Warning string
	// Unverified lists sources the plan newly records as absent. The cache of
	// sources may lag behind the cache of workloads, so the caller confirms
	// the absence with the API server before writing it.
	Unverified []catalog.SourceID
}

// Decide compares what the workload's pods were started with (the applied
// checksums) with what its sources hold now. It reads only caches and has no
// side effects, so the same inputs always give the same plan.
func Decide(w *catalog.WorkloadState, sources SourceLookup, windows WindowLookup, now time.Time) Plan {
	var plan Plan
	applied := map[string]string{}
	trusted := w.HasApplied && w.AppliedTemplateHash != ""
	if w.HasApplied {
		if err := json.Unmarshal([]byte(w.Applied), &applied); err != nil {
			plan.Warning = fmt.Sprintf("applied checksums annotation is not a JSON object of strings (%v); recording current checksums without restart", err)
			applied = map[string]string{}
			trusted = false
		}
	}
	// A workload seen for the first time (or last written by a controller that
	// did not record its template) cannot tell us what its pods read; and a
	// changed template rolls the pods by itself. Either way the current data is
	// what the pods get, so it is recorded without a restart.
	recordOnly := !trusted || w.AppliedTemplateHash != w.TemplateHash

	plan.Applied = make(map[string]string, len(w.References))
	var earliestDue time.Time
	var changed, waiting []catalog.SourceID
	current := make(map[catalog.SourceID]string, len(w.References))
	for _, ref := range w.References {
		id := ref.ID.String()
		old, known := applied[id]
		state, exists := sources.Source(ref.ID)
		if !exists {
			// A deleted source restarts nothing; keeping what the pods started
			// with lets a re-creation with other data restart them. Pods of a
			// new template start without it, though, so then it is absent.
			if known && !recordOnly {
				plan.Applied[id] = old
			} else {
				plan.Applied[id] = absent
				if !known || old != absent {
					plan.Unverified = append(plan.Unverified, ref.ID)
				}
			}
			continue
		}
		checksum := state.Checksum(ref.Keys)
		current[ref.ID] = checksum
		// Only an update can have slipped under pods that were starting: a
		// source created moments ago had no older data for them to read.
		changing := windows.Updating(ref.ID, now)
		switch {
		case recordOnly && changing && !(known && old == checksum):
			plan.Applied[id] = pending
			changed = append(changed, ref.ID)
		case recordOnly || !known || old == checksum:
			plan.Applied[id] = checksum
		case old == absent && !ref.Optional:
			// The pods could not start without it, so they start with it now.
			plan.Applied[id] = checksum
		default:
			plan.Applied[id] = old
			changed = append(changed, ref.ID)
		}
	}
	// Split changed sources into those whose grace period is over and those
	// still waiting; the latter ride along with a restart that happens anyway.
	var ready []catalog.SourceID
	for _, id := range changed {
		if until, open := windows.Due(id, now); open {
			waiting = append(waiting, id)
			if earliestDue.IsZero() || until.Before(earliestDue) {
				earliestDue = until
			}
			continue
		}
		ready = append(ready, id)
	}
	if len(ready) > 0 {
		plan.Restart = true
		plan.Changed = ready
		for _, id := range append(ready, waiting...) {
			plan.Applied[id.String()] = current[id]
		}
		sort.Slice(plan.Changed, func(i, j int) bool { return plan.Changed[i].String() < plan.Changed[j].String() })
	} else if len(waiting) > 0 {
		plan.Wait = earliestDue.Sub(now)
	}
	plan.Patch = plan.Restart || w.AppliedTemplateHash != w.TemplateHash || !w.HasApplied || !sameChecksums(applied, plan.Applied) || plan.Warning != ""
	return plan
}

func sameChecksums(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}
