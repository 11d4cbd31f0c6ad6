package watch

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/templaterv"
)

// workloadInformer is the informer of one workload kind (kind is its Kind, as
// discovery names it). It returns, beside the informer, what turns the
// objects it decodes into the unstructured form the transform reads.
//
// Kinds client-go's scheme knows (Deployments, StatefulSets, DaemonSets,
// CronJobs, ...) are listed and watched as protobuf. kube-controller-manager
// watches them as protobuf too, and the API server encodes each write once
// per format and shares that encoding among watchers (its watch cache's
// cachingObject): a JSON watch made it encode every spec patch and every
// status write of a rollout burst a second time, for this process alone,
// and made this process parse it as text (BENCHMARKS.md, "Where the fan-out
// time went"). Other kinds (CRDs: Argo Rollouts, DeploymentConfigs) come
// through the lean dynamic client.
func (w *Watcher) workloadInformer(gvr schema.GroupVersionResource, kind, namespace string, sel selectors,
	tracker *templaterv.Tracker) (cache.SharedIndexInformer, func(cache.TransformFunc) cache.TransformFunc, error) {
	gvk := gvr.GroupVersion().WithKind(kind)
	if w.Rest == nil || kind == "" || !scheme.Scheme.Recognizes(gvk) {
		informer := dynamicInformer(w.workloads, gvr, namespace, sel, tracker, catalog.WorkloadIndexers())
		return informer, func(t cache.TransformFunc) cache.TransformFunc { return t }, nil
	}
	example, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, nil, fmt.Errorf("creating a %s: %w", gvk, err)
	}
	client, err := rest.RESTClientFor(catalog.Protobuf(w.Rest, gvr.GroupVersion()))
	if err != nil {
		return nil, nil, fmt.Errorf("creating a protobuf client for %s: %w", gvr, err)
	}
	// As the sources' informers list and watch (sourceInformer); applying
	// sel once more does nothing.
	base := cache.NewFilteredListWatchFromClient(client, gvr.Resource, namespace, sel.apply)
	lw := trackedListWatch(sel, tracker, base.ListWithContextFunc, base.WatchFuncWithContext)
	informer := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), example,
		cache.SharedIndexInformerOptions{Indexers: catalog.WorkloadIndexers(), ObjectDescription: gvr.String()})
	return informer, func(t cache.TransformFunc) cache.TransformFunc { return asUnstructured(example, gvk, t) }, nil
}

// trackedListWatch lists and watches with the kind's selectors, telling the
// tracker (when not nil) whether the objects the informer is about to
// transform are states of a list or writes of a watch.
func trackedListWatch(sel selectors, tracker *templaterv.Tracker, list cache.ListWithContextFunc, watchFn cache.WatchFuncWithContext) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			sel.apply(&o)
			if tracker != nil {
				tracker.BeginList()
			}
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			sel.apply(&o)
			w, err := watchFn(ctx, o)
			if err != nil || tracker == nil {
				return w, err
			}
			return trackWatch(w, o, tracker), nil
		},
	}
}

// asUnstructured returns next behind a step that turns the typed objects of
// example's type, as decoded from protobuf, into the unstructured objects
// the JSON path yields: the same map, so the same reduction and the same
// persisted template hash (TestProtobufWorkloadsReduceAsJSON), with
// managedFields left out as the lean dynamic client leaves them out.
// Anything else (a state the informer already holds) passes unchanged.
func asUnstructured(example runtime.Object, gvk schema.GroupVersionKind, next cache.TransformFunc) cache.TransformFunc {
	typed := reflect.TypeOf(example)
	return func(obj interface{}) (interface{}, error) {
		if reflect.TypeOf(obj) != typed {
			return next(obj)
		}
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, fmt.Errorf("converting a %s to unstructured: %w", gvk, err)
		}
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(gvk)
		return next(u)
	}
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
