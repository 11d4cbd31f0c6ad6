package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Place says where on a workload an opt-in or source-list annotation is read.
type Place string

const (
	// OnWorkload reads the workload's own metadata.annotations.
	OnWorkload Place = "workload"
	// OnPodTemplate reads the annotations of the pod template's metadata
	// (the kind's podTemplatePath), where Helm charts' podAnnotations go.
	OnPodTemplate Place = "podTemplate"
	// OnBoth reads, for each source kind, the workload's metadata when it
	// has any of the "both" annotations that concern that kind (opt-ins
	// covering it, its source lists), present with any value; otherwise the
	// pod template's. Reloader reads its annotations this way.
	OnBoth Place = "both"
)

// OptIn is a workload annotation that opts the workload in when it has
// Value (ignoring case), or with ParseBool any value ParseBool reads as true.
type OptIn struct {
	Annotation string
	Value      string
	// ParseBool: any value strconv.ParseBool reads as true opts in.
	ParseBool bool
	// Kinds are the source kinds of the pod spec's references it covers;
	// nil covers every kind.
	Kinds []string
	// SourceAnnotation, when set, is the source annotation that must be
	// "true" for a change of a covered source to restart the workload.
	SourceAnnotation string
	// ReadFrom says where the annotation is read.
	ReadFrom Place
	// OptOut: with OptInAll, a non-empty value that does not opt in opts
	// the workload out for the kinds it covers.
	OptOut bool
}

// SourceList is a workload annotation listing sources of kind Kind.
type SourceList struct {
	Annotation string
	Kind       string
	// OptIn: a list naming a source opts the workload in for those sources.
	OptIn bool
	// ReadFrom says where the annotation is read.
	ReadFrom Place
	// Regex: each entry is the anchored regular expression ^(?:ENTRY)$
	// matched against names of sources in the workload's namespace.
	Regex bool
}

// How the entries of a source list name sources (sourceListAnnotations[].match).
const (
	MatchExact = "exact"
	MatchRegex = "regex"
)

// Exclude is a workload annotation listing names of sources of kind Kind
// whose changes restart the workload not. It is read on the workload only.
type Exclude struct {
	Annotation string
	Kind       string
}

// WorkloadAnnotations are the annotations of a workload's metadata and of
// its pod template's metadata: where opt-in and list annotations are read.
type WorkloadAnnotations struct {
	Workload    map[string]string
	PodTemplate map[string]string
}

// WorkloadAnnotationsOf returns the annotations of a workload object of the
// kind and of its pod template. The pod template's are read only when some
// annotation is read there, so that workloads' caches do not copy them for
// nothing; they are nil when the object has no pod template.
func (c *Config) WorkloadAnnotationsOf(kind WorkloadKind, obj map[string]interface{}, workload map[string]string) WorkloadAnnotations {
	a := WorkloadAnnotations{Workload: workload}
	if !c.ReadsPodTemplate() {
		return a
	}
	template, ok := kind.PodTemplatePath.Object(obj)
	if !ok {
		return a
	}
	metadata, _ := template["metadata"].(map[string]interface{})
	raw, _ := metadata["annotations"].(map[string]interface{})
	if len(raw) == 0 {
		return a
	}
	a.PodTemplate = make(map[string]string, len(raw))
	for k, v := range raw {
		// The API server keeps annotation values strings; anything else
		// reads as absent rather than as a value it never had.
		if s, ok := v.(string); ok {
			a.PodTemplate[k] = s
		}
	}
	return a
}

// ReadsPodTemplate reports whether any annotation is read on pod templates,
// so that workloads' caches convert those annotations only when needed.
func (c *Config) ReadsPodTemplate() bool {
	for _, o := range c.OptIns {
		if o.ReadFrom != OnWorkload {
			return true
		}
	}
	for _, l := range c.SourceLists {
		if l.ReadFrom != OnWorkload {
			return true
		}
	}
	return false
}

// covers reports whether the opt-in covers references to sources of kind.
func (o OptIn) covers(kind string) bool {
	return o.Kinds == nil || slices.Contains(o.Kinds, kind)
}

// optsIn reports whether the value opts in.
func (o OptIn) optsIn(value string) bool {
	if o.ParseBool {
		b, err := strconv.ParseBool(value)
		return err == nil && b
	}
	return strings.EqualFold(value, o.Value)
}

// onBoth returns the annotations that the "both" annotations concerning a
// source kind are read from: the workload's when it has any of them, with
// any value, else the pod template's. A key present on the workload decides
// even with an empty value, as in Reloader.
func (c *Config) onBoth(a WorkloadAnnotations, kind string) map[string]string {
	for _, o := range c.OptIns {
		if _, found := a.Workload[o.Annotation]; found && o.ReadFrom == OnBoth && o.covers(kind) {
			return a.Workload
		}
	}
	for _, l := range c.SourceLists {
		if _, found := a.Workload[l.Annotation]; found && l.ReadFrom == OnBoth && l.Kind == kind {
			return a.Workload
		}
	}
	return a.PodTemplate
}

// pick returns the annotations read for a place; both is onBoth's answer.
func (p Place) pick(a WorkloadAnnotations, both map[string]string) map[string]string {
	switch p {
	case OnPodTemplate:
		return a.PodTemplate
	case OnBoth:
		return both
	}
	return a.Workload
}

// Coverage is what a workload's annotations opt it into.
type Coverage struct {
	// OptedIn: the workload is managed.
	OptedIn bool
	// all: every reference of the pod spec counts, with no source
	// annotation required.
	all bool
	// kinds maps a covered source kind to the source annotation its
	// changes need ("" for none).
	kinds map[string]string
}

// Covers reports whether references of the pod spec to sources of this kind
// count, and which source annotation, if any, must be "true" for a change of
// such a source to restart the workload. A workload not opted in covers
// every kind, so that explain can show what it would read.
func (c Coverage) Covers(kind string) (sourceAnnotation string, ok bool) {
	if c.all || !c.OptedIn {
		return "", true
	}
	sourceAnnotation, ok = c.kinds[kind]
	return sourceAnnotation, ok
}

// Coverage reads the opt-in annotations of a workload, kind by kind (a
// "both" annotation may be read on the workload for one kind and on the pod
// template for another). Where two opt-ins cover the same kind, the one that
// needs no source annotation wins: each opt-in alone would restart on those
// changes. With OptInAll, every kind no opt-out excludes is covered with no
// source annotation, as Reloader's --auto-reload-all restarts for every
// referenced source whatever its search annotation says.
func (c *Config) Coverage(a WorkloadAnnotations) Coverage {
	optIn, optInSet := a.Workload[c.Annotations.OptIn]
	if optIn == "enabled" {
		return Coverage{OptedIn: true, all: true}
	}
	// Under OptInAll, xing's own annotation set to anything else opts out
	// of everything: the one opt-out every config has.
	all := c.OptInAll && !(optInSet && optIn != "")
	var cov Coverage
	for _, kind := range c.Sources {
		both := c.onBoth(a, kind.Name)
		need, covered, optedOut := "", false, false
		for _, o := range c.OptIns {
			if !o.covers(kind.Name) {
				continue
			}
			value := o.ReadFrom.pick(a, both)[o.Annotation]
			switch {
			case o.optsIn(value):
				if !covered || need != "" {
					need = o.SourceAnnotation
				}
				covered = true
			case o.OptOut && value != "":
				optedOut = true
			}
		}
		if all && !optedOut {
			need, covered = "", true
		}
		if !covered {
			continue
		}
		if cov.kinds == nil {
			cov.kinds = map[string]string{}
		}
		cov.OptedIn = true
		cov.kinds[kind.Name] = need
	}
	return cov
}

// ListedSource is a source named by a source-list annotation.
type ListedSource struct {
	Kind      string
	Namespace string
	Name      string
	// Annotation is the list that names it.
	Annotation string
}

// ListedSourcesOf returns the sources the source-list annotations of a
// workload in namespace name, and whether one of them opts it in. Lists
// that do not opt in count only when optedIn (the workload is opted in
// another way). Sources in namespaces the controller does not watch are
// left out: it could never see them, nor confirm they do not exist.
func (c *Config) ListedSourcesOf(a WorkloadAnnotations, namespace string, optedIn bool) (listed []ListedSource, optsIn bool) {
	for _, l := range c.SourceLists {
		value, ok := l.ReadFrom.pick(a, c.onBoth(a, l.Kind))[l.Annotation]
		if !ok || !(l.OptIn || optedIn) || l.Regex {
			continue
		}
		for _, entry := range strings.Split(value, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			s := ListedSource{Kind: l.Kind, Namespace: namespace, Name: entry, Annotation: l.Annotation}
			if ns, name, qualified := strings.Cut(entry, "/"); qualified {
				s.Namespace, s.Name = ns, name
			}
			if len(c.Namespaces) > 0 && !slices.Contains(c.Namespaces, s.Namespace) {
				continue
			}
			listed = append(listed, s)
			optsIn = optsIn || l.OptIn
		}
	}
	return listed, optsIn
}

// ListPattern is an entry of a source list with match: regex: the sources
// of kind Kind in the workload's namespace whose names Re matches.
type ListPattern struct {
	Kind string
	// Entry is the entry as written; Re is ^(?:Entry)$.
	Entry string
	Re    *regexp.Regexp
	// Annotation is the list that holds it.
	Annotation string
}

// ListPatternsOf returns the entries of a workload's regex source lists
// (match: regex), read as ListedSourcesOf reads lists, and whether one of
// them opts it in. An entry that is not a regular expression is left out
// and described in problems, naming the annotation and the entry, for the
// workload's owners; the other entries still count.
//
// Entries are compiled each time a workload enters the cache: a pattern is
// small, and a cache of compiled expressions would be state shared by every
// informer for little gain.
func (c *Config) ListPatternsOf(a WorkloadAnnotations, optedIn bool) (patterns []ListPattern, problems []string, optsIn bool) {
	for _, l := range c.SourceLists {
		value, ok := l.ReadFrom.pick(a, c.onBoth(a, l.Kind))[l.Annotation]
		if !ok || !(l.OptIn || optedIn) || !l.Regex {
			continue
		}
		for _, entry := range strings.Split(value, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			re, err := regexp.Compile("^(?:" + entry + ")$")
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: entry %q is not a regular expression, skipped: %v", l.Annotation, entry, err))
				continue
			}
			patterns = append(patterns, ListPattern{Kind: l.Kind, Entry: entry, Re: re, Annotation: l.Annotation})
			optsIn = optsIn || l.OptIn
		}
	}
	return patterns, problems, optsIn
}

// ExcludedSource is a source an exclude annotation names.
type ExcludedSource struct {
	// Entry is "KIND/NAME", as an entry of the ignore-sources opt-out.
	Entry string
	// Annotation is the exclude annotation that names it.
	Annotation string
}

// ExcludedSources returns the sources a workload's exclude annotations name,
// as "KIND/NAME" entries like those of the ignore-sources opt-out, so that
// decisions apply both the same way, with the annotation that names each.
// An entry is a name in the workload's namespace; one with a "/" names
// nothing, as in Reloader, which compares whole names.
func (c *Config) ExcludedSources(workload map[string]string) []ExcludedSource {
	var out []ExcludedSource
	for _, e := range c.Excludes {
		for _, name := range strings.Split(workload[e.Annotation], ",") {
			if name = strings.TrimSpace(name); name != "" && !strings.Contains(name, "/") {
				out = append(out, ExcludedSource{Entry: e.Kind + "/" + name, Annotation: e.Annotation})
			}
		}
	}
	return out
}

// SourceAnnotations are the source annotations decisions read: the ignore
// annotations (annotations.ignore and ignoreAnnotations), the release
// annotation, and those opt-ins require.
func (c *Config) SourceAnnotations() []string {
	keys := append([]string{c.Annotations.Ignore, c.Annotations.Release}, c.IgnoreAnnotations...)
	for _, o := range c.OptIns {
		if o.SourceAnnotation != "" && !slices.Contains(keys, o.SourceAnnotation) {
			keys = append(keys, o.SourceAnnotation)
		}
	}
	return keys
}

// String describes the opt-in for check and explain, e.g.
// "configmap.reloader.stakater.com/auto: true (its configmap references)".
func (o OptIn) String() string {
	s := o.Annotation + ": " + o.Value
	if o.ParseBool {
		s = o.Annotation + ": a value strconv.ParseBool reads as true (1, t, T, TRUE, true, True)"
	}
	var limits []string
	if o.ReadFrom != OnWorkload && o.ReadFrom != "" {
		limits = append(limits, "read "+o.ReadFrom.describe())
	}
	if o.Kinds != nil {
		limits = append(limits, "its "+strings.Join(o.Kinds, " and ")+" references")
	}
	if o.SourceAnnotation != "" {
		limits = append(limits, "changes of sources annotated "+o.SourceAnnotation+": true")
	}
	if o.OptOut {
		limits = append(limits, "with optInAll, another value opts out")
	}
	if len(limits) > 0 {
		s += " (" + strings.Join(limits, "; ") + ")"
	}
	return s
}

// describe says where annotations of the place are read, for String.
func (p Place) describe() string {
	switch p {
	case OnPodTemplate:
		return "on the pod template"
	case OnBoth:
		return "on the workload, or on the pod template for a source kind none of whose annotations read this way are on the workload"
	}
	return "on the workload"
}

// String describes the source list for check and explain, e.g.
// "wave.pusher.com/extra-secrets: NAME,... (secrets, read too when opted in)".
func (l SourceList) String() string {
	where := ""
	if l.ReadFrom != OnWorkload && l.ReadFrom != "" {
		where = "; read " + l.ReadFrom.describe()
	}
	entries, sources := "NAME,...", " sources it lists"
	if l.Regex {
		entries, sources = "REGEX,...", " sources whose names an entry matches whole"
	}
	if l.OptIn {
		return l.Annotation + ": " + entries + " (" + l.Kind + sources + "; opts in for them" + where + ")"
	}
	return l.Annotation + ": " + entries + " (" + l.Kind + sources + ", read too when opted in" + where + ")"
}

// OptInDescriptions lists every way a workload opts in or adds sources,
// xing's annotation first.
func (c *Config) OptInDescriptions() []string {
	out := []string{c.Annotations.OptIn + ": enabled"}
	if c.OptInAll {
		out = append(out, "every workload (optInAll), unless "+c.Annotations.OptIn+" has another value or an opt-out annotation excludes a kind")
	}
	for _, o := range c.OptIns {
		out = append(out, o.String())
	}
	for _, l := range c.SourceLists {
		out = append(out, l.String())
	}
	return out
}
