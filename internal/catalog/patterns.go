package catalog

import (
	"slices"
	"strings"

	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
)

// WithMatches returns the workload as decisions read it: its references and,
// for each of its patterns (regex source lists), every source of the
// pattern's kind in its namespace whose name the pattern matches, among
// names (the names of the existing sources of a kind in that namespace). A
// matched source is read whole and is optional, like a listed one; merged
// with a reference of the pod spec, the whole object and the pod spec's
// requirement win. Without patterns, or with no match, it is w itself; the
// cached object is never changed.
//
// Sources the applied checksums name that a pattern matches but that no
// longer exist are read too (Matched, absent): that is how a decision sees
// their deletion, from the record alone, after a controller restart too.
func (w *WorkloadState) WithMatches(names func(kind string) []string) *WorkloadState {
	if len(w.Patterns) == 0 {
		return w
	}
	var matched []SourceID
	byKind := map[string][]string{}
	for _, p := range w.Patterns {
		all, ok := byKind[p.Kind]
		if !ok {
			all = names(p.Kind)
			byKind[p.Kind] = all
		}
		for _, name := range all {
			id := SourceID{Kind: p.Kind, Namespace: w.Namespace, Name: name}
			if p.Re.MatchString(name) && !slices.Contains(matched, id) {
				matched = append(matched, id)
			}
		}
	}
	matched = append(matched, w.recordedMatches(matched)...)
	if len(matched) == 0 {
		return w
	}
	refs := slices.Clone(w.References)
	for _, id := range matched {
		if i := slices.IndexFunc(refs, func(r Reference) bool { return r.ID == id }); i >= 0 {
			refs[i].Keys, refs[i].SourceAnnotation = nil, ""
			continue
		}
		refs = append(refs, Reference{ID: id, Optional: true, Matched: true})
	}
	slices.SortFunc(refs, func(a, b Reference) int { return strings.Compare(a.ID.String(), b.ID.String()) })
	view := *w
	view.References = refs
	return &view
}

// recordedMatches returns the sources the applied checksums name, in the
// workload's namespace, that a pattern matches and that are not in found.
func (w *WorkloadState) recordedMatches(found []SourceID) []SourceID {
	if !w.HasApplied {
		return nil
	}
	applied, err := record.ParseApplied(w.Applied)
	if err != nil {
		return nil // decisions warn about it
	}
	var out []SourceID
	for key := range applied {
		id, ok := ParseSourceID(key)
		// "~ENTRY" records a pattern in force (decision.PatternKey), no source.
		if !ok || id.Namespace != w.Namespace || strings.HasPrefix(id.Name, "~") {
			continue
		}
		if matchesAny(w.Patterns, id) && !slices.Contains(found, id) {
			out = append(out, id)
		}
	}
	return out
}

func matchesAny(patterns []config.ListPattern, id SourceID) bool {
	return slices.ContainsFunc(patterns, func(p config.ListPattern) bool {
		return p.Kind == id.Kind && p.Re.MatchString(id.Name)
	})
}

func samePatterns(a, b []config.ListPattern) bool {
	return slices.EqualFunc(a, b, func(x, y config.ListPattern) bool {
		return x.Kind == y.Kind && x.Entry == y.Entry && x.Annotation == y.Annotation
	})
}

// sourceNames returns the names of the cached sources of a kind in a
// namespace, through the namespace index of the kind's caches, adding the
// index on first use (client-go indexes the objects already cached under
// the cache's lock; of two callers adding it at once, the second is refused
// as a conflict and uses the first's). It is added only then: the default
// configuration has no regex lists, and its caches keep no index they would
// never read.
func (c *Catalog) sourceNames(kind, namespace string) []string {
	if g, ok := c.sourceGroups(kind); ok {
		return g.Names(namespace)
	}
	c.mu.RLock()
	stores := c.sources[kind]
	c.mu.RUnlock()
	var names []string
	for _, store := range stores {
		if _, ok := store.GetIndexers()[namespaceIndex]; !ok {
			_ = store.AddIndexers(cache.Indexers{namespaceIndex: cache.MetaNamespaceIndexFunc})
		}
		keys, err := store.IndexKeys(namespaceIndex, namespace)
		if err != nil {
			continue
		}
		for _, key := range keys {
			names = append(names, strings.TrimPrefix(key, namespace+"/"))
		}
	}
	return names
}
