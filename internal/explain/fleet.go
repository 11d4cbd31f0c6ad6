package explain

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/pacing"
)

// FleetLister lists the workloads of the explained workload's namespace, of
// every configured kind, with the caller's credentials; nil when explain is
// not to list them (then waves see the explained workload alone).
type FleetLister func() []Workload

// Fleet is what explain and status read of the cluster beyond one workload,
// reduced as the controller's caches reduce it: the workloads listed and,
// for status, the sources listed. It is the pacing.Catalog their due
// restarts are paced over, so that the waves, the cap and the breaker they
// show come from the controller's own code (package pacing) on the same
// kind of view the controller's caches give it, not from a copy of it.
//
// Like the controller's catalog, it hides the workloads of namespaces the
// controller does not act on, and resolves regex source lists against the
// sources that exist (the config's SourceNames). It is filled first, then
// read: not safe for concurrent use while filled.
type Fleet struct {
	cfg *Config
	// namesKept are the answers of the config's SourceNames, for regex
	// source lists, per namespace and kind.
	namesKept  map[[2]string][]string
	workloads  map[catalog.WorkloadKey]*catalog.WorkloadState
	resolved   map[catalog.WorkloadKey]*catalog.WorkloadState
	sources    map[catalog.SourceID]*catalog.SourceState
	readers    map[catalog.SourceID][]catalog.WorkloadKey
	inFlight   []catalog.WorkloadKey
	indexed    bool
	notWatched map[string]bool
}

// NewFleet returns an empty fleet. Its regex source lists are matched
// against the names the config's SourceNames lists (nil: none are
// matched).
func (c *Config) NewFleet() *Fleet {
	return &Fleet{cfg: c, namesKept: map[[2]string][]string{},
		workloads: map[catalog.WorkloadKey]*catalog.WorkloadState{}, resolved: map[catalog.WorkloadKey]*catalog.WorkloadState{},
		sources: map[catalog.SourceID]*catalog.SourceState{}, notWatched: map[string]bool{}}
}

// AddObject reduces a workload object as the controller's cache does and
// adds it.
func (f *Fleet) AddObject(kind config.WorkloadKind, obj *unstructured.Unstructured) {
	f.AddWorkload(kind, catalog.ReduceWorkloadObject(obj, kind, f.cfg.Config))
}

// AddWorkload adds a workload as reduced (its regex source lists
// unresolved), replacing one of the same key.
func (f *Fleet) AddWorkload(kind config.WorkloadKind, w *catalog.WorkloadState) {
	key := catalog.WorkloadKey{Resource: kind.GVR, Namespace: w.Namespace, Name: w.Name}
	f.workloads[key] = w
	delete(f.resolved, key)
	f.indexed = false
}

// AddSource adds a source's reduced state.
func (f *Fleet) AddSource(id catalog.SourceID, s *catalog.SourceState) { f.sources[id] = s }

// Keys lists the workloads of the namespaces the controller acts on, in
// key order.
func (f *Fleet) Keys() []catalog.WorkloadKey {
	var keys []catalog.WorkloadKey
	for key := range f.workloads {
		if f.watched(key.Namespace) {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b catalog.WorkloadKey) int { return strings.Compare(a.String(), b.String()) })
	return keys
}

// Raw is the workload as reduced, its regex source lists unresolved.
func (f *Fleet) Raw(key catalog.WorkloadKey) (*catalog.WorkloadState, bool) {
	w, ok := f.workloads[key]
	return w, ok
}

// watched reports whether the controller acts on the workloads of the
// namespace (its namespaces, ignoredNamespaces, namespaceSelector).
func (f *Fleet) watched(namespace string) bool {
	no, ok := f.notWatched[namespace]
	if !ok {
		no = f.cfg.NamespaceNotWatched(namespace) != ""
		f.notWatched[namespace] = no
	}
	return !no
}

// Source is a source's state as listed (pacing.Catalog).
func (f *Fleet) Source(id catalog.SourceID) (*catalog.SourceState, bool) {
	s, ok := f.sources[id]
	return s, ok
}

// Workload is a workload as decisions read it, with the sources its regex
// source lists match now, as the controller's catalog gives it
// (pacing.Catalog); false for one of a namespace the controller does not
// act on.
func (f *Fleet) Workload(key catalog.WorkloadKey) (*catalog.WorkloadState, bool) {
	w, ok := f.workloads[key]
	if !ok || !f.watched(key.Namespace) {
		return nil, false
	}
	if len(w.Patterns) == 0 {
		return w, true
	}
	if r, ok := f.resolved[key]; ok {
		return r, true
	}
	r := w.WithMatches(func(kind string) []string { return f.sourceNames(kind, w.Namespace) })
	f.resolved[key] = r
	return r, true
}

// sourceNames lists the sources of a kind in a namespace once; a kind that
// cannot be listed matches nothing (the workload's own decision then says
// it cannot decide).
func (f *Fleet) sourceNames(kind, namespace string) []string {
	at := [2]string{kind, namespace}
	if names, ok := f.namesKept[at]; ok {
		return names
	}
	var names []string
	if sk, ok := f.cfg.sourceKind(kind); ok && f.cfg.SourceNames != nil {
		names, _ = f.cfg.SourceNames(sk, namespace)
	}
	f.namesKept[at] = names
	return names
}

// WorkloadsReading lists the workloads that read the source (pacing.Catalog).
func (f *Fleet) WorkloadsReading(id catalog.SourceID) []catalog.WorkloadKey {
	f.index()
	return f.readers[id]
}

// InFlight lists the workloads whose last, paced restart's rollout has no
// result yet (pacing.Catalog): the cap counts them.
func (f *Fleet) InFlight() []catalog.WorkloadKey {
	f.index()
	return f.inFlight
}

// NamespaceLabels are a namespace's labels, for its restart window
// (pacing.Catalog), when windows select namespaces and they can be read.
func (f *Fleet) NamespaceLabels(namespace string) labels.Labels {
	return f.cfg.namespaceLabels(namespace)
}

// index builds the index of readers and the rollouts in flight, as the
// catalog keeps them.
func (f *Fleet) index() {
	if f.indexed {
		return
	}
	f.readers, f.inFlight = map[catalog.SourceID][]catalog.WorkloadKey{}, nil
	for _, key := range f.Keys() {
		w, _ := f.Workload(key)
		for _, ref := range w.References {
			f.readers[ref.ID] = append(f.readers[ref.ID], key)
		}
		if w.InFlight {
			f.inFlight = append(f.inFlight, key)
		}
	}
	f.indexed = true
}

// Pacer gathers the pacing facts of due restarts over a fleet with the
// controller's own pacing state (package pacing), fresh: no reservations
// and no memory of when sources last changed. That memory is the
// controller's alone, so the facts leave it unknown (decision.Pacing's
// LastChange zero) and the breaker's verdicts say so.
type Pacer struct {
	state *pacing.State
}

// NewPacer returns a pacer over the fleet, which must not change after.
func (c *Config) NewPacer(f *Fleet) *Pacer {
	// Started zero: the controller's start is no floor here, so no source
	// has a known last change.
	return &Pacer{state: pacing.New(pacing.Deps{Catalog: f, Rules: c.rules()})}
}

// Facts are the pacing facts of the due restart of the workload key (its
// references refs) that would deliver the changes deliver, as the
// controller gathers them under its pacing lock.
func (p *Pacer) Facts(key catalog.WorkloadKey, refs []catalog.Reference, deliver []catalog.SourceID, sources decision.Sources, now time.Time) decision.Pacing {
	l := p.state.Lock()
	defer l.Unlock()
	f := l.Facts(key, refs, deliver, sources, now)
	f.LastChange = time.Time{} // only the controller's memory knows
	return f
}

// Waves are the waves of the source's current change over its readers,
// with no workload deciding: where the change stands.
func (p *Pacer) Waves(id catalog.SourceID, src *catalog.SourceState, now time.Time) decision.WaveState {
	return p.Facts(catalog.WorkloadKey{}, nil, []catalog.SourceID{id}, decision.Sources{id: src}, now).Waves[id]
}

// pacingFunc gathers the pacing facts of a snapshot's due restart.
type pacingFunc func(snap decision.Snapshot, deliver []catalog.SourceID) decision.Pacing

// listedPacing paces the explained workload w (as reduced, key) over the
// workloads list gives, listed only when a decision needs them.
func (c *Config) listedPacing(kind config.WorkloadKind, w *catalog.WorkloadState, list FleetLister) pacingFunc {
	return func(snap decision.Snapshot, deliver []catalog.SourceID) decision.Pacing {
		f := c.NewFleet()
		if list != nil {
			for _, wl := range list() {
				f.AddObject(wl.Kind, wl.Object)
			}
		}
		f.AddWorkload(kind, w) // as decided, whatever the listing says
		return c.NewPacer(f).Facts(snap.Key, snap.Workload.State.References, deliver, snap.Sources, snap.Now)
	}
}

// rules are the controller's decision rules, with the checksums explain can
// compute.
func (c *Config) rules() decision.Rules { return decision.NewRules(c.Config, c.Sums) }

// namespaceLabels reads a namespace's labels, for the restart window of its
// workloads, when restart windows select namespaces and the caller may
// read them; nil otherwise.
func (c *Config) namespaceLabels(namespace string) labels.Labels {
	if !c.WindowsSelectNamespaces() || c.NamespaceLabels == nil {
		return nil
	}
	set, err := c.NamespaceLabels(namespace)
	if err != nil {
		return nil
	}
	return labels.Set(set)
}
