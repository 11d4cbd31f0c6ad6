package restart

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/keyread"
	"github.com/restart-controller/restart-controller/internal/sourcecodec"
)

var (
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
)

// APIFetch reads one source, data included, with a LIST by name: like
// APIExists it needs only the list permission the informers already have
// (a GET would need get). ConfigMaps and Secrets are read as protobuf
// through core (a core/v1 REST client configured for protobuf) and handed over still
// encoded, so that the key reader (internal/keyread) hashes their data where the response holds
// it; other kinds come through the dynamic client. Either reduces to the
// same digests. It reads what the key reader asks for: the keys a workload
// reads of a source too large to cache a digest per key.
func APIFetch(core rest.Interface, client dynamic.Interface) keyread.FetchFunc {
	return func(ctx context.Context, kind config.SourceKind, namespace, name string) (runtime.Object, error) {
		opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
		var items []runtime.Object
		list := &unstructured.UnstructuredList{} // empty when decoded as protobuf
		switch kind.GVR {
		case configMapsGVR, secretsGVR:
			body, err := core.Get().Namespace(namespace).Resource(kind.GVR.Resource).
				VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Raw()
			if err != nil {
				return nil, fmt.Errorf("listing %s/%s/%s: %w", kind.Name, namespace, name, err)
			}
			var ok bool
			if items, ok, err = sourcecodec.DecodeList(body); err != nil {
				return nil, fmt.Errorf("listing %s/%s/%s: %w", kind.Name, namespace, name, err)
			}
			if !ok { // answered in JSON after all
				if err := list.UnmarshalJSON(body); err != nil {
					return nil, fmt.Errorf("listing %s/%s/%s: %w", kind.Name, namespace, name, err)
				}
			}
		default:
			var err error
			if list, err = client.Resource(kind.GVR).Namespace(namespace).List(ctx, opts); err != nil {
				return nil, fmt.Errorf("listing %s/%s/%s: %w", kind.Name, namespace, name, err)
			}
		}
		for i := range list.Items {
			items = append(items, &list.Items[i])
		}
		for _, obj := range items {
			if o, ok := obj.(metav1.Object); ok && o.GetName() == name {
				return obj, nil
			}
		}
		return nil, nil
	}
}
