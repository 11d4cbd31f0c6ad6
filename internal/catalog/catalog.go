package catalog

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/checksum"
)

// InFlightIndex is the workload cache index of paced restarts whose rollout
// has no result yet, under the single value inFlight: the cap on rollouts
// in flight counts them without listing every workload.
const InFlightIndex = "inFlight"

const inFlight = "inFlight"

// WorkloadIndexers are the indexers every workload informer must carry. The
// workloads reading a source are not one of them: the catalog keeps that
// index itself (readers.go, WorkloadCached).
func WorkloadIndexers() cache.Indexers {
	return cache.Indexers{InFlightIndex: func(obj interface{}) ([]string, error) {
		if w, ok := obj.(*WorkloadState); ok && w.InFlight {
			return []string{inFlight}, nil
		}
		return nil, nil
	}}
}

// Catalog answers lookups across the informer caches of every watched kind.
// Workload kinds can join later (a CRD installed after start), hence the lock;
// the caches themselves are safe for concurrent use.
type Catalog struct {
	mu      sync.RWMutex
	sources map[string][]cache.Indexer
	// groups serve the source kinds of lifecycle updatesOnly (groups.go).
	groups    map[string]SourceGroups
	workloads map[schema.GroupVersionResource][]cache.Indexer
	// readers indexes the workloads reading each source.
	readers *readerIndex
	// reduce is how sources enter the caches (SourceReducer).
	reduce SourceReducer
	// namespaces, when set, is the cache of Namespaces (WatchNamespaces).
	namespaces *namespaces
}

// Option configures a Catalog.
type Option func(*Catalog)

// BoundSources makes the source caches keep one digest per key only for
// sources within MaxDigestKeys and MaxDigestKeyBytes, and the checksums of
// the whole data, keyed with sums, for larger ones: the controller's memory
// then does not grow with the keys of sources (docs/design.md, Memory).
// sums must be the Hasher that decisions use.
func BoundSources(sums checksum.Hasher) Option {
	return func(c *Catalog) { c.reduce.Bounded, c.reduce.Sums = true, sums }
}

// New returns an empty catalog.
func New(opts ...Option) *Catalog {
	c := &Catalog{
		sources:   map[string][]cache.Indexer{},
		workloads: map[schema.GroupVersionResource][]cache.Indexer{},
		readers:   newReaderIndex(),
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// SourceReducer returns how a source cache of this catalog reduces objects
// with these data fields.
func (c *Catalog) SourceReducer(dataFields []string) SourceReducer {
	r := c.reduce
	r.DataFields = dataFields
	return r
}

// AddSourceStore registers the cache of one source kind (one per watched
// namespace when watching is limited to namespaces).
func (c *Catalog) AddSourceStore(kind string, store cache.Indexer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources[kind] = append(c.sources[kind], store)
}

// AddWorkloadStore registers the cache of one workload kind.
func (c *Catalog) AddWorkloadStore(resource schema.GroupVersionResource, store cache.Indexer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.workloads[resource] = append(c.workloads[resource], store)
}

// Source returns the cached state of a source, or false when it does not exist.
func (c *Catalog) Source(id SourceID) (*SourceState, bool) {
	if g, ok := c.sourceGroups(id.Kind); ok {
		return g.Source(id)
	}
	c.mu.RLock()
	stores := c.sources[id.Kind]
	c.mu.RUnlock()
	return lookup[*SourceState](stores, id.Namespace+"/"+id.Name)
}

// Workload returns the state of a workload as decisions read it, or false
// when it is gone: the cached state, with the sources its regex source
// lists match among the cached sources now (WithMatches).
//
// A workload of a namespace that is not selected (WatchNamespaces) is not
// there.
func (c *Catalog) Workload(key WorkloadKey) (*WorkloadState, bool) {
	if !c.NamespaceSelected(key.Namespace) {
		return nil, false
	}
	c.mu.RLock()
	stores := c.workloads[key.Resource]
	c.mu.RUnlock()
	w, ok := lookup[*WorkloadState](stores, key.Namespace+"/"+key.Name)
	if !ok || len(w.Patterns) == 0 {
		return w, ok
	}
	return w.WithMatches(func(kind string) []string { return c.sourceNames(kind, w.Namespace) }), true
}

// lookup finds the object with the cache key in the first store holding it:
// a kind has one store per watched namespace.
func lookup[T any](stores []cache.Indexer, key string) (T, bool) {
	for _, store := range stores {
		if obj, exists, err := store.GetByKey(key); err == nil && exists {
			if state, ok := obj.(T); ok {
				return state, true
			}
		}
	}
	var zero T
	return zero, false
}

// WorkloadsReading returns the keys of every cached workload whose pod
// template references the source, that lists it, or one of whose regex
// source lists matches its name, as far as WorkloadCached has been told.
func (c *Catalog) WorkloadsReading(id SourceID) []WorkloadKey {
	return c.readers.readersOf(id)
}

// InFlight returns the keys of the workloads whose last, paced restart's
// rollout has no result yet.
func (c *Catalog) InFlight() []WorkloadKey { return c.workloadsIndexed(InFlightIndex, inFlight) }

// workloadsIndexed returns the keys of every cached workload that the named
// index files under value.
func (c *Catalog) workloadsIndexed(index, value string) []WorkloadKey {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var keys []WorkloadKey
	for resource, stores := range c.workloads {
		for _, store := range stores {
			objs, err := store.ByIndex(index, value)
			if err != nil {
				continue
			}
			for _, obj := range objs {
				if w, ok := obj.(*WorkloadState); ok {
					keys = append(keys, WorkloadKey{Resource: resource, Namespace: w.Namespace, Name: w.Name})
				}
			}
		}
	}
	return keys
}

// Counts returns how many sources and workloads the caches hold.
func (c *Catalog) Counts() (sources, workloads int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, stores := range c.sources {
		for _, s := range stores {
			sources += len(s.ListKeys())
		}
	}
	for _, stores := range c.workloads {
		for _, s := range stores {
			workloads += len(s.ListKeys())
		}
	}
	return sources, workloads
}
