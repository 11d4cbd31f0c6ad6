package status

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/explain"
	"github.com/restart-controller/restart-controller/internal/members"
)

// Listing is what status read of the cluster, reduced at once as the
// controller's caches reduce it (no object is kept: at 10,000 workloads the
// objects would be most of its memory), and what it could not read.
// Sources are listed with the config's sourceSelector, workloads with its
// workloadSelector, as the controller lists them. It is filled, then built
// into a Report once; not safe for concurrent use.
type Listing struct {
	cfg   *explain.Config
	fleet *explain.Fleet
	kinds map[schema.GroupVersionResource]config.WorkloadKind
	// scope are the namespaces listed; "" alone: all of them.
	scope []string
	// names are the names of the sources listed, by kind and namespace,
	// for regex source lists.
	names map[[2]string][]string
	// members are the member objects of kinds of lifecycle updatesOnly,
	// grouped into their sources when built.
	members map[string][]*members.State
	// failed are the source kinds that could not be listed, by namespace
	// ("" for all), and why: a workload reading one is not decided.
	failed map[string]map[string]error
	// outside reads a source, or lists names, of a namespace out of scope
	// (a source list may name one): the caller's GET, as explain does; nil
	// leaves such sources absent.
	outside      explain.SourceFetcher
	outsideNames func(kind config.SourceKind, namespace string) ([]string, error)
	notRead      []string
	grouped      bool
}

// NewListing returns an empty listing of the namespaces scope ("" alone:
// all), for the config. namespaceLabels reads a namespace's labels, for a
// namespaceSelector and the restart windows of namespaces (nil: none can
// be read).
func NewListing(cfg *explain.Config, scope []string, namespaceLabels func(string) (map[string]string, error)) *Listing {
	l := &Listing{scope: scope, kinds: map[schema.GroupVersionResource]config.WorkloadKind{}, names: map[[2]string][]string{},
		members: map[string][]*members.State{}, failed: map[string]map[string]error{}}
	// A copy: regex source lists and namespace labels are read from this
	// listing, not from the cluster one object at a time.
	c := *cfg
	c.SourceNames, c.NamespaceLabels = l.sourceNames, namespaceLabels
	l.cfg = &c
	l.fleet = c.NewFleet()
	for _, k := range c.Workloads {
		l.kinds[k.GVR] = k
	}
	return l
}

// AddWorkload adds a workload object listed as kind.
func (l *Listing) AddWorkload(kind config.WorkloadKind, obj *unstructured.Unstructured) {
	l.fleet.AddObject(kind, obj)
}

// AddSource reduces a source object listed as kind and adds it; a member
// of a kind of lifecycle updatesOnly is kept to be grouped.
func (l *Listing) AddSource(kind config.SourceKind, obj *unstructured.Unstructured) error {
	if kind.Members != nil {
		m, err := members.Reduce(kind.Members)(obj)
		if err != nil {
			return fmt.Errorf("reducing %s %s/%s: %w", kind.Name, obj.GetNamespace(), obj.GetName(), err)
		}
		if m, ok := m.(*members.State); ok {
			l.members[kind.Name] = append(l.members[kind.Name], m)
		}
		l.grouped = false
		return nil
	}
	state, err := catalog.SourceReducer{DataFields: kind.DataFields, Keep: l.cfg.SourceAnnotations()}.Reduce(obj)
	if err != nil {
		return fmt.Errorf("reducing %s %s/%s: %w", kind.Name, obj.GetNamespace(), obj.GetName(), err)
	}
	l.AddSourceState(catalog.SourceID{Kind: kind.Name, Namespace: obj.GetNamespace(), Name: obj.GetName()}, state)
	return nil
}

// AddSourceState adds a source already reduced as the controller's cache
// reduces it.
func (l *Listing) AddSourceState(id catalog.SourceID, s *catalog.SourceState) {
	l.fleet.AddSource(id, s)
	at := [2]string{id.Kind, id.Namespace}
	l.names[at] = append(l.names[at], id.Name)
}

// SourceKindFailed notes that the sources of kind could not be listed in
// namespace ("": in any), and why.
func (l *Listing) SourceKindFailed(kind config.SourceKind, namespace string, err error) {
	if l.failed[kind.Name] == nil {
		l.failed[kind.Name] = map[string]error{}
	}
	l.failed[kind.Name][namespace] = err
	l.notRead = append(l.notRead, fmt.Sprintf("%s%s: %v (workloads reading them are not decided)", kind.GVR.GroupResource(), in(namespace), err))
}

// WorkloadKindFailed notes that the workloads of kind could not be listed
// in namespace ("": in any), and why.
func (l *Listing) WorkloadKindFailed(kind config.WorkloadKind, namespace string, err error) {
	l.notRead = append(l.notRead, fmt.Sprintf("%s%s: %v (not shown, and not counted in the waves and the cap)", kind.GVR.GroupResource(), in(namespace), err))
}

// NotRead notes something else that could not be read.
func (l *Listing) NotRead(what string) { l.notRead = append(l.notRead, what) }

func in(namespace string) string {
	if namespace == "" {
		return ""
	}
	return " in " + namespace
}

// inScope reports whether the namespace was listed.
func (l *Listing) inScope(namespace string) bool {
	return slices.Contains(l.scope, "") || slices.Contains(l.scope, namespace)
}

// coversWatched reports whether every namespace the controller watches was
// listed: then the cap counts what the controller counts.
func (l *Listing) coversWatched() bool {
	if slices.Contains(l.scope, "") {
		return true
	}
	if len(l.cfg.Namespaces) == 0 {
		return false
	}
	for _, ns := range l.cfg.Namespaces {
		if !slices.Contains(l.scope, ns) {
			return false
		}
	}
	return true
}

// failedIn returns why the sources of the kind could not be listed in the
// namespace, or nil.
func (l *Listing) failedIn(kind, namespace string) error {
	if err := l.failed[kind][""]; err != nil {
		return err
	}
	return l.failed[kind][namespace]
}

// group turns the members listed into the sources they name, as the
// controller's caches group them (members.Group).
func (l *Listing) group() {
	if l.grouped {
		return
	}
	l.grouped = true
	for kind, states := range l.members {
		byID := map[catalog.SourceID][]*members.State{}
		for _, m := range states {
			if m.Source == "" {
				continue // a member of nothing
			}
			id := catalog.SourceID{Kind: kind, Namespace: m.Namespace, Name: m.Source}
			byID[id] = append(byID[id], m)
		}
		for id, ms := range byID {
			if state, ok := members.Group(id, ms); ok {
				l.AddSourceState(id, state)
			}
		}
	}
	l.members = map[string][]*members.State{}
}

// fetch reads a source from the listing, as explain's fetcher reads it
// from the API server: nil when it does not exist, explain.ErrNoMembers for
// a source of lifecycle updatesOnly no member names.
func (l *Listing) fetch(kind config.SourceKind, namespace, name string) (*catalog.SourceState, error) {
	if err := l.failedIn(kind.Name, namespace); err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", kind.GVR.GroupResource(), namespace, err)
	}
	if !l.inScope(namespace) {
		if l.outside == nil {
			return nil, nil
		}
		return l.outside(kind, namespace, name)
	}
	id := catalog.SourceID{Kind: kind.Name, Namespace: namespace, Name: name}
	if s, ok := l.fleet.Source(id); ok {
		return s, nil
	}
	if kind.Members != nil {
		return nil, fmt.Errorf("%s: %w", id, explain.ErrNoMembers)
	}
	return nil, nil
}

// sourceNames lists the names of the sources of a kind in a namespace, for
// regex source lists.
func (l *Listing) sourceNames(kind config.SourceKind, namespace string) ([]string, error) {
	if err := l.failedIn(kind.Name, namespace); err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", kind.GVR.GroupResource(), namespace, err)
	}
	if !l.inScope(namespace) {
		if l.outsideNames == nil {
			return nil, nil
		}
		return l.outsideNames(kind, namespace)
	}
	l.group()
	return l.names[[2]string{kind.Name, namespace}], nil
}
