package catalog

import (
	"k8s.io/client-go/tools/cache"
)

// namespaceIndex files workloads under their namespace, for a namespace
// whose selection changes.
const namespaceIndex = "namespace"

// NamespaceIndexers index workloads by namespace. Only a configuration
// with a namespaceSelector adds them: a namespace that starts or stops
// being selected requeues its workloads (WorkloadsIn).
func NamespaceIndexers() cache.Indexers {
	return cache.Indexers{namespaceIndex: func(obj interface{}) ([]string, error) {
		if w, ok := obj.(*WorkloadState); ok {
			return []string{w.Namespace}, nil
		}
		return nil, nil
	}}
}

// SelectNamespaces makes the catalog hide the workloads of every namespace
// that selected does not hold (a cache of the Namespaces a label selector
// selects, listed and watched with it): Workload answers that they are not
// there, so nothing decides them and nothing is written on them. Their
// applied checksums stay as recorded, so a change made while their
// namespace was not selected is a change once it is. Call it before any
// workload informer runs.
func (c *Catalog) SelectNamespaces(selected cache.Store) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.namespaces = selected
}

// NamespaceSelected reports whether the workloads of a namespace are acted
// on: always, unless SelectNamespaces was called.
func (c *Catalog) NamespaceSelected(namespace string) bool {
	c.mu.RLock()
	selected := c.namespaces
	c.mu.RUnlock()
	if selected == nil {
		return true
	}
	_, exists, err := selected.GetByKey(namespace)
	return err == nil && exists
}

// WorkloadsIn returns the keys of the cached workloads of a namespace,
// selected or not; it needs NamespaceIndexers.
func (c *Catalog) WorkloadsIn(namespace string) []WorkloadKey {
	return c.workloadsIndexed(namespaceIndex, namespace)
}
