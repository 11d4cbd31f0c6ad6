package decision

import (
	"maps"
	"strings"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/record"
)

// optOutView returns the workload as decisions should see it: for each
// source whose changes it opts out of (WhyOptedOut), the current checksum as
// if its pods had read it. The change is recorded, never restarted for.
func (r Rules) optOutView(w Workload, sources Sources) (Workload, []catalog.SourceID) {
	if w.Applied == nil {
		return w, nil // first sight records every checksum anyway
	}
	var applied map[string]string // a copy, once something is opted out
	var ignored []catalog.SourceID
	set := func(id catalog.SourceID, value string) {
		if applied == nil {
			applied = maps.Clone(w.Applied)
		}
		applied[id.String()] = value
		ignored = append(ignored, id)
	}
	for _, ref := range w.State.References {
		old, known := w.Applied[ref.ID.String()]
		src, ok := sources[ref.ID]
		if !ok {
			// The deletion of a source the workload ignores is recorded
			// (absent), never restarted for or reported.
			if known && old != record.Absent && w.State.Ignores(ref.ID) {
				set(ref.ID, record.Absent)
			}
			continue
		}
		if !known || r.WhyOptedOut(w.State, ref.ID, src) == "" || src.Matches(r.Sums, old, ref.Keys) {
			continue
		}
		set(ref.ID, src.Checksum(r.Sums, ref.Keys))
	}
	if applied != nil {
		w.Applied = applied
	}
	return w, ignored
}

// WhyOptedOut names the opt-out by which changes of the source restart the
// workload not, or returns "": an ignore annotation of the source
// (annotations.ignore, ignoreAnnotations) is "true", the workload's
// ignore-sources annotation or one of its exclude annotations names it,
// or the opt-in that covers the reference needs a source annotation the
// source does not have. src is nil for a source that does not exist.
func (r Rules) WhyOptedOut(w *catalog.WorkloadState, id catalog.SourceID, src *catalog.SourceState) string {
	var annotations map[string]string
	if src != nil {
		annotations = src.Annotations
	}
	if annotations[r.Annotations.Ignore] == "true" {
		return "the source's annotation " + r.Annotations.Ignore + " is \"true\""
	}
	for _, key := range r.IgnoreAnnotations {
		if annotations[key] == "true" {
			return "the source's annotation " + key + " is \"true\""
		}
	}
	if w.IgnoreListed(id) {
		return "the workload's annotation " + r.Annotations.IgnoreSources + " names it"
	}
	if by := w.ExcludedBy(id); by != "" {
		return "the workload's annotation " + by + " names it"
	}
	for _, ref := range w.References {
		if ref.ID == id {
			if ref.SourceAnnotation != "" && !strings.EqualFold(annotations[ref.SourceAnnotation], "true") {
				return "its opt-in needs the source annotation " + ref.SourceAnnotation + ": \"true\", which the source does not have"
			}
			return ""
		}
	}
	return ""
}
