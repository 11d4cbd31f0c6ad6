package catalog

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// ByConfigIndex is the workload cache index from a config's ID string to the
// workloads that read it; it replaces listing workloads on every config event.
const ByConfigIndex = "byConfig"

// WorkloadIndexers are the indexers every workload informer must carry.
func WorkloadIndexers() cache.Indexers {
	return cache.Indexers{ByConfigIndex: func(obj interface{}) ([]string, error) {
		w, ok := obj.(*WorkloadState)
		if !ok {
			return nil, nil
		}
		ids := make([]string, len(w.References))
		for i, r := range w.References {
			ids[i] = r.ID.String()
		}
		return ids, nil
	}}
}

// Catalog answers lookups across the informer caches of every watched kind.
// Workload kinds can join later (a CRD installed after start), hence the lock;
// the caches themselves are safe for concurrent use.
type Catalog struct {
	mu        sync.RWMutex
	configs   map[string][]cache.Indexer
	workloads map[schema.GroupVersionResource][]cache.Indexer
}

// New returns an empty catalog.
func New() *Catalog {
	return &Catalog{
		configs:   map[string][]cache.Indexer{},
		workloads: map[schema.GroupVersionResource][]cache.Indexer{},
	}
}

// AddConfigStore registers the cache of one config kind (one per watched
// namespace when watching is limited to namespaces).
func (c *Catalog) AddConfigStore(kind string, store cache.Indexer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.configs[kind] = append(c.configs[kind], store)
}

// AddWorkloadStore registers the cache of one workload kind.
func (c *Catalog) AddWorkloadStore(resource schema.GroupVersionResource, store cache.Indexer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.workloads[resource] = append(c.workloads[resource], store)
}

// Config returns the cached state of a config, or false when it does not exist.
func (c *Catalog) Config(id ConfigID) (*ConfigState, bool) {
	c.mu.RLock()
	stores := c.configs[id.Kind]
	c.mu.RUnlock()
	key := id.Namespace + "/" + id.Name
	for _, store := range stores {
		if obj, exists, err := store.GetByKey(key); err == nil && exists {
			if state, ok := obj.(*ConfigState); ok {
				return state, true
			}
		}
	}
	return nil, false
}

// Workload returns the cached state of a workload, or false when it is gone.
func (c *Catalog) Workload(key WorkloadKey) (*WorkloadState, bool) {
	c.mu.RLock()
	stores := c.workloads[key.Resource]
	c.mu.RUnlock()
	cacheKey := key.Namespace + "/" + key.Name
	for _, store := range stores {
		if obj, exists, err := store.GetByKey(cacheKey); err == nil && exists {
			if state, ok := obj.(*WorkloadState); ok {
				return state, true
			}
		}
	}
	return nil, false
}

// WorkloadsReading returns the keys of every cached workload whose pod
// template references the config.
func (c *Catalog) WorkloadsReading(id ConfigID) []WorkloadKey {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var keys []WorkloadKey
	for resource, stores := range c.workloads {
		for _, store := range stores {
			objs, err := store.ByIndex(ByConfigIndex, id.String())
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

// Counts returns how many configs and workloads the caches hold.
func (c *Catalog) Counts() (configs, workloads int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, stores := range c.configs {
		for _, s := range stores {
			configs += len(s.ListKeys())
		}
	}
	for _, stores := range c.workloads {
		for _, s := range stores {
			workloads += len(s.ListKeys())
		}
	}
	return configs, workloads
}
