package restart

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
)

// APIExists confirms existence with a metadata-only LIST by name: it needs
// only the list permission the informers already have, and no source data
// (no Secret value) crosses the wire. selector is the config's
// sourceSelector: the answer is about the sources the caches may hold, so
// that an unselected source is not taken for a cache that lags.
func APIExists(client metadata.Interface, kinds []config.SourceKind, selector string) ExistsFunc {
	resources := make(map[string]schema.GroupVersionResource, len(kinds))
	for _, k := range kinds {
		resources[k.Name] = k.GVR
	}
	return func(ctx context.Context, id catalog.SourceID) (bool, error) {
		gvr, ok := resources[id.Kind]
		if !ok {
			return false, fmt.Errorf("unknown source kind %q", id.Kind)
		}
		list, err := client.Resource(gvr).Namespace(id.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", id.Name).String(),
			LabelSelector: selector,
		})
		if err != nil {
			return false, fmt.Errorf("listing %s: %w", id, err)
		}
		return len(list.Items) > 0, nil
	}
}
