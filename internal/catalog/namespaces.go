package catalog

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// namespaceIndex files the objects of a cache under their namespace:
// workloads, for a namespace whose selection or labels change
// (NamespaceIndexers), and sources, for regex source lists (sourceNames).
const namespaceIndex = "namespace"

// NamespaceIndexers index workloads by namespace. Only a configuration
// that watches Namespaces adds them: a namespace that starts or stops
// being selected, or whose labels change its restart window, requeues its
// workloads (WorkloadsIn).
func NamespaceIndexers() cache.Indexers {
	return cache.Indexers{namespaceIndex: cache.MetaNamespaceIndexFunc}
}

// namespaces is the cache of Namespaces (metadata) the catalog reads.
type namespaces struct {
	store cache.Store
	// selector, when set, selects the namespaces whose workloads are acted
	// on; byLabels: the store holds every namespace with its labels, and
	// the selector is matched here (else the API server applied it, and
	// the store holds only those it selects, without labels).
	selector labels.Selector
	byLabels bool
}

// WatchNamespaces gives the catalog the cache of Namespaces, listed and
// watched with a metadata client. With a namespaceSelector (selector), the
// catalog hides the workloads of every namespace it does not select:
// Workload answers that they are not there, so nothing decides them and
// nothing is written on them. Their applied checksums stay as recorded, so
// a change made while their namespace was not selected is a change once it
// is. byLabels: the cache holds every namespace with its labels (restart
// windows read them, NamespaceLabels). Call it before any workload
// informer runs.
func (c *Catalog) WatchNamespaces(store cache.Store, selector labels.Selector, byLabels bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.namespaces = &namespaces{store: store, selector: selector, byLabels: byLabels}
}

// NamespaceSelected reports whether the workloads of a namespace are acted
// on: always, unless a namespaceSelector selects others.
func (c *Catalog) NamespaceSelected(namespace string) bool {
	c.mu.RLock()
	ns := c.namespaces
	c.mu.RUnlock()
	if ns == nil || ns.selector == nil {
		return true
	}
	obj, exists, err := ns.store.GetByKey(namespace)
	if err != nil || !exists {
		return false
	}
	if !ns.byLabels {
		return true
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	return ok && ns.selector.Matches(labels.Set(m.Labels))
}

// NamespaceLabels returns the labels of a namespace, or nil when they are
// not watched (no restart window selects namespaces) or it is not there.
func (c *Catalog) NamespaceLabels(namespace string) labels.Labels {
	c.mu.RLock()
	ns := c.namespaces
	c.mu.RUnlock()
	if ns == nil || !ns.byLabels {
		return nil
	}
	obj, exists, err := ns.store.GetByKey(namespace)
	if err != nil || !exists {
		return nil
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil
	}
	return labels.Set(m.Labels)
}

// WorkloadsIn returns the keys of the cached workloads of a namespace,
// selected or not; it needs NamespaceIndexers.
func (c *Catalog) WorkloadsIn(namespace string) []WorkloadKey {
	return c.workloadsIndexed(namespaceIndex, namespace)
}
