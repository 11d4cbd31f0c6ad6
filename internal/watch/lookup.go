package watch

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

// ConfigError is a mistake in the configuration that only the cluster can
// reveal, such as a misspelled resource of a built-in API group. It is a
// configuration error like those of the config loader: the process reports
// it before watching or writing anything, and exits with status 2.
type ConfigError struct {
	// Problems name their place in the config file: "workloads[2]: ...".
	Problems []string
}

func (e *ConfigError) Error() string { return strings.Join(e.Problems, "\n") }

// builtinGroup reports whether kube-apiserver serves the group itself: a
// group of client-go's scheme (the core group "" among them), or one of the
// two its embedded extension and aggregation servers serve. No CRD can add a
// resource to them, so a resource missing from a served built-in
// group-version is a typo, not a CRD that is not installed yet.
func builtinGroup(group string) bool {
	return group == "apiextensions.k8s.io" || group == "apiregistration.k8s.io" || scheme.Scheme.IsGroupRegistered(group)
}

// lookup is what discovery says of one configured resource.
type lookup struct {
	// resource describes it; nil when it is not served.
	resource *metav1.APIResource
	// groupVersionServed is set when its group-version is served, with or
	// without it; served then lists the resources it does serve.
	groupVersionServed bool
	served             []string
}

// lookUp asks discovery about the resource. A group-version that is not
// served is an answer, not an error.
func lookUp(disc Discovery, gvr schema.GroupVersionResource) (lookup, error) {
	list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return lookup{}, nil
	}
	if err != nil {
		return lookup{}, err
	}
	found := lookup{groupVersionServed: true}
	for i := range list.APIResources {
		r := &list.APIResources[i]
		if r.Name == gvr.Resource {
			found.resource = r
		}
		if !strings.Contains(r.Name, "/") { // not a subresource
			found.served = append(found.served, r.Name)
		}
	}
	slices.Sort(found.served)
	return found, nil
}

// misspelled returns the configuration problem of a resource that a served
// built-in group-version does not serve, or "" when there is none.
func (l lookup) misspelled(gvr schema.GroupVersionResource) string {
	if l.resource != nil || !l.groupVersionServed || !builtinGroup(gvr.Group) {
		return ""
	}
	group := gvr.Group
	if group == "" {
		group = `the core group ""`
	}
	return fmt.Sprintf("%s is not served by the API server: %s is a built-in API group, so no CRD will add %q to it "+
		"(%s serves: %s); check the group, version and resource",
		gvr, group, gvr.Resource, gvr.GroupVersion(), strings.Join(l.served, ", "))
}
