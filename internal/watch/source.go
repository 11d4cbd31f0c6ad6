package watch

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/templaterv"
)

// sourceInformer prefers protobuf: source data is the bulk of what the
// controller receives, and JSON makes it parse every byte as text (a 100 kB
// ConfigMap is a 100 kB JSON string to unescape). Kinds of core/v1
// (ConfigMaps and Secrets among them) are therefore fetched through a REST
// client speaking protobuf (CoreProtobuf); any other kind through the
// dynamic client. Both are reduced to the same digests by the transform.
// ConfigMaps and Secrets decode straight into reduced SourceStates, without
// decoding their data (catalog.SourceReducer.ProtobufSources).
//
// sel is applied by the API server to every list and watch (the config's
// sourceSelector and ignoredNamespaces), so that what it leaves out never
// reaches the process.
func sourceInformer(rc *rest.Config, client dynamic.Interface, gvr schema.GroupVersionResource, kind, namespace string, sel selectors,
	reduce catalog.SourceReducer) (cache.SharedIndexInformer, error) {
	gvk := gvr.GroupVersion().WithKind(kind)
	if rc == nil || gvr.GroupVersion() != corev1.SchemeGroupVersion || !scheme.Scheme.Recognizes(gvk) {
		return dynamicInformer(client, gvr, namespace, sel, nil, cache.Indexers{}), nil
	}
	example, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("creating a %s: %w", gvk, err)
	}
	cfg := catalog.CoreProtobuf(rc)
	if reducing, ok := reduce.ProtobufSources(gvk, cfg.NegotiatedSerializer); ok {
		cfg.NegotiatedSerializer, example = reducing, &catalog.SourceState{}
	}
	restClient, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a protobuf client for %s: %w", gvr, err)
	}
	lw := cache.NewFilteredListWatchFromClient(restClient, gvr.Resource, namespace, sel.apply)
	return cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{}), nil
}

// dynamicInformer is the informer client-go's dynamicinformer builds
// (NewFilteredDynamicInformer with no resync), built here because that
// package imports client-go's informers package: the generated informers
// and listers of every API group, none of which the controller uses. Its
// lists and watches tell tracker (when not nil) what they deliver
// (trackedListWatch).
func dynamicInformer(client dynamic.Interface, gvr schema.GroupVersionResource, namespace string, sel selectors,
	tracker *templaterv.Tracker, indexers cache.Indexers) cache.SharedIndexInformer {
	resource := client.Resource(gvr).Namespace(namespace)
	lw := trackedListWatch(sel, tracker, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return resource.List(ctx, o)
	}, resource.Watch)
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{Indexers: indexers, ObjectDescription: gvr.String()})
}

// selectors are the label and field selectors of a kind's lists and
// watches, applied by the API server.
type selectors struct {
	label, field string
}

func (s selectors) apply(o *metav1.ListOptions) {
	o.LabelSelector, o.FieldSelector = s.label, s.field
}
