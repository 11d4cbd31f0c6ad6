package watch

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// startNamespaces runs, with a namespaceSelector, a metadata-only informer
// of the Namespaces it selects (the API server applies the selector, as
// Reloader does: a namespace relabelled out of it is a deletion, into it an
// addition), and hands its cache to the catalog, which then hides the
// workloads of every other namespace. A namespace entering or leaving the
// selection requeues its workloads: those entering are compared with their
// recorded checksums, so a change made while they were not selected
// restarts them. Nothing is started without a selector.
func (w *Watcher) startNamespaces(ctx context.Context) error {
	if w.cfg.NamespaceSelector == nil {
		return nil
	}
	selector := w.cfg.NamespaceSelector.String()
	resource := w.meta.Resource(namespacesGVR)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return resource.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(lw, &metav1.PartialObjectMetadata{},
		cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}, ObjectDescription: "namespaces (metadata)"})
	// Only the name is read: the selector already chose.
	if err := informer.SetTransform(func(obj interface{}) (interface{}, error) {
		if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion}}, nil
		}
		return obj, nil
	}); err != nil {
		return fmt.Errorf("watching namespaces: setting transform: %w", err)
	}
	if _, err := informer.AddEventHandler(namespaceHandler{w: w}); err != nil {
		return fmt.Errorf("watching namespaces: adding event handler: %w", err)
	}
	w.catalog.SelectNamespaces(informer.GetStore())
	w.mu.Lock()
	w.synced = append(w.synced, informer.HasSynced)
	w.mu.Unlock()
	go informer.RunWithContext(ctx)
	w.log.Info("acting only on workloads of selected namespaces", "namespace_selector", selector)
	return nil
}

// namespaceHandler requeues the workloads of a namespace that entered or
// left the selection. The initial list is not a change: start-up compares
// every workload anyway, after this cache has synced.
type namespaceHandler struct{ w *Watcher }

func (h namespaceHandler) OnAdd(obj interface{}, initialList bool) {
	if !initialList {
		h.requeue(obj)
	}
}

func (h namespaceHandler) OnUpdate(_, _ interface{}) {}

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
	for _, key := range h.w.catalog.WorkloadsIn(m.Name) {
		h.w.handler.WorkloadChanged(key)
	}
}
