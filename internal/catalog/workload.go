package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/checksum"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/objmeta"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/refs"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// WorkloadKey is the queue key of a workload. It is comparable, so the queue
// de-duplicates it, and carries the resource so one queue serves every kind.
type WorkloadKey struct {
	Resource  schema.GroupVersionResource
	Namespace string
	Name      string
}

func (k WorkloadKey) String() string {
	return k.Resource.Resource + "." + k.Resource.Group + "/" + k.Namespace + "/" + k.Name
}

// Reference is what a workload reads of one source, merged over all the places
// its pod spec names that config.
type Reference struct {
	ID SourceID
	// Keys read; nil when the whole object is read.
	Keys []string
	// Optional only when every place that names the source marks it optional: a
	// single required use keeps the pods from starting without it.
	Optional bool
	// Matched: read only because a regex source list matches its name
	// (WithMatches). Absent, it matches nothing: its entry leaves the
	// applied checksums rather than being recorded absent.
	Matched bool `json:"matched,omitempty"`
	// SourceAnnotation, when set, is the source annotation that must be
	// "true" for a change of the source to restart the workload (an opt-in's
	// sourceAnnotation); changes of a source without it are recorded only.
	SourceAnnotation string `json:"sourceAnnotation,omitempty"`
}

// WorkloadState is what the cache keeps of a workload: the annotations that
// decisions read and the references found in its pod template.
type WorkloadState struct {
	objmeta.Type
	objmeta.Meta `json:"metadata"`

	OptedIn bool `json:"optedIn"`
	// HasApplied tells an empty applied-checksums annotation from a missing
	// one; InFlight says LastRestart names a restart whose rollout has no
	// result yet that the cap counts (CountedInFlight). (The three flags
	// sit together: apart, each took 8 bytes.)
	HasApplied bool `json:"hasApplied"`
	InFlight   bool `json:"inFlight,omitempty"`
	// Applied is the raw applied-checksums annotation.
	Applied             string `json:"applied,omitempty"`
	AppliedTemplateHash string `json:"appliedTemplateHash,omitempty"`
	// TemplateHash digests the pod template without the restart timestamp, so a
	// restart of our own does not look like a template change.
	TemplateHash string `json:"templateHash"`
	// TemplateRV is the resourceVersion of the write that gave the workload
	// this template (its creation or a template change), when it is known
	// exactly: the informer saw that write as a watch event. Empty when
	// unknown, e.g. for every workload of the start-up list.
	TemplateRV string      `json:"templateRV,omitempty"`
	References []Reference `json:"references,omitempty"`
	// NotRolled says why a change of the pod template replaces no pods now,
	// e.g. "spec.paused is true"; empty when it rolls them.
	NotRolled string `json:"notRolled,omitempty"`
	// Problem explains why references could not be read, e.g. no pod template.
	Problem string `json:"problem,omitempty"`

	// Rollout is where the workload's rollout stands, read from its status
	// by its kind's rule when it entered the cache: all of the status that
	// decisions need.
	Rollout rollout.Status `json:"rollout"`
	// LastRestart and Hold are the raw rollout and hold annotations
	// (package pacing).
	LastRestart string `json:"lastRestart,omitempty"`
	Hold        string `json:"hold,omitempty"`
	// IgnoreSources are the entries of the ignore-sources annotation:
	// "KIND/NAME" or "NAME".
	IgnoreSources []string `json:"ignoreSources,omitempty"`
	// Excluded are the sources its exclude annotations name: the same
	// opt-out, kept apart to name the annotation that says so.
	Excluded []config.ExcludedSource `json:"excluded,omitempty"`
	// Patterns are the entries of its regex source lists: the sources in
	// its namespace whose names they match are read too. They depend on
	// which sources exist, so they are kept as patterns and matched when
	// the workload is read from the catalog (Catalog.Workload, WithMatches),
	// never resolved into References here.
	Patterns []config.ListPattern `json:"patterns,omitempty"`
	// ListProblems describe entries of its source lists that were skipped
	// (not a regular expression), naming the annotation and the entry.
	ListProblems []string `json:"listProblems,omitempty"`
	// RestartMark is the value at a timestampAt strategy's field.
	RestartMark string `json:"restartMark,omitempty"`
	// Picks are what its owners picked by annotation beside the opt-in;
	// nil when nothing (most workloads), so that they cost a pointer.
	Picks *Picks `json:"picks,omitempty"`
}

// Picks are what a workload's owners picked by annotation: one of its
// kind's restart strategies (the value of the restart-strategy annotation
// that picks it; empty for the kind's own, strategy.go), and, as written,
// the values of its window and min-interval annotations, which the
// decision reads.
type Picks struct {
	Strategy    string `json:"strategy,omitempty"`
	Window      string `json:"window,omitempty"`
	MinInterval string `json:"minInterval,omitempty"`
}

// Picked returns what the workload's owners picked by annotation.
func (w *WorkloadState) Picked() Picks {
	if w.Picks == nil {
		return Picks{}
	}
	return *w.Picks
}

// Ignores reports whether changes of the source restart the workload not
// by its own say: its ignore-sources annotation names it (IgnoreListed), or
// an exclude annotation does (ExcludedBy).
func (w *WorkloadState) Ignores(id SourceID) bool {
	return w.IgnoreListed(id) || w.ExcludedBy(id) != ""
}

// IgnoreListed reports whether the workload's ignore-sources annotation
// names the source, as "KIND/NAME" or as a bare NAME (any kind).
func (w *WorkloadState) IgnoreListed(id SourceID) bool {
	return slices.ContainsFunc(w.IgnoreSources, func(entry string) bool {
		return entry == id.Name || entry == id.Kind+"/"+id.Name
	})
}

// ExcludedBy returns the exclude annotation that names the source, or "".
func (w *WorkloadState) ExcludedBy(id SourceID) string {
	for _, e := range w.Excluded {
		if e.Entry == id.Kind+"/"+id.Name {
			return e.Annotation
		}
	}
	return ""
}

// DeepCopyObject is required of cached objects.
func (w *WorkloadState) DeepCopyObject() runtime.Object {
	out := *w
	w.Meta.DeepCopyInto(&out.Meta)
	if w.Picks != nil {
		picks := *w.Picks
		out.Picks = &picks
	}
	// nil stays nil (slices.Clone keeps it): client-go's mutation detector
	// compares copies with reflect.DeepEqual, which tells nil from empty.
	out.IgnoreSources = slices.Clone(w.IgnoreSources)
	out.Excluded = slices.Clone(w.Excluded)
	// A compiled expression is safe to share; the slices are copied.
	out.Patterns = slices.Clone(w.Patterns)
	out.ListProblems = slices.Clone(w.ListProblems)
	out.References = slices.Clone(w.References)
	for i := range out.References {
		out.References[i].Keys = slices.Clone(out.References[i].Keys)
	}
	return &out
}

// SameDecisionInputs reports whether two states would lead to the same
// decision, so that status-only updates of a workload enqueue nothing.
func (w *WorkloadState) SameDecisionInputs(other *WorkloadState) bool {
	if w.OptedIn != other.OptedIn || w.Applied != other.Applied || w.HasApplied != other.HasApplied ||
		w.AppliedTemplateHash != other.AppliedTemplateHash || w.TemplateHash != other.TemplateHash ||
		w.TemplateRV != other.TemplateRV || w.NotRolled != other.NotRolled ||
		w.Problem != other.Problem || w.Picked() != other.Picked() ||
		w.Rollout.Phase != other.Rollout.Phase || w.LastRestart != other.LastRestart || w.Hold != other.Hold ||
		!slices.Equal(w.IgnoreSources, other.IgnoreSources) || !slices.Equal(w.Excluded, other.Excluded) || !samePatterns(w.Patterns, other.Patterns) ||
		!slices.Equal(w.ListProblems, other.ListProblems) {
		return false
	}
	return slices.EqualFunc(w.References, other.References, func(a, b Reference) bool {
		return a.ID == b.ID && a.Optional == b.Optional && a.SourceAnnotation == b.SourceAnnotation &&
			(a.Keys == nil) == (b.Keys == nil) && slices.Equal(a.Keys, b.Keys)
	})
}

// ReduceWorkload returns an informer transform that replaces a workload object
// of the given kind by its WorkloadState.
func ReduceWorkload(kind config.WorkloadKind, cfg *config.Config) cache.TransformFunc {
	return func(obj interface{}) (interface{}, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		return ReduceWorkloadObject(u, kind, cfg), nil
	}
}

// ReduceWorkloadObject reduces a workload object of the given kind to its
// WorkloadState, as the informer transform (ReduceWorkload) does: for the
// one-off readers (explain, status) that hold the object itself.
func ReduceWorkloadObject(u *unstructured.Unstructured, kind config.WorkloadKind, cfg *config.Config) *WorkloadState {
	annotations, optInRules := u.GetAnnotations(), cfg.OptInRules()
	applied, hasApplied := annotations[cfg.Annotations.AppliedChecksums]
	state := &WorkloadState{
		Type: objmeta.TypeOf(u.GetAPIVersion(), u.GetKind()),
		Meta: objmeta.Meta{
			Name:            u.GetName(),
			Namespace:       objmeta.Intern(u.GetNamespace()),
			UID:             u.GetUID(),
			ResourceVersion: u.GetResourceVersion(),
		},
		Applied:             applied,
		HasApplied:          hasApplied,
		AppliedTemplateHash: annotations[cfg.Annotations.AppliedTemplateHash],
		Rollout:             kind.Rollout.Evaluate(u.Object),
		LastRestart:         annotations[cfg.Annotations.Rollout],
		Hold:                annotations[cfg.Annotations.Hold],
		// The exclude annotations are opt-outs like ignore-sources, so
		// decisions apply them the one way they apply the others (Ignores).
		IgnoreSources: splitList(annotations[cfg.Annotations.IgnoreSources]),
		Excluded:      optInRules.ExcludedSources(annotations),
	}
	if picks := (Picks{Window: annotations[cfg.Annotations.Window], MinInterval: cfg.MinIntervalOf(annotations)}); picks != (Picks{}) {
		state.Picks = &picks
	}
	reduceStrategy(state, kind, cfg, annotations, u.Object)
	// An unreadable record counts nothing in flight: the next restart
	// replaces it.
	if rec, err := record.ParseLastRestart(state.LastRestart); err == nil && rec.CountedInFlight() {
		state.InFlight = true
	}
	for _, c := range kind.NotRolledWhen {
		if c.Holds(u.Object) {
			state.NotRolled = c.String()
			break
		}
	}
	// Opt-ins may be read on the pod template too. Our restarts write only
	// the restart timestamp there, never an opt-in key (the config keeps
	// them apart), so a restart changes no workload's opt-in.
	optIns := cfg.WorkloadAnnotationsOf(kind, u.Object, annotations)
	coverage := optInRules.Coverage(optIns)
	listed, listOptsIn := optInRules.ListedSourcesOf(optIns, state.Namespace, coverage.OptedIn)
	patterns, problems, patternsOptIn := optInRules.ListPatternsOf(optIns, coverage.OptedIn)
	listOptsIn = listOptsIn || patternsOptIn
	state.Patterns, state.ListProblems = patterns, problems
	state.OptedIn = coverage.OptedIn || listOptsIn
	template, ok := kind.PodTemplatePath.Object(u.Object)
	if !ok {
		state.Problem = fmt.Sprintf("no pod template at %s", kind.PodTemplatePath)
		return state
	}
	state.TemplateHash = templateHash(template, cfg.Annotations.RestartTimestamp)
	podSpec, ok := template["spec"].(map[string]interface{})
	if !ok {
		state.Problem = fmt.Sprintf("no pod spec at %s.spec", kind.PodTemplatePath)
		return state
	}
	state.References = workloadReferences(state.Namespace, podSpec, cfg.Extractors, coverage, listed, listOptsIn)
	return state
}

// workloadReferences finds what a workload reads: the references of its pod
// spec that its opt-ins cover, and the sources its source-list annotations
// name.
func workloadReferences(namespace string, podSpec map[string]interface{}, extractors []*refs.Extractor,
	coverage config.Coverage, listed []config.ListedSource, listOptsIn bool) []Reference {
	var extracted []refs.Ref
	for _, extractor := range extractors {
		extracted = extractor.Extract(podSpec, extracted)
	}
	var found []placedRef
	for _, r := range extracted {
		need, covered := coverage.Covers(r.Kind)
		// Opted in by a source list alone, it reads only what is listed.
		if covered && !(listOptsIn && !coverage.OptedIn) {
			found = append(found, placedRef{Ref: r, namespace: namespace, sourceAnnotation: need})
		}
	}
	for _, l := range listed {
		found = append(found, placedRef{Ref: refs.Ref{Kind: l.Kind, Name: l.Name, Optional: true}, namespace: l.Namespace})
	}
	return mergeReferences(found)
}

// placedRef is a reference with the namespace of its source and the source
// annotation its changes need to restart ("" for none).
type placedRef struct {
	refs.Ref
	namespace        string
	sourceAnnotation string
}

// splitList splits a comma-separated annotation value, dropping blanks; nil
// when there is nothing.
func splitList(value string) []string {
	var out []string
	for _, part := range strings.Split(value, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// mergeReferences merges the references to each source: the keys of all,
// the whole object when one reads it whole, optional when all are, and a
// source annotation needed only when every reference needs it.
func mergeReferences(found []placedRef) []Reference {
	type merged struct {
		keys       map[string]struct{}
		whole      bool
		optional   bool
		annotation string
		free       bool // a reference needs no source annotation
	}
	byID := map[SourceID]*merged{}
	for _, r := range found {
		id := SourceID{Kind: r.Kind, Namespace: r.namespace, Name: r.Name}
		m, seen := byID[id]
		if !seen {
			m = &merged{keys: map[string]struct{}{}, optional: true}
			byID[id] = m
		}
		m.optional = m.optional && r.Optional
		if r.sourceAnnotation == "" {
			m.free = true
		} else if m.annotation == "" {
			m.annotation = r.sourceAnnotation
		}
		if r.Keys == nil {
			m.whole = true
		}
		for _, k := range r.Keys {
			m.keys[k] = struct{}{}
		}
	}
	out := make([]Reference, 0, len(byID))
	for id, m := range byID {
		ref := Reference{ID: id, Optional: m.optional}
		if !m.free {
			ref.SourceAnnotation = m.annotation
		}
		if !m.whole {
			ref.Keys = make([]string, 0, len(m.keys))
			for k := range m.keys {
				ref.Keys = append(ref.Keys, k)
			}
			sort.Strings(ref.Keys)
		}
		out = append(out, ref)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID.String() < out[j].ID.String() })
	return out
}

// templateHash digests the pod template with what the controller's own
// restarts write left out: the restart timestamp, and the envVar strategy's
// variables (envVarMark). Our own patch may have created the annotations
// map or the metadata map to hold the timestamp, so empty ones are left out
// as well. The input belongs to the informer, so the maps on the way are
// copied rather than edited.
func templateHash(template map[string]interface{}, timestampKey string) string {
	view := maps.Clone(template)
	delete(view, "metadata")
	if spec, ok := template["spec"]; ok {
		view["spec"] = withoutEnvVarMarks(spec)
	}
	if metadata, ok := template["metadata"].(map[string]interface{}); ok {
		metaView := maps.Clone(metadata)
		delete(metaView, "annotations")
		if annotations, ok := metadata["annotations"].(map[string]interface{}); ok {
			kept := maps.Clone(annotations)
			delete(kept, timestampKey)
			if len(kept) > 0 {
				metaView["annotations"] = kept
			}
		}
		if len(metaView) > 0 {
			view["metadata"] = metaView
		}
	}
	// encoding/json sorts map keys, which makes the encoding canonical.
	raw, err := json.Marshal(view)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:8])
}

// withoutEnvVarMarks returns the pod spec without the variables the envVar
// strategy sets in its containers. They are a restart's marks, as the
// restart timestamp is: left in, each restart would look like a template
// change made by someone else, and the checksums recorded with it would be
// taken again without a restart on the next decision. Only the controller's
// own values count (envVarMark): Reloader's STAKATER_ variables hold its
// SHA-1 digests and stay in, so a workload switched from Reloader keeps its
// template hash. The spec is copied only where a mark is dropped.
func withoutEnvVarMarks(spec interface{}) interface{} {
	m, ok := spec.(map[string]interface{})
	if !ok {
		return spec
	}
	containers, ok := m["containers"].([]interface{})
	if !ok {
		return spec
	}
	var out []interface{}
	for i, c := range containers {
		cm, ok := c.(map[string]interface{})
		if !ok {
			continue
		}
		env, ok := cm["env"].([]interface{})
		if !ok || !slices.ContainsFunc(env, envVarMark) {
			continue
		}
		if out == nil {
			out = slices.Clone(containers)
		}
		kept := slices.DeleteFunc(slices.Clone(env), envVarMark)
		copied := maps.Clone(cm)
		if len(kept) == 0 {
			delete(copied, "env") // the variable was the container's only one
		} else {
			copied["env"] = kept
		}
		out[i] = copied
	}
	if out == nil {
		return spec
	}
	view := maps.Clone(m)
	view["containers"] = out
	return view
}

// envVarMark reports whether an env entry is one the envVar strategy wrote:
// a config.EnvVarPrefix name holding a keyed checksum of this controller,
// or nothing (a deleted source's; the API server drops an empty value).
func envVarMark(e interface{}) bool {
	m, ok := e.(map[string]interface{})
	if !ok {
		return false
	}
	name, _ := m["name"].(string)
	if !strings.HasPrefix(name, config.EnvVarPrefix) || m["valueFrom"] != nil {
		return false
	}
	switch value := m["value"].(type) {
	case nil:
		return true
	case string:
		version, _, _ := checksum.Parse(value)
		return value == "" || version == checksum.Version
	}
	return false
}
