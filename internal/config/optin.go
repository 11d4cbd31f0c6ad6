package config

import (
	"slices"
	"strings"
)

// OptIn is a workload annotation that opts the workload in when it has
// Value (ignoring case).
type OptIn struct {
	Annotation string
	Value      string
	// Kinds are the source kinds of the pod spec's references it covers;
	// nil covers every kind.
	Kinds []string
	// SourceAnnotation, when set, is the source annotation that must be
	// "true" for a change of a covered source to restart the workload.
	SourceAnnotation string
}

// SourceList is a workload annotation listing sources of kind Kind.
type SourceList struct {
	Annotation string
	Kind       string
	// OptIn: a list naming a source opts the workload in for those sources.
	OptIn bool
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

// Coverage reads the opt-in annotations of a workload. Where two opt-ins
// cover the same kind, the one that needs no source annotation wins: each
// opt-in alone would restart on those changes.
func (c *Config) Coverage(annotations map[string]string) Coverage {
	var cov Coverage
	if annotations[c.Annotations.OptIn] == "enabled" {
		return Coverage{OptedIn: true, all: true}
	}
	for _, o := range c.OptIns {
		if !strings.EqualFold(annotations[o.Annotation], o.Value) {
			continue
		}
		cov.OptedIn = true
		if o.Kinds == nil && o.SourceAnnotation == "" {
			return Coverage{OptedIn: true, all: true}
		}
		if cov.kinds == nil {
			cov.kinds = map[string]string{}
		}
		kinds := o.Kinds
		if kinds == nil {
			kinds = c.sourceKindNames()
		}
		for _, k := range kinds {
			if need, seen := cov.kinds[k]; !seen || need != "" {
				cov.kinds[k] = o.SourceAnnotation
			}
		}
	}
	return cov
}

func (c *Config) sourceKindNames() []string {
	names := make([]string, len(c.Sources))
	for i, k := range c.Sources {
		names[i] = k.Name
	}
	return names
}

// ListedSource is a source named by a source-list annotation.
type ListedSource struct {
	Kind      string
	Namespace string
	Name      string
	// Annotation is the list that names it.
	Annotation string
}

// ListedSources returns the sources the source-list annotations of a
// workload in namespace name, and whether one of them opts it in. Lists
// that do not opt in count only when optedIn (the workload is opted in
// another way). Sources in namespaces the controller does not watch are
// left out: it could never see them, nor confirm they do not exist.
func (c *Config) ListedSources(annotations map[string]string, namespace string, optedIn bool) (listed []ListedSource, optsIn bool) {
	for _, l := range c.SourceLists {
		value, ok := annotations[l.Annotation]
		if !ok || !(l.OptIn || optedIn) {
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

// SourceAnnotations are the source annotations decisions read: the ignore
// and release annotations, and those opt-ins require.
func (c *Config) SourceAnnotations() []string {
	keys := []string{c.Annotations.Ignore, c.Annotations.Release}
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
	var limits []string
	if o.Kinds != nil {
		limits = append(limits, "its "+strings.Join(o.Kinds, " and ")+" references")
	}
	if o.SourceAnnotation != "" {
		limits = append(limits, "changes of sources annotated "+o.SourceAnnotation+": true")
	}
	if len(limits) > 0 {
		s += " (" + strings.Join(limits, "; ") + ")"
	}
	return s
}

// String describes the source list for check and explain, e.g.
// "wave.pusher.com/extra-secrets: NAME,... (secrets, read too when opted in)".
func (l SourceList) String() string {
	if l.OptIn {
		return l.Annotation + ": NAME,... (" + l.Kind + " sources it lists; opts in for them)"
	}
	return l.Annotation + ": NAME,... (" + l.Kind + " sources it lists, read too when opted in)"
}

// OptInDescriptions lists every way a workload opts in or adds sources,
// xing's annotation first.
func (c *Config) OptInDescriptions() []string {
	out := []string{c.Annotations.OptIn + ": enabled"}
	for _, o := range c.OptIns {
		out = append(out, o.String())
	}
	for _, l := range c.SourceLists {
		out = append(out, l.String())
	}
	return out
}
