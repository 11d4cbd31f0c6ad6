package decision

import (
	"encoding/json"
	"strings"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// OptOutView returns the workload as decisions should see it: for each
// source whose changes it opts out of (OptedOut), the current checksum as
// if its pods had read it. The change is recorded, never restarted for.
func (r Rules) OptOutView(w *catalog.WorkloadState, sources SourceLookup) (*catalog.WorkloadState, []catalog.SourceID) {
	sums := r.Sums
	if !w.HasApplied {
		return w, nil // first sight records every checksum anyway
	}
	applied := map[string]string{}
	if err := json.Unmarshal([]byte(w.Applied), &applied); err != nil {
		return w, nil
	}
	var ignored []catalog.SourceID
	for _, ref := range w.References {
		src, ok := sources.Source(ref.ID)
		if !ok {
			// The deletion of a source the workload ignores is recorded
			// (absent), never restarted for or reported.
			if old, known := applied[ref.ID.String()]; known && old != Absent && w.Ignores(ref.ID) {
				applied[ref.ID.String()] = Absent
				ignored = append(ignored, ref.ID)
			}
			continue
		}
		if !r.OptedOut(w, ref.ID, src) {
			continue
		}
		old, known := applied[ref.ID.String()]
		if !known || src.Matches(sums, old, ref.Keys) {
			continue
		}
		applied[ref.ID.String()] = src.Checksum(sums, ref.Keys)
		ignored = append(ignored, ref.ID)
	}
	if len(ignored) == 0 {
		return w, nil
	}
	raw, _ := json.Marshal(applied) // a map of strings always encodes
	view := *w                      // the cached object is shared and never changed
	view.Applied = string(raw)
	return &view, ignored
}

// OptedOut reports whether changes of the source restart the workload not
// (WhyOptedOut says which opt-out).
func (r Rules) OptedOut(w *catalog.WorkloadState, id catalog.SourceID, src *catalog.SourceState) bool {
	return r.WhyOptedOut(w, id, src) != ""
}

// WhyOptedOut names the opt-out by which changes of the source restart the
// workload not, or returns "": an ignore annotation of the source
// (annotations.ignore, ignoreAnnotations) is "true", the workload's
// ignore-sources annotation or one of its exclude annotations names it,
// or the opt-in that covers the reference needs a source annotation the
// source does not have.
func (r Rules) WhyOptedOut(w *catalog.WorkloadState, id catalog.SourceID, src *catalog.SourceState) string {
	for _, key := range append([]string{r.Annotations.Ignore}, r.IgnoreAnnotations...) {
		if src.Annotations[key] == "true" {
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
			if ref.SourceAnnotation != "" && !strings.EqualFold(src.Annotations[ref.SourceAnnotation], "true") {
				return "its opt-in needs the source annotation " + ref.SourceAnnotation + ": \"true\", which the source does not have"
			}
			return ""
		}
	}
	return ""
}
