package watch

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
)

// sourceInformer prefers protobuf: source data is the bulk of what the
// controller receives, and JSON makes it parse every byte as text (a 100 kB
// ConfigMap is a 100 kB JSON string to unescape). Kinds that client-go's
// scheme knows, ConfigMaps and Secrets among them, are therefore fetched
// through a typed REST client speaking protobuf; any other kind through the
// dynamic client. Both are reduced to the same digests by the transform.
// ConfigMaps and Secrets decode straight into reduced SourceStates, without
// decoding their data (catalog.SourceReducer.ProtobufSources).
func sourceInformer(rc *rest.Config, client dynamic.Interface, gvr schema.GroupVersionResource, kind, namespace string, reduce catalog.SourceReducer) (cache.SharedIndexInformer, error) {
	gvk := gvr.GroupVersion().WithKind(kind)
	if rc == nil || !scheme.Scheme.Recognizes(gvk) {
		return dynamicinformer.NewFilteredDynamicInformer(client, gvr, namespace, 0, cache.Indexers{}, nil).Informer(), nil
	}
	example, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("creating a %s: %w", gvk, err)
	}
	cfg := rest.CopyConfig(rc)
	gv := gvr.GroupVersion()
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if reducing, ok := reduce.ProtobufSources(gvk, cfg.NegotiatedSerializer); ok {
		cfg.NegotiatedSerializer, example = reducing, &catalog.SourceState{}
	}
	restClient, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a protobuf client for %s: %w", gvr, err)
	}
	lw := cache.NewFilteredListWatchFromClient(restClient, gvr.Resource, namespace, func(*metav1.ListOptions) {})
	return cache.NewSharedIndexInformer(lw, example, 0, cache.Indexers{}), nil
}
