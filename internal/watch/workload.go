package watch

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/templaterv"
)

// workloadInformer is the dynamic informer of one workload kind, as
// client-go's dynamicinformer builds it (see dynamicSourceInformer), with a ListerWatcher that tells the tracker
// (when not nil) whether the objects the informer is about to transform are
// states of a list or writes of a watch.
func workloadInformer(client dynamic.Interface, gvr schema.GroupVersionResource, namespace string, sel selectors, tracker *templaterv.Tracker) cache.SharedIndexInformer {
	resource := client.Resource(gvr).Namespace(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel.apply(&o)
			if tracker != nil {
				tracker.BeginList()
			}
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel.apply(&o)
			w, err := resource.Watch(ctx, o)
			if err != nil || tracker == nil {
				return w, err
			}
			return trackWatch(w, o, tracker), nil
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{Indexers: catalog.WorkloadIndexers(), ObjectDescription: gvr.String()})
}

// trackWatch tells the tracker whether the watch's events are writes. A watch
// from a resourceVersion sends only writes. One that sends initial events
// first (sendInitialEvents, the informer's streaming list) sends states until
// the bookmark that ends them; one from "" or "0" sends states with no end
// marker, so it stays unknown to the end.
func trackWatch(w watch.Interface, o metav1.ListOptions, tracker *templaterv.Tracker) watch.Interface {
	switch {
	case o.SendInitialEvents != nil && *o.SendInitialEvents:
		gen := tracker.BeginWatch(false)
		return newInitialEventsWatch(w, func() { tracker.InitialEventsEnded(gen) })
	case o.ResourceVersion == "" || o.ResourceVersion == "0":
		tracker.BeginWatch(false)
	default:
		tracker.BeginWatch(true)
	}
	return w
}

// initialEventsWatch passes a watch's events through unchanged and calls
// ended once the consumer has taken the bookmark that ends the initial
// events. The channel is unbuffered, so when that send completes the consumer
// has processed (transformed) every event before it, and receives every event
// after it only once ended has returned.
type initialEventsWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newInitialEventsWatch(inner watch.Interface, ended func()) *initialEventsWatch {
	w := &initialEventsWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	go w.run(ended)
	return w
}

func (w *initialEventsWatch) run(ended func()) {
	defer close(w.out)
	pending := true
	for ev := range w.inner.ResultChan() {
		select {
		case w.out <- ev:
		case <-w.stop:
			return
		}
		if pending && ev.Type == watch.Bookmark && endsInitialEvents(ev.Object) {
			pending = false
			ended()
		}
	}
}

func endsInitialEvents(obj runtime.Object) bool {
	m, ok := obj.(metav1.Object)
	return ok && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}

func (w *initialEventsWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *initialEventsWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}
