package watch

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// startNamespaces runs a metadata-only informer of Namespaces when the
// configuration reads them, and hands its cache to the catalog. With only a
// namespaceSelector, the API server applies it (as Reloader does: a
// namespace relabelled out of it is a deletion, into it an addition) and
// only names are kept. When a restart window is the default of namespaces
// a selector selects, every namespace is watched with its labels, and the
// catalog matches the selectors. A namespace entering or leaving the
// selection, or whose labels change, requeues its workloads: those
// entering are compared with their recorded checksums, so a change made
// while they were not selected restarts them. Nothing is started when
// nothing reads Namespaces.
func (w *Watcher) startNamespaces(ctx context.Context) error {
	byLabels := w.Config.WindowsSelectNamespaces()
	if w.Config.NamespaceSelector == nil && !byLabels {
		return nil
	}
	var selector string
	if !byLabels {
		selector = w.Config.NamespaceSelector.String()
	}
	resource := w.Meta.Resource(namespacesGVR)
	lw := trackedListWatch(selectors{label: selector}, nil, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return resource.List(ctx, o)
	}, resource.Watch)
	informer := cache.NewSharedIndexInformerWithOptions(lw, &metav1.PartialObjectMetadata{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}, ObjectDescription: "namespaces (metadata)"})
	// Only the name is read, and the labels when the catalog matches them.
	transform := func(obj interface{}) (interface{}, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			kept := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion}}
			if byLabels {
				kept.Labels = m.Labels
			}
			return kept, nil
		}
		return obj, nil
	}
	w.Catalog.WatchNamespaces(informer.GetStore(), w.Config.NamespaceSelector, byLabels)
	if err := w.run(ctx, informer, transform, namespaceHandler{w: w}, informer.HasSynced); err != nil {
		return fmt.Errorf("watching namespaces: %w", err)
	}
	w.Log.Info("watching namespaces", "namespace_selector", w.Config.NamespaceSelector, "labels", byLabels)
	return nil
}

// namespaceHandler requeues the workloads of a namespace that entered or
// left the selection, or whose labels changed. The initial list is not a change: start-up compares
// every workload anyway, after this cache has synced.
type namespaceHandler struct{ w *Watcher }

func (h namespaceHandler) OnAdd(obj interface{}, initialList bool) {
	if !initialList {
		h.requeue(obj)
	}
}

func (h namespaceHandler) OnUpdate(oldObj, newObj interface{}) {
	old, ok1 := oldObj.(*metav1.PartialObjectMetadata)
	cur, ok2 := newObj.(*metav1.PartialObjectMetadata)
	if ok1 && ok2 && !labels.Equals(old.Labels, cur.Labels) {
		h.requeue(newObj)
	}
}

func (h namespaceHandler) OnDelete(obj interface{}) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	h.requeue(obj)
}

func (h namespaceHandler) requeue(obj interface{}) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	for _, key := range h.w.Catalog.WorkloadsIn(m.Name) {
		h.w.Handler.WorkloadChanged(key)
	}
}
