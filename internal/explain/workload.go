package explain

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/refs"
)

// Source statuses: what a workload's pods started with, compared with now.
const (
	StatusUpToDate    = "up-to-date"   // the data the pods read is what they started with
	StatusChanged     = "changed"      // the data the pods read changed since they started
	StatusPending     = "pending"      // recorded "pending": updated just before the pods started
	StatusAppeared    = "appeared"     // did not exist when the pods started, exists now
	StatusAbsent      = "absent"       // does not exist, and did not when recorded
	StatusDeleted     = "deleted"      // existed when the pods started, deleted since
	StatusNotRecorded = "not-recorded" // no applied checksum for it yet
	StatusUnreadable  = "unreadable"   // could not be read with the caller's credentials
	StatusUnknown     = "unknown"      // keyed with a checksum key the caller cannot read
	StatusUnselected  = "unselected"   // its labels do not match the config's sourceSelector
	StatusNoMembers   = "no-members"   // lifecycle updatesOnly: no object of its kind names it now
	StatusBaseline    = "baseline"     // lifecycle updatesOnly: none of its members was updated since created
)

// Actions: what the controller would do with a workload now.
const (
	ActionNothing = "nothing"
	ActionRecord  = "record"  // write the checksums annotation, no restart
	ActionRestart = "restart" // a new restart timestamp in the pod template
	ActionUnknown = "unknown" // a source could not be read
)

// SourceFetcher returns the reduced state of a source, or nil and no error
// when it does not exist.
type SourceFetcher func(kind config.SourceKind, namespace, name string) (*catalog.SourceState, error)

// WorkloadReport explains one workload.
type WorkloadReport struct {
	// Workload is kubectl's name for it, e.g. "deployment.apps/web".
	Workload  string `json:"workload"`
	Namespace string `json:"namespace"`
	Resource  string `json:"resource"` // the configured resource, e.g. "deployments.v1.apps"
	OptedIn   bool   `json:"optedIn"`
	// Watched is false when the controller does not see it at all.
	Watched    bool   `json:"watched"`
	NotWatched string `json:"notWatched,omitempty"`
	// Problem says why its references cannot be read, e.g. no pod template.
	Problem string `json:"problem,omitempty"`
	// ListProblems are entries of its source lists that are skipped (not a
	// regular expression), as the controller's Warning Events say.
	ListProblems []string `json:"listProblems,omitempty"`
	// Recorded is true when the workload has an applied-checksums annotation.
	Recorded bool `json:"recorded"`
	// TemplateRecorded is true when the checksums were recorded against the
	// current pod template.
	TemplateRecorded bool `json:"templateRecorded"`
	// RecordError says why the applied-checksums annotation cannot be read.
	RecordError string           `json:"recordError,omitempty"`
	Sources     []WorkloadSource `json:"sources"`
	// Hold is the hold the controller placed on it, if any, and what ends it.
	Hold *HoldReport `json:"hold,omitempty"`
	// Rollout is the record of its last restart, if any.
	Rollout  *RolloutReport `json:"rollout,omitempty"`
	Decision Decision       `json:"decision"`
}

// WorkloadSource is one source a workload reads.
type WorkloadSource struct {
	Source   string   `json:"source"` // "configmap/NS/NAME", as in the annotation
	Kind     string   `json:"kind"`
	Name     string   `json:"name"`
	Keys     []string `json:"keys,omitempty"`
	AllKeys  bool     `json:"allKeys"`
	Optional bool     `json:"optional"`
	Exists   bool     `json:"exists"`
	// Applied is the checksum its pods started with: "" when it did not exist,
	// "pending" when a restart is due; absent when not recorded.
	Applied *string `json:"applied,omitempty"`
	// Current is the checksum of the data it reads now; empty when absent.
	Current string `json:"current,omitempty"`
	Status  string `json:"status"`
	Note    string `json:"note"`
	Error   string `json:"error,omitempty"`
	Uses    []Use  `json:"uses"`
	// same: the applied checksum matches the data now, in its version;
	// incomparable: it is keyed and the key could not be read.
	same, incomparable bool
}

// Decision is what the controller would do now, and why.
type Decision struct {
	Action  string   `json:"action"`
	Reasons []string `json:"reasons"`
	// Changed lists the sources whose change causes the restart.
	Changed []string `json:"changed,omitempty"`
	// Record is the checksums annotation the controller would write.
	Record map[string]string `json:"record,omitempty"`
	// Strategy, for a restart, is how it would be carried out.
	Strategy string `json:"strategy,omitempty"`
	// Gate, for a hold, a wait or a queue, is the gate of the decision
	// that stops the restart (decision.Gate): "window", "breaker", ...
	Gate string `json:"gate,omitempty"`
	// Until is when a wait for a restart window or a minimum interval ends,
	// which the objects and the clock tell; other stops end on an event,
	// or when only the controller's memory could tell.
	Until *time.Time `json:"until,omitempty"`
}

// graceNote is what explain can honestly say about grace periods, which live
// in the controller's memory only.
const graceNote = "it would restart once the grace period of that change ends; explain cannot see the controller's " +
	"grace periods: a change younger than the grace period is waiting, an older one is due now"

// ExplainWorkload explains a workload object of the given configured kind,
// reading its sources through fetch, with the workloads of its namespace
// listed by fleet, so that the decision sees the waves of the changes it
// would deliver as the controller does (nil: the workload alone). The
// workload is reduced exactly as the controller's cache reduces it, and the
// decision is the decision package's on the current data, with no grace
// period known to be open.
func (c *Config) ExplainWorkload(kind config.WorkloadKind, obj *unstructured.Unstructured, fetch SourceFetcher, fleet FleetLister, now time.Time) *WorkloadReport {
	w := catalog.ReduceWorkloadObject(obj, kind, c.Config)
	return c.explain(kind, w, obj, fetch, c.listedPacing(kind, w, fleet), now)
}

// ExplainListed explains a workload status listed, from its reduced state
// alone, paced over the fleet it was listed with: the decision is
// ExplainWorkload's. Status keeps no objects (at 10,000 workloads they
// would be most of its memory), so the places of the references are not
// named (Sources[].Uses), and, listed with the workload selector, the
// workload's labels match it.
func (c *Config) ExplainListed(kind config.WorkloadKind, w *catalog.WorkloadState, fetch SourceFetcher, pacer *Pacer, now time.Time) *WorkloadReport {
	return c.explain(kind, w, nil, fetch, func(snap decision.Snapshot, deliver []catalog.SourceID) decision.Pacing {
		return pacer.Facts(snap.Key, snap.Workload.State.References, deliver, snap.Sources, snap.Now)
	}, now)
}

// explain explains the reduced workload w, with its object when kept (nil:
// listed by status), its sources read through fetch and a due restart
// paced by pace.
func (c *Config) explain(kind config.WorkloadKind, w *catalog.WorkloadState, obj *unstructured.Unstructured, fetch SourceFetcher, pace pacingFunc, now time.Time) *WorkloadReport {
	// Regex source lists are matched against the sources that exist now, as
	// the controller matches them against its cache (Catalog.Workload).
	w, unlisted := c.withMatches(w)
	wl := decision.ReadWorkload(w)
	r := &WorkloadReport{
		Workload:         kubectlName(w),
		Namespace:        w.Namespace,
		Resource:         resourceString(kind),
		OptedIn:          w.OptedIn,
		Problem:          w.Problem,
		ListProblems:     w.ListProblems,
		Recorded:         w.HasApplied,
		TemplateRecorded: w.HasApplied && wl.Template.Hash != "" && wl.Template.Hash == w.TemplateHash,
		Sources:          []WorkloadSource{},
	}
	var usesOf map[catalog.SourceID][]Use
	if obj != nil {
		r.NotWatched = c.notWatched(w.Namespace, obj.GetLabels())
		usesOf = c.usesByID(kind, obj, w)
	} else {
		r.NotWatched = c.NamespaceNotWatched(w.Namespace)
	}
	r.Watched = r.NotWatched == ""

	if wl.AppliedErr != nil {
		// The JSON decoder's error, which record.ParseApplied wraps with
		// the annotation's name: the report names the annotation itself.
		r.RecordError = wl.AppliedErr.Error()
		if cause := errors.Unwrap(wl.AppliedErr); cause != nil {
			r.RecordError = cause.Error()
		}
	}
	lookup, unreadable := c.readSources(r, usesOf, w, wl.Applied, fetch, !r.TemplateRecorded || wl.AppliedErr != nil)
	r.Hold = c.holdReport(wl, lookup)
	r.Rollout = c.rolloutReport(wl, kind.Rollout.DeadlineOrDefault())
	switch {
	case !w.OptedIn:
		r.Decision = Decision{Action: ActionNothing, Reasons: []string{c.notOptedIn(obj)}}
	case !r.Watched:
		r.Decision = Decision{Action: ActionNothing, Reasons: []string{"the controller does not watch it: " + r.NotWatched}}
	case w.Problem != "":
		r.Decision = Decision{Action: ActionNothing, Reasons: []string{"its references cannot be read (" + w.Problem + "); the controller skips it"}}
	case unlisted != nil:
		r.Decision = Decision{Action: ActionUnknown, Reasons: []string{"the sources its regex source lists match could not be listed: " + unlisted.Error()}}
	case unreadable:
		r.Decision = Decision{Action: ActionUnknown, Reasons: []string{"a source it reads could not be read with your credentials; see the sources"}}
	default:
		r.Decision = c.decision(c.snapshot(kind, wl, lookup, fetch, now), r, pace)
	}
	if h := r.Hold; h != nil && h.InForce && (r.Decision.Action == ActionRestart || r.Decision.Action == ActionRecord) {
		// The decision lets it go (an unpaced change is never held, a
		// released breaker restarts): the write it makes removes the hold.
		h.InForce, h.EndsWhen, h.Release = false, "the write the controller would now make removes it", ""
	}
	return r
}

// withMatches returns the workload with the sources its regex source lists
// match (catalog.WorkloadState.WithMatches), listed through SourceNames.
func (c *Config) withMatches(w *catalog.WorkloadState) (*catalog.WorkloadState, error) {
	if len(w.Patterns) == 0 {
		return w, nil
	}
	if c.SourceNames == nil {
		return w, errors.New("no way to list sources was given")
	}
	var failed error
	resolved := w.WithMatches(func(kind string) []string {
		sk, _ := c.sourceKind(kind) // list patterns name configured kinds only
		names, err := c.SourceNames(sk, w.Namespace)
		if err != nil && failed == nil {
			failed = err
		}
		return names
	})
	return resolved, failed
}

// readSources reads every source the workload reads, with the caller's
// credentials, into the report's table (the places of each as usesOf
// names them); it returns them for the decision,
// and whether any could not be read. recordOnly: the decision records the
// checksums afresh (it cannot trust what is recorded, or the pod template
// changed since).
func (c *Config) readSources(r *WorkloadReport, usesOf map[catalog.SourceID][]Use, w *catalog.WorkloadState,
	applied map[string]string, fetch SourceFetcher, recordOnly bool) (decision.Sources, bool) {
	lookup := decision.Sources{}
	unreadable := false
	for _, ref := range w.References {
		ws := WorkloadSource{
			Source: ref.ID.String(), Kind: ref.ID.Kind, Name: ref.ID.Name,
			Keys: ref.Keys, AllKeys: ref.Keys == nil, Optional: ref.Optional,
			Uses: usesOf[ref.ID],
		}
		if old, known := applied[ref.ID.String()]; known {
			ws.Applied = &old
		} else if ref.Matched && decision.PatternRecorded(w, applied, ref.ID) {
			// Matched by an entry recorded with the checksums: absent then.
			absent := record.Absent
			ws.Applied = &absent
		}
		// Extractors only name configured source kinds.
		sk, _ := c.sourceKind(ref.ID.Kind)
		state, fetchErr := fetch(sk, ref.ID.Namespace, ref.ID.Name)
		if errors.Is(fetchErr, ErrUnselected) {
			// Out of the controller's sight: the decision sees it absent,
			// and an absence says nothing under a sourceSelector.
			ws.Exists = true
			ws.Status = StatusUnselected
			ws.Note = fetchErr.Error() + ": the controller does not see it, so its changes restart nothing and nothing is recorded for it" +
				" (what was recorded is kept)"
			r.Sources = append(r.Sources, ws)
			continue
		}
		if status, note, ok := membersStatus(ws, state, fetchErr); ok && fetchErr != nil {
			// Unknown: the decision sees it absent, and an absence of a
			// source of lifecycle updatesOnly says nothing.
			ws.Status, ws.Note = status, note
			r.Sources = append(r.Sources, ws)
			continue
		}
		if fetchErr != nil {
			unreadable = true
			ws.Error = fetchErr.Error()
		} else if state != nil {
			lookup[ref.ID] = state
			ws.Exists = true
			ws.Current = state.Checksum(c.Sums, ref.Keys)
			ws.same, ws.incomparable = c.compare(state, ws.Applied, ref.Keys)
		}
		ws.Status, ws.Note = sourceStatus(ws, fetchErr, c.SourceLifecycle)
		if status, note, ok := membersStatus(ws, state, fetchErr); ok {
			ws.Status, ws.Note = status, note
		}
		if recordOnly && (ws.Status == StatusChanged || ws.Status == StatusPending || ws.Status == StatusAppeared) {
			ws.Note += "; but see the decision: the workload's checksums are recorded afresh"
		}
		r.Sources = append(r.Sources, ws)
	}
	return lookup, unreadable
}

// snapshot is what the decision reads, as explain sees it: the sources
// read (and those its last restart and hold name), no grace period known,
// its rollout as its status shows it.
func (c *Config) snapshot(kind config.WorkloadKind, wl decision.Workload, lookup decision.Sources, fetch SourceFetcher, now time.Time) decision.Snapshot {
	key := catalog.WorkloadKey{Resource: kind.GVR, Namespace: wl.State.Namespace, Name: wl.State.Name}
	sources := maps.Clone(lookup)
	wl.AddNamedSources(sources, func(id catalog.SourceID) (*catalog.SourceState, bool) {
		sk, ok := c.sourceKind(id.Kind)
		if !ok {
			return nil, false
		}
		state, err := fetch(sk, id.Namespace, id.Name)
		return state, err == nil && state != nil
	})
	return decision.Snapshot{Key: key, Now: now, Workload: wl, Sources: sources, Namespace: c.namespaceLabels(wl.State.Namespace), Pace: true}
}

// decision runs the controller's decision (package decision) on the
// snapshot, with the pacing facts pace gathers when a restart is due, and
// says why it came out as it did: the reasons any decision gives, then
// those of what it does (records a rollout's end, waits, restarts, records
// the checksums, or nothing).
func (c *Config) decision(snap decision.Snapshot, r *WorkloadReport, pace pacingFunc) Decision {
	rules := c.rules()
	v := rules.Decide(snap)
	if v.NeedsPacing {
		facts := pace(snap, v.Deliver)
		snap.Pacing = &facts
		v = rules.Pace(snap, v)
	}
	d := Decision{}
	if v.Plan.Warning != "" {
		d.Reasons = append(d.Reasons, v.Plan.Warning)
	}
	d.Reasons = append(d.Reasons, v.Invalid...)
	waits := v.Action == decision.Hold || v.Action == decision.Queue || v.Action == decision.Wait
	if !waits {
		d.Reasons = append(d.Reasons, v.Reasons...) // the opt-outs; a hold's and a wait's reasons come in waitDecision
	}
	for _, id := range v.Plan.RequiredGone {
		d.Reasons = append(d.Reasons, fmt.Sprintf("%s was deleted, and its pods need it: nothing restarts for it (new pods could not start); "+
			"the controller reports it in a RequiredSourceDeleted Warning Event", shortID(id.Kind, id.Name)))
	}
	switch {
	case v.Action == decision.EndRollout:
		d.Action = ActionRecord
		d.Reasons = append(d.Reasons, fmt.Sprintf("the rollout of its last restart ended (%s): the controller records that first, then decides again",
			v.Ended.Verdict.Result))
		return d
	case waits:
		return c.waitDecision(d, snap, v, r.Hold)
	case v.Plan.Restart:
		d = restartDecision(d, v.Plan)
	case v.Plan.Patch:
		d = c.recordDecision(d, snap, v)
	default:
		d.Action = ActionNothing
		if len(snap.Workload.State.References) == 0 {
			d.Reasons = append(d.Reasons, "it reads no source")
		} else {
			d.Reasons = append(d.Reasons, "the data its pods read is what they started with")
		}
	}
	if v.Plan.Patch {
		d.Record = v.Plan.Applied
	}
	return d
}

// waitDecision is a due restart a gate stops (a hold, a queue, a wait):
// the gate, what ends it where the objects and the clock tell, and how a
// person lets it go now (hold is the workload's hold, as reported).
func (c *Config) waitDecision(d Decision, snap decision.Snapshot, v decision.Verdict, hold *HoldReport) Decision {
	d.Action, d.Gate = string(v.Action), string(v.Gate)
	timed := v.Gate == decision.GateWindow || v.Gate == decision.GateMinInterval
	if timed {
		// Only these ends are the objects' and the clock's to tell: a
		// hold ends on an event, a queue's recheck is no end, and
		// the breaker's quiet time is timed by the controller's memory.
		until := c.inWindowZone(v.Until, snap.Now)
		d.Until = &until
	}
	d.Reasons = append(d.Reasons, v.Reasons...)
	for _, id := range v.Plan.Changed {
		d.Changed = append(d.Changed, id.String())
	}
	if hold != nil && hold.Release != "" && v.Action == decision.Hold {
		d.Reasons = append(d.Reasons, "to let it go now: "+hold.Release)
	}
	if timed {
		for _, id := range v.Plan.Changed {
			if src, ok := snap.Sources[id]; ok {
				d.Reasons = append(d.Reasons, fmt.Sprintf("to let the change of %s go now: %s",
					shortID(id.Kind, id.Name), decision.ReleaseCommand(c.Annotations.Release, id, src.Change(c.Sums))))
			}
		}
	}
	return d
}

// restartDecision is a restart that goes: the changes it delivers and how
// it is carried out.
func restartDecision(d Decision, plan decision.Plan) Decision {
	d.Action = ActionRestart
	var names []string
	for _, id := range plan.Changed {
		d.Changed = append(d.Changed, id.String())
		names = append(names, shortID(id.Kind, id.Name))
	}
	d.Strategy = plan.Strategy.String()
	d.Reasons = append(d.Reasons, "what its pods read changed: "+strings.Join(names, ", "), graceNote,
		"the restart strategy: "+d.Strategy)
	return d
}

// recordDecision is a write of the checksums without a restart: why they
// are recorded afresh, and what else the write changes.
func (c *Config) recordDecision(d Decision, snap decision.Snapshot, v decision.Verdict) Decision {
	w, plan := snap.Workload.State, v.Plan
	recordedHash := snap.Workload.Template.Hash
	d.Action = ActionRecord
	switch {
	case !w.HasApplied:
		d.Reasons = append(d.Reasons, "no applied checksums yet (first sight): the current checksums are recorded without a restart")
	case snap.Workload.AppliedErr != nil:
		// plan.Warning said it.
	case recordedHash == "":
		d.Reasons = append(d.Reasons, "no template digest recorded (new, or last handled by xing's controller): the current checksums are recorded without a restart")
	case recordedHash != w.TemplateHash:
		d.Reasons = append(d.Reasons, "the pod template changed since the checksums were recorded: that change rolls the pods, which read the current data, so the checksums are recorded without a restart")
	case len(v.OptedOut) > 0:
		// Said above.
	default:
		d.Reasons = append(d.Reasons, "the recorded checksums differ from the current ones in a way that needs no restart (a required source appeared, a source is no longer read, or a new one is read): they are recorded")
	}
	if !w.HasApplied || recordedHash != w.TemplateHash {
		d.Reasons = append(d.Reasons, "if a source it reads was written after the template was set (or, when that order is unknown, updated within its grace period), the controller records \"pending\" for it instead and restarts once the grace period ends; explain cannot see grace periods")
	}
	if _, unhold := plan.Extra[c.Annotations.Hold]; unhold {
		d.Reasons = append(d.Reasons, "its hold annotation holds nothing any more: it is removed")
	}
	for _, ref := range w.References {
		if _, exists := snap.Sources[ref.ID]; !exists && plan.Applied[ref.ID.String()] == record.Absent {
			if old, known := snap.Workload.Applied[ref.ID.String()]; !known || old != record.Absent {
				d.Reasons = append(d.Reasons, ref.ID.String()+" is recorded as absent once the controller has confirmed with the API server that it does not exist")
			}
		}
	}
	return d
}

// inWindowZone is the opening of a restart window at until in the window's
// time zone, as its schedule says it and the decision's reason prints it;
// any other time as it is. The verdict names no window, so it is the one
// closed at now that opens at until (another that opens then is the same
// instant).
func (c *Config) inWindowZone(until, now time.Time) time.Time {
	for _, w := range c.Windows {
		if open, opens, _ := w.At(now); !open && opens.Equal(until) && w.Location != nil {
			return until.In(w.Location)
		}
	}
	return until
}

// compare tells whether a recorded checksum matches the data now, in
// whichever version it was recorded, and whether it could not be compared
// for want of the key.
func (c *Config) compare(state *catalog.SourceState, applied *string, keys []string) (same, incomparable bool) {
	if applied == nil {
		return false, false
	}
	if version, _, _ := checksum.Parse(*applied); version == checksum.Version && c.Sums.KeyID() == "" {
		return false, true
	}
	return state.Matches(c.Sums, *applied, keys), false
}

// sourceStatus says how a source compares with what the pods started with.
func sourceStatus(s WorkloadSource, fetchErr error, life config.SourceLifecycle) (status, note string) {
	switch {
	case fetchErr != nil:
		return StatusUnreadable, "could not be read: " + fetchErr.Error()
	case !s.Exists && s.Applied == nil:
		return StatusAbsent, "does not exist; no applied checksum is recorded for it"
	case !s.Exists && *s.Applied == record.Absent:
		return StatusAbsent, "does not exist, and did not when its pods started"
	case !s.Exists && !s.Optional:
		return StatusDeleted, "deleted since its pods started, which need it: nothing restarts (new pods could not start), and the applied checksum is kept so that a re-creation with other data restarts"
	case !s.Exists && life.RestartOnDelete:
		return StatusDeleted, "deleted since its pods started (optional): a restart is due, so that new pods start without it"
	case !s.Exists:
		return StatusDeleted, "deleted since its pods started: a deletion restarts nothing (sourceLifecycle.restartOnDelete is off), and the applied checksum is kept so that a re-creation with other data restarts"
	case s.Applied == nil:
		return StatusNotRecorded, "no applied checksum is recorded for it"
	case s.same:
		return StatusUpToDate, "the data its pods read is what they started with"
	case s.incomparable:
		return StatusUnknown, "its checksum is keyed with the controller's checksum key, which could not be read with your credentials"
	case *s.Applied == record.Pending:
		return StatusPending, "recorded \"pending\": its data was updated just before the pods started, so a restart is due"
	case *s.Applied == record.Absent && s.Optional && life.RestartOnCreate:
		return StatusAppeared, "created since its pods started without it (optional): a restart is due"
	case *s.Applied == record.Absent && s.Optional:
		return StatusAppeared, "created since its pods started without it (optional): recorded without a restart (sourceLifecycle.restartOnCreate is off)"
	case *s.Applied == record.Absent:
		return StatusAppeared, "created since; its pods could not start without it, so they start with it: recorded without a restart"
	default:
		return StatusChanged, "the data its pods read changed since they started"
	}
}

// usesByID groups the places of the workload's pod spec, and its source-list
// annotations, that name each source.
func (c *Config) usesByID(kind config.WorkloadKind, obj *unstructured.Unstructured, w *catalog.WorkloadState) map[catalog.SourceID][]Use {
	namespace := w.Namespace
	out := map[catalog.SourceID][]Use{}
	listPath := func(annotation string) string {
		path := "metadata.annotations[" + annotation + "]"
		if _, onWorkload := obj.GetAnnotations()[annotation]; !onWorkload {
			path = kind.PodTemplatePath.String() + "." + path
		}
		return path
	}
	// Lists read where the controller reads them: the workload's own
	// annotations, its pod template's, or both (readFrom).
	listed, _ := c.OptInRules().ListedSourcesOf(c.WorkloadAnnotationsOf(kind, obj.Object, obj.GetAnnotations()), namespace, true)
	for _, l := range listed {
		id := catalog.SourceID{Kind: l.Kind, Namespace: l.Namespace, Name: l.Name}
		out[id] = append(out[id], Use{Reference: "annotation " + l.Annotation, Path: listPath(l.Annotation), AllKeys: true, Optional: true})
	}
	for _, p := range w.Patterns {
		for _, ref := range w.References {
			if ref.ID.Kind == p.Kind && p.Re.MatchString(ref.ID.Name) {
				out[ref.ID] = append(out[ref.ID], Use{Reference: "annotation " + p.Annotation + ", regex " + p.Entry,
					Path: listPath(p.Annotation), AllKeys: true, Optional: true})
			}
		}
	}
	template, ok := kind.PodTemplatePath.Object(obj.Object)
	if !ok {
		return out
	}
	podSpec, ok := template["spec"].(map[string]interface{})
	if !ok {
		return out
	}
	// The configured extractors themselves name the places, so the
	// references are exactly those the catalog reads.
	for _, p := range refs.ExtractPlaces(c.Extractors, podSpec) {
		id := catalog.SourceID{Kind: p.Kind, Namespace: namespace, Name: p.Name}
		out[id] = append(out[id], Use{
			Reference: fmt.Sprintf("references[%d]", p.Spec),
			Path:      p.Place,
			Keys:      p.Keys,
			AllKeys:   p.Keys == nil,
			Optional:  p.Optional,
		})
	}
	return out
}

// notWatched says why the controller does not see a workload, or "".
func (c *Config) notWatched(namespace string, objLabels map[string]string) string {
	var why []string
	if s := c.NamespaceNotWatched(namespace); s != "" {
		why = append(why, s)
	}
	if !c.WorkloadSelector.Matches(labels.Set(objLabels)) {
		why = append(why, fmt.Sprintf("its labels do not match the config's workloadSelector %q", c.WorkloadSelector.String()))
	}
	return strings.Join(why, "; ")
}

// NamespaceNotWatched says why the controller does not watch a namespace,
// or does not act on its workloads, or "" when it does.
func (c *Config) NamespaceNotWatched(namespace string) string {
	if len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, namespace) {
		return fmt.Sprintf("namespace %s is not among the config's namespaces (%s)", namespace, strings.Join(c.Namespaces, ", "))
	}
	if c.NamespaceIgnored(namespace) {
		return fmt.Sprintf("namespace %s is among the config's ignoredNamespaces", namespace)
	}
	if c.NamespaceSelector == nil {
		return ""
	}
	if c.NamespaceLabels == nil {
		return fmt.Sprintf("the labels of namespace %s cannot be read to match the config's namespaceSelector %q", namespace, c.NamespaceSelector.String())
	}
	nsLabels, err := c.NamespaceLabels(namespace)
	if err != nil {
		return fmt.Sprintf("the labels of namespace %s cannot be read to match the config's namespaceSelector %q: %v", namespace, c.NamespaceSelector.String(), err)
	}
	if !c.NamespaceSelector.Matches(labels.Set(nsLabels)) {
		return fmt.Sprintf("namespace %s's labels do not match the config's namespaceSelector %q: its workloads are not acted on", namespace, c.NamespaceSelector.String())
	}
	return ""
}

// notOptedIn says why the workload is not opted in; obj nil: listed by
// status, which keeps no annotations.
func (c *Config) notOptedIn(obj *unstructured.Unstructured) string {
	if len(c.OptIns) > 0 || len(c.SourceLists) > 0 {
		return "not opted in: it has none of the config's opt-in annotations with its value (" +
			strings.Join(c.OptInRules().Descriptions(), "; ") + ")"
	}
	if obj == nil {
		return fmt.Sprintf("not opted in: its annotation %s is not \"enabled\"", c.Annotations.OptIn)
	}
	v, ok := obj.GetAnnotations()[c.Annotations.OptIn]
	if !ok {
		return fmt.Sprintf("not opted in: it has no annotation %s: enabled", c.Annotations.OptIn)
	}
	return fmt.Sprintf("not opted in: its annotation %s is %q, not \"enabled\"", c.Annotations.OptIn, v)
}

// kubectlName is kubectl's name for a workload: "deployment.apps/web".
func kubectlName(w *catalog.WorkloadState) string {
	gvk := w.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + w.Name
}

func resourceString(kind config.WorkloadKind) string {
	s := kind.GVR.Resource + "." + kind.GVR.Version
	if kind.GVR.Group != "" {
		s += "." + kind.GVR.Group
	}
	return s
}

func shortID(kind, name string) string { return kind + "/" + name }
