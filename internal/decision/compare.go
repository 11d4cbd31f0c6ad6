package decision

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
)

// Absent is the applied checksum of a source that did not exist when it was
// recorded; its later creation is a change only for optional references.
const Absent = ""

// Pending is recorded for a source whose data may have changed under pods of
// a new workload or template that were starting: written after the template
// was set, or, when that order is unknown, updated moments before the
// template was first seen. The workload restarts once the update's grace
// period ends.
// Being on the workload, it survives a crash of the controller.
const Pending = "pending"

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

// SourceLookup finds the current state of a source.
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
	// Unverified lists sources the plan newly records as absent. The cache of
	// sources may lag behind the cache of workloads, so the caller confirms
	// the absence with the API server before writing it.
	Unverified []catalog.SourceID
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

// templateRecord is the value of the applied-template-hash annotation: the
// digest of the pod template the checksums were recorded against and, when
// known, when that template was set:
//
//	"<hash>"              the order of writes is not known (also the format
//	                      of earlier releases)
//	"<hash>@<rv>@<uid>"   the template was set by the write at resourceVersion
//	                      rv (the workload's creation or a template change)
//	                      of the workload with that UID
//
// The UID keeps a record copied to another object (a backup restored into
// another cluster, whose resourceVersions mean nothing here) from being used.
type templateRecord struct{ hash, rv, uid string }

// RecordedTemplateHash returns the template hash of an applied-template-hash
// annotation value, whatever its form; empty when it cannot be read.
func RecordedTemplateHash(annotation string) string { return parseTemplateRecord(annotation).hash }

func parseTemplateRecord(s string) templateRecord {
	hash, rest, ordered := strings.Cut(s, "@")
	if !ordered {
		return templateRecord{hash: s}
	}
	rv, uid, ok := strings.Cut(rest, "@")
	if !ok || hash == "" || uid == "" || strings.Contains(uid, "@") {
		return templateRecord{} // unreadable: like no record at all
	}
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return templateRecord{}
	}
	return templateRecord{hash: hash, rv: rv, uid: uid}
}

func (r templateRecord) String() string {
	if r.rv == "" {
		return r.hash
	}
	return r.hash + "@" + r.rv + "@" + r.uid
}

// writtenBefore reports whether resourceVersion a is known to come before b.
// resourceVersions are etcd revisions, ordered across every resource kept
// in one etcd; anything unparsable is "not known".
func writtenBefore(a, b string) bool {
	c, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && c < 0
}

// Compare compares what the workload's pods were started with (the applied
// checksums) with what its sources hold now. It reads only caches and has no
// side effects, so the same inputs always give the same plan.
//
// With ordered, resourceVersions tell which came first, a source's last write
// or the write that set the workload's pod template: pods of a template are
// created after it was set, so a source written before that is in them
// (docs/design.md, "Ordering source updates and template changes").
//
// sums computes and compares checksums: the current version is keyed, and a
// checksum recorded with another key is re-baselined without a restart.
// life says whether the creation and the deletion of an optional source
// restart the workload.
func Compare(w *catalog.WorkloadState, sources SourceLookup, windows WindowLookup, now time.Time, ordered bool, sums checksum.Hasher,
	life config.SourceLifecycle) Plan {
	c, plan := newComparison(w, windows, now, ordered)
	c.life = life
	plan.Applied = make(map[string]string, len(w.References)+len(w.Patterns))
	for _, p := range w.Patterns {
		plan.Applied[PatternKey(w.Namespace, p)] = PatternMark
	}
	changed, current := c.each(&plan, sources, sums)
	c.schedule(&plan, changed, current)
	plan.Patch = plan.Restart || plan.TemplateRecord != w.AppliedTemplateHash || !w.HasApplied || !sameChecksums(c.applied, plan.Applied) || plan.Warning != ""
	return plan
}

// comparison is what Compare knows of the workload before it looks at any
// source: what was recorded, whether to trust it, and when the pod template
// was set.
type comparison struct {
	w       *catalog.WorkloadState
	windows WindowLookup
	now     time.Time
	applied map[string]string
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

func newComparison(w *catalog.WorkloadState, windows WindowLookup, now time.Time, ordered bool) (*comparison, Plan) {
	var plan Plan
	c := &comparison{w: w, windows: windows, now: now, applied: map[string]string{}}
	recorded := parseTemplateRecord(w.AppliedTemplateHash)
	trusted := w.HasApplied && recorded.hash != ""
	if w.HasApplied {
		if err := json.Unmarshal([]byte(w.Applied), &c.applied); err != nil {
			plan.Warning = fmt.Sprintf("applied checksums annotation is not a JSON object of strings (%v); recording current checksums without restart", err)
			c.applied = map[string]string{}
			trusted = false
		}
	}
	// A workload seen for the first time (or last written by a controller that
	// did not record its template) cannot tell us what its pods read; and a
	// changed template rolls the pods by itself. Either way the current data is
	// what the pods get, so it is recorded without a restart.
	c.recordOnly = !trusted || recorded.hash != w.TemplateHash

	// The template record to keep, and setAt: the write that set the
	// template, when known.
	record := recorded
	if c.recordOnly {
		record = templateRecord{hash: w.TemplateHash}
		if ordered && w.TemplateRV != "" && w.UID != "" {
			record.rv, record.uid = w.TemplateRV, string(w.UID)
		}
	}
	plan.TemplateRecord = record.String()
	if ordered && record.uid == string(w.UID) {
		c.setAt = record.rv
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
	if c.setAt == "" {
		// Order unknown: only an update inside its grace period can have
		// slipped under pods that were starting; a source created moments
		// ago had no older data for them to read.
		return c.windows.Updating(ref.ID, c.now)
	}
	if c.inPods(s) {
		return false
	}
	// Written after the template was set. A creation alone kept pods that
	// need it from starting until it existed; pods of an optional
	// reference, an update, or a write the watch has not delivered as an
	// event yet (no window) may have been missed.
	_, open := c.windows.Due(ref.ID, c.now)
	return !open || c.windows.Updating(ref.ID, c.now) || (ref.Optional && c.life.RestartOnCreate)
}

// each compares every source the workload reads, filling plan.Applied, and
// returns the changed sources and the current checksum of each existing one.
func (c *comparison) each(plan *Plan, sources SourceLookup, sums checksum.Hasher) ([]catalog.SourceID, map[catalog.SourceID]string) {
	var changed []catalog.SourceID
	current := make(map[catalog.SourceID]string, len(c.w.References))
	for _, ref := range c.w.References {
		id := ref.ID.String()
		old, known := c.applied[id]
		state, exists := sources.Source(ref.ID)
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
		if state.Baseline && old != Pending {
			c.baseline(plan, ref, state.Checksum(sums, ref.Keys), old, known, sums)
			continue
		}
		if !known && ref.Matched && c.patternRecorded(ref.ID) {
			// Matched by an entry in force when the checksums were
			// recorded, yet not recorded: it appeared since.
			old, known = Absent, true
		}
		checksum := state.Checksum(sums, ref.Keys)
		current[ref.ID] = checksum
		switch {
		case known && state.Matches(sums, old, ref.Keys):
			// Same data; an older checksum format is re-recorded silently.
			plan.Applied[id] = checksum
		case c.recordOnly && c.missed(ref, state):
			plan.Applied[id] = Pending
			changed = append(changed, ref.ID)
		case known && sums.Rebaseline(old):
			// Keyed with another key (rotated, or lost): what the pods read
			// cannot be compared, so the current data becomes the baseline.
			plan.Applied[id] = checksum
		case c.recordOnly || !known:
			plan.Applied[id] = checksum
		case old == Absent && (!ref.Optional || !c.life.RestartOnCreate):
			// The pods could not start without it, so they start with it
			// now; or creations restart nothing by configuration.
			plan.Applied[id] = checksum
		case c.inPods(state):
			// Written before the template its pods run was set: they read it
			// already. The record was taken from a cache that lagged.
			plan.Applied[id] = checksum
		default:
			plan.Applied[id] = old
			changed = append(changed, ref.ID)
		}
	}
	return changed, current
}

// baseline compares a source of lifecycle updatesOnly none of whose
// members was updated since its creation (members.Group): its data only
// fill a record the workload does not have yet (first sight), and never
// restart nor overwrite one, whatever else Compare would do: a member's
// creation is never a change. A record keyed with another key cannot be
// compared with anything, so it is filled again too. A pending record
// is not decided here: it says a restart is due.
func (c *comparison) baseline(plan *Plan, ref catalog.Reference, now, old string, known bool, sums checksum.Hasher) {
	if known && old != Absent && !sums.Rebaseline(old) {
		plan.Applied[ref.ID.String()] = old
		return
	}
	plan.Applied[ref.ID.String()] = now
}

// patternRecorded reports whether an entry of the workload's regex source
// lists that matches the source was in force when the checksums its pods
// started with were recorded.
func (c *comparison) patternRecorded(id catalog.SourceID) bool {
	if c.recordOnly || id.Namespace != c.w.Namespace {
		return false
	}
	for _, p := range c.w.Patterns {
		if p.Kind == id.Kind && p.Re.MatchString(id.Name) && c.applied[PatternKey(c.w.Namespace, p)] == PatternMark {
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
	deleted := known && old != Absent && !c.recordOnly
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
		plan.Applied[id] = Absent
		if !known || old != Absent {
			plan.Unverified = append(plan.Unverified, ref.ID)
		}
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
		if until, open := c.windows.Due(id, c.now); open {
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
		plan.NotRolled = c.w.NotRolled
		for _, id := range append(ready, waiting...) {
			now, exists := current[id]
			plan.Applied[id.String()] = now // Absent for a deleted one
			if !exists {
				plan.Unverified = append(plan.Unverified, id)
			}
		}
		sort.Slice(plan.Changed, func(i, j int) bool { return plan.Changed[i].String() < plan.Changed[j].String() })
	} else if len(waiting) > 0 {
		plan.Wait = earliestDue.Sub(c.now)
	}
	// A matched source that is gone leaves the record once nothing waits
	// for its deletion to restart the workload; its absence is confirmed
	// first, as that of a source recorded absent.
	for _, id := range c.gone {
		if plan.Restart || !slices.Contains(changed, id) {
			delete(plan.Applied, id.String())
			if !slices.Contains(plan.Unverified, id) {
				plan.Unverified = append(plan.Unverified, id)
			}
		}
	}
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
