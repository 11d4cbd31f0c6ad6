package decision

import (
	"maps"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
)

// PatternMark is the applied value of a pattern's entry (PatternKey).
const PatternMark = "pattern"

// PatternKey is the applied-checksums key that records a regex source list
// entry in force when the checksums were recorded: "KIND/NAMESPACE/~ENTRY"
// ("~" is in no object name, so it names no source). With it, a source the
// entry matches that has no checksum of its own appeared since: a creation,
// which restarts the workload like that of a listed source; without it (a
// new or edited entry) the source is recorded without a restart, as a name
// added to a list is.
func PatternKey(namespace string, p config.ListPattern) string {
	return p.Kind + "/" + namespace + "/~" + p.Entry
}

// graceOf is the open grace period of a source's change at now: ok is
// false when none is open, in which case any difference is due at once.
func graceOf(grace map[catalog.SourceID]Grace, id catalog.SourceID, now time.Time) (Grace, bool) {
	g, ok := grace[id]
	if !ok || !now.Before(g.Ends) {
		return Grace{}, false
	}
	return g, true
}

// Plan is the outcome of comparing a workload with the current sources.
type Plan struct {
	// Applied is the checksums annotation to hold after the patch.
	Applied map[string]string
	// TemplateRecord is the applied-template-hash annotation to hold after
	// the patch (see templateRecord).
	TemplateRecord string
	// Patch is true when the workload must be written at all.
	Patch bool
	// Restart is true when the pod template gets a new restart timestamp.
	Restart bool
	// Changed lists the sources whose change causes the restart.
	Changed []catalog.SourceID
	// NotRolled, for a restart, says why the new template replaces no pods
	// now (the workload's NotRolled): its running pods keep the old data.
	NotRolled string
	// Wait is how long until a change that is still in its grace period is due;
	// zero when none is waiting.
	Wait time.Duration
	// Warning describes hostile state found on the workload, for the log.
	Warning string
	// RequiredGone lists required sources deleted since the pods started:
	// never restarted for (new pods could not start), reported instead.
	RequiredGone []catalog.SourceID
	// Extra are workload annotations fleet safety adds to the patch (the
	// rollout record; nil removes a hold). Compare never sets them.
	Extra map[string]interface{}
	// Strategy is how a restart is carried out: the workload kind's, or the
	// one its restart-strategy annotation picks (Rules.Decide sets it).
	Strategy config.Strategy
}

// setExtra adds an annotation to the patch (nil removes it) and makes the
// plan patch.
func (p *Plan) setExtra(key string, value interface{}) {
	if p.Extra == nil {
		p.Extra = map[string]interface{}{}
	}
	p.Extra[key] = value
	p.Patch = true
}

// writtenBefore reports whether resourceVersion a is known to come before b.
// resourceVersions are etcd revisions, ordered across every resource kept
// in one etcd; anything unparsable is "not known".
func writtenBefore(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c < 0
}

// Compare compares what the workload's pods were started with (the applied
// checksums) with what its sources hold now, and the grace periods of their
// changes at now. It reads only its arguments, so the same inputs always
// give the same plan.
//
// With Ordered, resourceVersions tell which came first, a source's last write
// or the write that set the workload's pod template: pods of a template are
// created after it was set, so a source written before that is in them
// (docs/design.md, "Ordering source updates and template changes").
//
// Checksums are keyed with Sums: a checksum recorded with another key is
// re-baselined without a restart. Lifecycle says whether the creation and
// the deletion of an optional source restart the workload.
func (r Rules) Compare(w Workload, sources Sources, grace map[catalog.SourceID]Grace, now time.Time) Plan {
	c, plan := r.newComparison(w, grace, now)
	ws := w.State
	plan.Applied = make(map[string]string, len(ws.References)+len(ws.Patterns))
	for _, p := range ws.Patterns {
		plan.Applied[PatternKey(ws.Namespace, p)] = PatternMark
	}
	changed, current := c.each(&plan, sources)
	c.schedule(&plan, changed, current)
	plan.Patch = plan.Restart || plan.TemplateRecord != ws.AppliedTemplateHash || !ws.HasApplied || !maps.Equal(c.applied, plan.Applied) || plan.Warning != ""
	return plan
}

// comparison is what Compare knows of the workload before it looks at any
// source: what was recorded, whether to trust it, and when the pod template
// was set.
type comparison struct {
	w       *catalog.WorkloadState
	grace   map[catalog.SourceID]Grace
	now     time.Time
	applied map[string]string
	sums    checksum.Hasher
	// recordOnly: the recorded checksums cannot tell what the pods read, or
	// the template changed since; the current data is recorded.
	recordOnly bool
	// setAt is the resourceVersion of the write that set the template,
	// when known: every pod of the template is created after it.
	setAt string
	// life: whether creations and deletions of optional sources restart.
	life config.SourceLifecycle
	// gone are the matched sources (Reference.Matched) that do not exist:
	// their entries leave the record.
	gone []catalog.SourceID
}

func (r Rules) newComparison(w Workload, grace map[catalog.SourceID]Grace, now time.Time) (*comparison, Plan) {
	var plan Plan
	ws := w.State
	c := &comparison{w: ws, grace: grace, now: now, applied: w.Applied, sums: r.Sums, life: r.Lifecycle}
	recorded := w.Template
	trusted := ws.HasApplied && recorded.Hash != ""
	if w.AppliedErr != nil {
		plan.Warning = w.AppliedErr.Error() + "; recording current checksums without restart"
		trusted = false
	}
	if c.applied == nil {
		c.applied = map[string]string{}
	}
	// A workload seen for the first time (or last written by a controller that
	// did not record its template) cannot tell us what its pods read; and a
	// changed template rolls the pods by itself. Either way the current data is
	// what the pods get, so it is recorded without a restart.
	c.recordOnly = !trusted || recorded.Hash != ws.TemplateHash

	// The template record to keep, and setAt: the write that set the
	// template, when known.
	keep := recorded
	if c.recordOnly {
		keep = record.Template{Hash: ws.TemplateHash}
		if r.Ordered && ws.TemplateRV != "" && ws.UID != "" {
			keep.RV, keep.UID = ws.TemplateRV, string(ws.UID)
		}
	}
	plan.TemplateRecord = keep.String()
	if r.Ordered && keep.UID == string(ws.UID) {
		c.setAt = keep.RV
	}
	return c, plan
}

// inPods: the source's last write (its resourceVersion bounds that of its
// last data change) came before the template was set, so the template's
// pods, all created after, read this data.
func (c *comparison) inPods(s *catalog.SourceState) bool {
	return c.setAt != "" && writtenBefore(s.ResourceVersion, c.setAt)
}

// missed: pods of a template just set may have started before the source's
// current data was written.
func (c *comparison) missed(ref catalog.Reference, s *catalog.SourceState) bool {
	g, open := graceOf(c.grace, ref.ID, c.now)
	if c.setAt == "" {
		// Order unknown: only an update inside its grace period can have
		// slipped under pods that were starting; a source created moments
		// ago had no older data for them to read.
		return open && g.Updating
	}
	if c.inPods(s) {
		return false
	}
	// Written after the template was set. A creation alone kept pods that
	// need it from starting until it existed; pods of an optional
	// reference, an update, or a write the watch has not delivered as an
	// event yet (no grace period) may have been missed.
	return !open || g.Updating || (ref.Optional && c.life.RestartOnCreate)
}

// each compares every source the workload reads, filling plan.Applied, and
// returns the changed sources and the current checksum of each existing one.
func (c *comparison) each(plan *Plan, sources Sources) ([]catalog.SourceID, map[catalog.SourceID]string) {
	var changed []catalog.SourceID
	current := make(map[catalog.SourceID]string, len(c.w.References))
	for _, ref := range c.w.References {
		id := ref.ID.String()
		old, known := c.applied[id]
		state, exists := sources[ref.ID]
		if !exists && c.life.Unknown(ref.ID.Kind) {
			// Maybe there, unselected, or a source whose members come and
			// go with pods (lifecycle updatesOnly): what the pods started
			// with is kept, so that the source, selected again with other
			// data, is a change; never recorded absent, so its appearance
			// is not one.
			if known {
				plan.Applied[id] = old
			}
			continue
		}
		if !exists {
			changed = c.absent(plan, ref, old, known, changed)
			continue
		}
		value, sum, change := c.existing(ref, old, known, state)
		plan.Applied[id] = value
		if sum != "" {
			current[ref.ID] = sum
		}
		if change {
			changed = append(changed, ref.ID)
		}
	}
	return changed, current
}

// existing compares one source the workload reads that exists: what to
// record for it, its current checksum (none for a baseline), and whether its
// data changed under the pods (a restart is due, once its grace period
// ends). old is the applied checksum, if known. The waves classify the
// readers of a change by the same comparison (Rules.ReaderOf).
func (c *comparison) existing(ref catalog.Reference, old string, known bool, state *catalog.SourceState) (value, sum string, changed bool) {
	sums := c.sums
	if state.Baseline && old != record.Pending {
		return c.baseline(state.Checksum(sums, ref.Keys), old, known), "", false
	}
	if !known && ref.Matched && !c.recordOnly && PatternRecorded(c.w, c.applied, ref.ID) {
		// Matched by an entry in force when the checksums were
		// recorded (not afresh), yet not recorded: it appeared since.
		old, known = record.Absent, true
	}
	sum = state.Checksum(sums, ref.Keys)
	switch {
	case known && state.Matches(sums, old, ref.Keys):
		// Same data; an older checksum format is re-recorded silently.
		return sum, sum, false
	case c.recordOnly && c.missed(ref, state):
		return record.Pending, sum, true
	case known && sums.Rebaseline(old):
		// Keyed with another key (rotated, or lost): what the pods read
		// cannot be compared, so the current data becomes the baseline.
		return sum, sum, false
	case c.recordOnly || !known:
		return sum, sum, false
	case old == record.Absent && (!ref.Optional || !c.life.RestartOnCreate):
		// The pods could not start without it, so they start with it
		// now; or creations restart nothing by configuration.
		return sum, sum, false
	case c.inPods(state):
		// Written before the template its pods run was set: they read it
		// already. The record was taken from a cache that lagged.
		return sum, sum, false
	}
	return old, sum, true
}

// baseline compares a source of lifecycle updatesOnly none of whose
// members was updated since its creation (members.Group): its data only
// fill a record the workload does not have yet (first sight), and never
// restart nor overwrite one, whatever else Compare would do: a member's
// creation is never a change. A record keyed with another key cannot be
// compared with anything, so it is filled again too. A pending record
// is not decided here: it says a restart is due.
func (c *comparison) baseline(now, old string, known bool) string {
	if known && old != record.Absent && !c.sums.Rebaseline(old) {
		return old
	}
	return now
}

// PatternRecorded reports whether an entry of the workload's regex source
// lists that matches the source was in force when the applied checksums
// its pods started with were recorded.
func PatternRecorded(w *catalog.WorkloadState, applied map[string]string, id catalog.SourceID) bool {
	if id.Namespace != w.Namespace {
		return false
	}
	for _, p := range w.Patterns {
		if p.Kind == id.Kind && p.Re.MatchString(id.Name) && applied[PatternKey(w.Namespace, p)] == PatternMark {
			return true
		}
	}
	return false
}

// absent compares a source that does not exist (deleted, or never
// created) and returns changed, with the source added when its deletion
// restarts the workload: an optional source deleted since the pods started,
// with RestartOnDelete; the next pods start without it, as they would have
// had it been absent all along. A required one never restarts (the new pods
// could not start) and is reported in RequiredGone. Otherwise what the pods
// started with is kept, so that a re-creation with other data restarts
// them. Pods of a new template start without it, though, so then it is
// recorded absent. A matched source (Reference.Matched) leaves the record
// instead of being recorded absent: absent, it matches nothing.
func (c *comparison) absent(plan *Plan, ref catalog.Reference, old string, known bool, changed []catalog.SourceID) []catalog.SourceID {
	id := ref.ID.String()
	deleted := known && old != record.Absent && !c.recordOnly
	switch {
	case deleted && ref.Optional && c.life.RestartOnDelete:
		plan.Applied[id] = old // until the restart (schedule)
		changed = append(changed, ref.ID)
	case deleted && !ref.Optional:
		plan.Applied[id] = old
		plan.RequiredGone = append(plan.RequiredGone, ref.ID)
	case known && !c.recordOnly:
		plan.Applied[id] = old
	default:
		plan.Applied[id] = record.Absent
	}
	if ref.Matched {
		c.gone = append(c.gone, ref.ID)
	}
	return changed
}

// schedule splits the changed sources into those whose grace period is over
// and those still waiting; the latter ride along with a restart that happens
// anyway, or the plan waits for the first of them.
func (c *comparison) schedule(plan *Plan, changed []catalog.SourceID, current map[catalog.SourceID]string) {
	var ready, waiting []catalog.SourceID
	var earliestDue time.Time
	for _, id := range changed {
		if g, open := graceOf(c.grace, id, c.now); open {
			waiting = append(waiting, id)
			earliestDue = earliest(earliestDue, g.Ends)
			continue
		}
		ready = append(ready, id)
	}
	if len(ready) > 0 {
		plan.Restart = true
		plan.Changed = ready
		plan.NotRolled = c.w.NotRolled
		for _, id := range append(ready, waiting...) {
			plan.Applied[id.String()] = current[id] // Absent for a deleted one
		}
		sort.Slice(plan.Changed, func(i, j int) bool { return plan.Changed[i].String() < plan.Changed[j].String() })
	} else if len(waiting) > 0 {
		plan.Wait = earliestDue.Sub(c.now)
	}
	// A matched source that is gone leaves the record once nothing waits
	// for its deletion to restart the workload.
	for _, id := range c.gone {
		if plan.Restart || !slices.Contains(changed, id) {
			delete(plan.Applied, id.String())
		}
	}
}
